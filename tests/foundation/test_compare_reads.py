"""store/plain.py and plain_series.py, the reads `runwatch runs compare` makes without
SQLAlchemy, answer as the SQLAlchemy readers do (store/queries, keys, jobs, series) on
SQLite and PostgreSQL: over histories with NaN, re-logged steps and keys logged in the
same records or not; and a series saved beside the index is used only while the index
holds its points."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine

from runwatch.ingest.indexer import Indexer
from runwatch.store import plain, plain_series
from runwatch.store import queries as q
from runwatch.store.db import HEAD_REVISION
from runwatch.store.jobs import job_row
from runwatch.store.keys import run_keys
from runwatch.store.points import SEQ_BITS
from runwatch.store.series import read_series
from tests.support import write_run


def history(seed: int, together: bool, n: int = 600) -> list[dict[str, Any]]:
    """Records of loss and grad_norm: NaN now and then, steps logged again after a
    restore, and (unless `together`) some records with a loss and no gradient norm."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    step = 0
    for seq in range(n):
        if rng.random() < 0.03:
            step = max(0, step - rng.randint(1, 40))
        rec: dict[str, Any] = {"seq": seq, "ts": 1.7e9 + seq, "step": step,
                               "loss": float("nan") if rng.random() < 0.05 else rng.random(),
                               "grad_norm": rng.random() * 3}
        if not together and rng.random() < 0.1:
            del rec["grad_norm"]
        out.append(rec)
        step += rng.choice((1, 1, 1, 2))
    return out


@pytest.fixture
def indexed(engine: Engine, runs_dir: Path) -> Engine:
    for i, name in enumerate(("together", "apart", "together-2")):
        write_run(runs_dir, name, [json.dumps(r) for r in history(i, name != "apart")],
                  method="sft")
    Indexer(engine, runs_dir).index_once()
    return engine


@pytest.fixture
def reader(indexed: Engine) -> Iterator[plain.Reader]:
    raw = indexed.raw_connection()
    yield plain.Reader(raw, "?" if indexed.dialect.paramstyle == "qmark" else "%s")
    raw.close()


def same(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> None:
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])  # NaN where NaN


def test_series_keys_and_runs_read_as_the_sqlalchemy_readers(indexed: Engine,
                                                              reader: plain.Reader) -> None:
    assert plain_series.SEQ_BITS == SEQ_BITS and plain.head_revision() == HEAD_REVISION
    assert plain.schema_current(reader)
    with indexed.connect() as conn:
        for name in ("together", "apart"):
            row = q.resolve_run(conn, name)
            mine = plain.resolve_run(reader, name)
            assert (mine.pk, mine.run_id, mine.name, mine.method, mine.config) == (
                row.pk, row.run_id, row.name, row.method, row.config)
            keys = plain.run_keys(reader, row.pk)
            assert [(k.id, k.key, k.points) for k in keys] == [
                (k.id, k.key, k.points) for k in run_keys(conn, row.pk)]
            for key in keys:
                s = read_series(conn, key.id)
                same(plain_series.read_series(reader, key.id), (s.step, s.value))
            assert plain.job_devices(reader, row.pk) is None and job_row(conn, row.pk) is None
            by_name = {k.key: k for k in keys}
            pair = plain_series.read_pair(reader, by_name["loss"], by_name["grad_norm"])
            if name == "apart":
                assert pair is None, "points not one for one are read key by key"
                continue
            assert pair is not None
            loss, grad = (read_series(conn, by_name[k].id) for k in ("loss", "grad_norm"))
            same((pair[0], pair[1]), (loss.step, loss.value))
            same((pair[0], pair[2]), (grad.step, grad.value))


