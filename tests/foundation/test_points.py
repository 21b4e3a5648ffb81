"""Metric points: every shape of record is stored exactly, by whichever path it takes."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from runwatch.ingest import Indexer
from runwatch.store import open_engine
from runwatch.store import queries as q
from runwatch.store import schema as s
from runwatch.store.detail import log_rows
from runwatch.store.points import KEY_LIMIT, SEQ_LIMIT, PointIdError, id_range, key_base
from tests.support import write_run


def expected_history(records: list[dict[str, Any]]) -> dict[int, dict[str, float]]:
    """What the index must hold: numeric values by step, the later record winning."""
    out: dict[int, dict[str, float]] = {}
    for rec in records:
        step = rec.get("step")
        if type(step) is not int or step < 0:
            continue
        for k, v in rec.items():
            if k in ("seq", "step", "ts") or not isinstance(v, int | float) or not k:
                continue
            out.setdefault(step, {})[k] = float(v)
    return out


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def test_mixed_shapes_bad_records_and_wide_records_are_stored_exactly(
        runs_dir: Path, tmp_path: Path) -> None:
    records: list[dict[str, Any]] = []
    seq = 0

    def add(**fields: Any) -> None:
        nonlocal seq
        records.append({"seq": seq, "ts": 1e9 + seq, **fields})
        seq += 1

    for step in range(300):
        add(step=step, loss=1 / (step + 1), lr=1e-4, ok=step % 2 == 0, n=step)
        if step % 7 == 0:  # a second shape, interleaved, sharing no key with the first
            add(step=step, **{"val/acc": step / 300, "val/nan": math.nan, "val/inf": math.inf})
    # a block of one shape with a bad record in the middle: the rest of it is kept
    for step in range(300, 320):
        add(step=step, loss="broken" if step == 310 else 0.5, lr=1e-4, ok=True, n=step)
    add(step=319, **{"val/acc": 1.0, "val/nan": math.nan, "val/inf": 0.0})
    add(step=-1, loss=0.1, lr=1e-4, ok=True, n=0)  # a bad step: the record is refused
    add(step=319, **{"val/acc": 1.0, "val/nan": math.nan, "val/inf": 0.0})
    # records wider than one statement, twice (one block), then a narrower one
    for step in (320, 321):
        add(step=step, **{f"layer/{i:03d}/grad_norm": step + i / 1000 for i in range(450)})
    add(step=322, loss=0.25)
    # a record that repeats a step: the later one wins
    add(step=322, loss=0.125)
    write_run(runs_dir, "mixed", records)

    engine = open_engine(tmp_path / "i.db")
    report = Indexer(engine, runs_dir).index_once()
    problems = "\n".join(report.problems)
    assert "'loss' is str 'broken', not a number" in problems
    assert "step -1 is negative" in problems
    want = expected_history(records)
    with engine.connect() as conn:
        pk = q.resolve_run(conn, "mixed").pk
        got = {row.step: row.values for row in q.history(conn, pk)}
        keys = {r.key: r for r in conn.execute(select(s.metric_keys).where(
            s.metric_keys.c.run_pk == pk))}
    assert set(got) == set(want)
    for step, values in want.items():
        assert set(got[step]) == set(values), step
        for k, v in values.items():
            assert same(got[step][k], v), (step, k, got[step][k], v)
    # the per-key statistics match what is stored
    points = {k: sum(1 for r in records if k in r and isinstance(r[k], int | float)
                     and type(r["step"]) is int and r["step"] >= 0) for k in keys}
    assert {k: r.points for k, r in keys.items()} == points
    assert keys["loss"].last_step == 322 and keys["loss"].last_value == 0.125
    assert keys["layer/449/grad_norm"].last_value == pytest.approx(321.449)
    assert keys["val/nan"].last_value is None, "NaN is stored as NULL, its newest value unknown"
    # indexing again adds nothing
    assert Indexer(engine, runs_dir).index_once().rows == 0


def test_a_line_longer_than_a_read_piece_is_read_whole(runs_dir: Path, tmp_path: Path) -> None:
    write_run(runs_dir, "long", [{"seq": 0, "step": 0, "ts": 1e9, "loss": 1.0}])
    message = "x" * (3 * 1024 * 1024)
    with open(runs_dir / "long" / "logs.jsonl", "w") as fh:
        fh.write(json.dumps({"seq": 0, "ts": 1e9, "level": "info", "message": message}) + "\n")
        fh.write(json.dumps({"seq": 1, "ts": 1e9, "level": "info", "message": "after"}) + "\n")
    engine = open_engine(tmp_path / "i.db")
    report = Indexer(engine, runs_dir).index_once()
    assert report.problems == []
    with engine.connect() as conn:
        newest_first = log_rows(conn, q.resolve_run(conn, "long").pk)
    assert [len(r.message) for r in newest_first] == [5, len(message)]


def test_point_ids_keep_keys_apart_and_refuse_what_does_not_fit() -> None:
    low, high = id_range(3)
    assert (low, high) == (key_base(3), key_base(4) - 1)
    assert id_range(3, after_seq=9, upto_seq=20) == (key_base(3) + 10, key_base(3) + 20)
    assert high - low + 1 == SEQ_LIMIT
    with pytest.raises(PointIdError, match="start a new index"):
        key_base(KEY_LIMIT)
    assert key_base(KEY_LIMIT - 1) + SEQ_LIMIT - 1 == 2**63 - 1, "ids fit a signed 64-bit int"