@pytest.mark.parametrize("ref", ["together", "tog", "together-", "zzz", "ap"])
def test_a_reference_resolves_or_fails_as_resolve_run_says(indexed: Engine,
                                                           reader: plain.Reader,
                                                           ref: str) -> None:
    with indexed.connect() as conn:
        try:
            expected: Any = q.resolve_run(conn, ref).pk
        except q.RunNotFound as exc:
            expected = (str(exc), exc.candidates)
    try:
        got: Any = plain.resolve_run(reader, ref).pk
    except plain.NoSuchRun as exc:
        got = (str(exc), exc.candidates)
    assert got == expected


def test_saved_series_are_used_only_while_the_index_holds_their_points(
        tmp_path: Path, runs_dir: Path) -> None:
    from runwatch.store.db import open_engine

    db = tmp_path / "index.db"
    engine = open_engine(db)
    run = write_run(runs_dir, "r", [json.dumps(r) for r in history(7, True, 300)],
                    method="sft")
    indexer = Indexer(engine, runs_dir)
    indexer.index_once()
    reader = plain.Reader(plain.connect_sqlite(db))
    saved = plain_series.SavedSeries(tmp_path / "saved", min_points=0)
    pk = plain.resolve_run(reader, "r").pk
    keys = [k for k in plain.run_keys(reader, pk) if k.key in ("loss", "grad_norm")]

    def fresh() -> dict[int, tuple[np.ndarray, np.ndarray]]:
        return {k.id: plain_series.read_series(reader, k.id) for k in keys}

    first = saved.get(reader, pk, keys)
    assert sorted(p.name for p in (tmp_path / "saved").iterdir()) == sorted(
        f"{pk}-{k.id}.npz" for k in keys)
    again = saved.get(reader, pk, keys)
    for k in keys:
        same(first[k.id], fresh()[k.id])
        same(again[k.id], fresh()[k.id])
    # the run grows (a re-logged step among the new points): the saved files are stale
    with open(run / "metrics.jsonl", "a", encoding="utf-8") as f:
        f.writelines(json.dumps({**r, "seq": 300 + r["seq"], "step": r["step"] + 100}) + "\n"
                     for r in history(8, True, 50))
    indexer.index_once()
    keys = [k for k in plain.run_keys(reader, pk) if k.key in ("loss", "grad_norm")]
    grown = saved.get(reader, pk, keys)
    for k in keys:
        same(grown[k.id], fresh()[k.id])
        assert grown[k.id][0].size != first[k.id][0].size
    # a saved file that is not a series is read past
    for p in (tmp_path / "saved").iterdir():
        p.write_bytes(b"not a zip")
    for key_id, series in saved.get(reader, pk, keys).items():
        same(series, fresh()[key_id])
    reader.conn.close()
    engine.dispose()


def test_saved_series_of_an_index_made_again_are_not_used(tmp_path: Path,
                                                          runs_dir: Path) -> None:
    """The index file removed and made again (its ids start over): a series saved from the
    old one, of another run at the same run and key ids with as many points at the same
    steps, is not used."""
    from runwatch.store.db import open_engine

    db = tmp_path / "index.db"
    saved = plain_series.SavedSeries(tmp_path / "saved", min_points=0)
    lines = history(7, True, 300)
    for attempt, (run_id, shift) in enumerate((("id-first", 0.0), ("id-second", 0.5))):
        if attempt:  # the index and the run removed, a new run of the same shape trained
            for p in tmp_path.glob("index.db*"):
                p.unlink()
            shutil.rmtree(runs_dir / "r")
        write_run(runs_dir, "r", [json.dumps({**r, "loss": r["loss"] + shift}) for r in lines],
                  method="sft", run_id=run_id)
        engine = open_engine(db)
        Indexer(engine, runs_dir).index_once()
        engine.dispose()
        reader = plain.Reader(plain.connect_sqlite(db))
        pk = plain.resolve_run(reader, "r").pk
        keys = [k for k in plain.run_keys(reader, pk) if k.key in ("loss", "grad_norm")]
        got = saved.get(reader, pk, keys)
        for k in keys:
            same(got[k.id], plain_series.read_series(reader, k.id))
        reader.conn.close()
