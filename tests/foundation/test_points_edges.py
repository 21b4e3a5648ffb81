"""Edge cases of metric points: the block and record paths, the piecewise indexer, key
statistics, the health hook and the live stream's point query.

Every test uses real parts: run folders on disk, a real SQLite index (open_engine), the
real Indexer, ingest_records and the server's own functions and routes.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, select
from sqlalchemy.exc import OperationalError

from runwatch.ingest import Indexer, ingest_records
from runwatch.ingest.points import KEYS_PER_STATEMENT
from runwatch.ingest.result import MAX_PROBLEMS_LISTED
from runwatch.server.app import create_app
from runwatch.server.updates import RunCursor, _new_points
from runwatch.store import open_engine
from runwatch.store import queries as q
from runwatch.store import schema as s
from runwatch.store.points import SEQ_LIMIT, PointColumns, read_points
from tests.support import manifest, write_run

MB = 1024 * 1024


def pk_of(engine: Engine, name: str) -> int:
    with engine.connect() as conn:
        return int(q.resolve_run(conn, name).pk)


def stored(engine: Engine, name: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every stored point of a run by key: (seq, step, ts, value), NULL value as NaN."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with engine.connect() as conn:
        pk = q.resolve_run(conn, name).pk
        k = s.metric_keys.c
        for kid, key in conn.execute(select(k.id, k.key).where(k.run_pk == pk)):
            out[key] = [(seq, step, ts, math.nan if v is None else v)
                        for seq, step, ts, v in read_points(conn, kid)]
    return out


def key_rows(engine: Engine, name: str) -> dict[str, Any]:
    with engine.connect() as conn:
        pk = q.resolve_run(conn, name).pk
        return {r.key: r for r in conn.execute(
            select(s.metric_keys).where(s.metric_keys.c.run_pk == pk))}


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def same_points(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    return len(a) == len(b) and all(
        all(same(x, y) for x, y in zip(p, r, strict=True)) for p, r in zip(a, b, strict=True))


class Collect:
    """An indexer hook (a real one, as the runner's series cache is) that keeps what it got."""

    def __init__(self) -> None:
        self.calls = 0
        self.points: dict[str, list[tuple[Any, ...]]] = {}

    def __call__(self, conn: Any, run_pk: int, points: Mapping[str, PointColumns]) -> None:
        self.calls += 1
        for key, (seqs, steps, tss, values) in points.items():
            self.points.setdefault(key, []).extend(zip(seqs, steps, tss, values, strict=True))


# --- input at the limits: wide runs, many problems, bad steps, ts, values and seqs ---------


def test_stream_reads_new_points_of_a_run_with_over_a_thousand_keys(
        runs_dir: Path, tmp_path: Path) -> None:
    """The live stream reads the new points of a run with more metric keys (per-layer
    statistics) than SQLite's expression depth limit of 1000: every point, every key."""
    keys = 1100
    write_run(runs_dir, "wide", [{"seq": i, "step": i, "ts": 1e9 + i,
                                  **{f"layer/{k:04d}/norm": float(k) for k in range(keys)}}
                                 for i in range(2)])
    engine = open_engine(tmp_path / "i.db")
    Indexer(engine, runs_dir).index_once()
    points: list[dict[str, Any]]
    error, points = None, []
    with engine.connect() as conn:
        try:
            points, _more = _new_points(conn, pk_of(engine, "wide"), RunCursor(), {})
        except OperationalError as exc:  # keep the failure short: the SQL is 1100 ORs
            error = str(exc.orig)
    assert error is None, f"the stream's point query failed: {error}"
    assert [p["seq"] for p in points] == [0, 1]
    assert len(points[1]["values"]) == keys


def test_problems_of_one_slice_are_itemised_at_most_twenty_times(
        runs_dir: Path, tmp_path: Path) -> None:
    """At most MAX_PROBLEMS_LISTED problems are itemised per file and pass, the rest
    counted in one "N more problems like the above" line, also when the indexer reads the
    file in several 1 MiB pieces; every good value is still stored."""
    pad = "p" * 200
    lines = [{"seq": i, "step": i, "ts": 1e9, "loss": 1.0, "note": pad} for i in range(11_000)]
    write_run(runs_dir, "noisy", lines)
    assert (runs_dir / "noisy" / "metrics.jsonl").stat().st_size > 2 * MB
    engine = open_engine(tmp_path / "i.db")
    report = Indexer(engine, runs_dir).index_once()
    summaries = [p for p in report.problems if "more problems like the above" in p]
    assert len(report.problems) <= MAX_PROBLEMS_LISTED + 1, len(report.problems)
    assert len(summaries) == 1 and f"{11_000 - MAX_PROBLEMS_LISTED} more" in summaries[0]
    # every good value is still stored
    assert len(stored(engine, "noisy")["loss"]) == 11_000


def test_a_record_refused_for_its_step_leaves_no_empty_metric_key(
        runs_dir: Path, tmp_path: Path) -> None:
    """Records refused for a negative step are each reported and register none of their
    keys: the run's key list holds only keys that have points."""
    write_run(runs_dir, "neg", [{"seq": 0, "step": 0, "ts": 1e9, "loss": 1.0}]
              + [{"seq": i, "step": -1, "ts": 1e9, "ghost": 1.0} for i in range(1, 4)])
    engine = open_engine(tmp_path / "i.db")
    report = Indexer(engine, runs_dir).index_once()
    assert sum("step -1 is negative" in p for p in report.problems) == 3
    assert set(key_rows(engine, "neg")) == {"loss"}


def test_nan_ts_on_the_block_path_is_not_dropped_silently(runs_dir: Path,
                                                          tmp_path: Path) -> None:
    """NaN is a legal token in metrics.jsonl, and an unusable wall time must not cost a
    record its metrics: a point whose ts is NaN is stored at ts 0.0, as one without ts
    is, and the health hook is fed exactly what the index holds."""
    write_run(runs_dir, "nants", [{"seq": i, "step": i, "ts": math.nan if i == 1 else 1e9 + i,
                                   "loss": float(i)} for i in range(3)])
    engine = open_engine(tmp_path / "i.db")
    hook = Collect()
    report = Indexer(engine, runs_dir, hooks=[hook]).index_once()
    points = stored(engine, "nants")["loss"]
    assert [(p[0], p[2]) for p in points] == [(0, 1e9), (1, 0.0), (2, 1e9 + 2)], (
        points, report.problems)
    assert [p[0] for p in hook.points["loss"]] == [0, 1, 2]


def test_nan_ts_on_the_record_path_does_not_stop_the_indexer(runs_dir: Path,
                                                             tmp_path: Path) -> None:
    """A NaN ts on the record path (its block also holds a bad record) does not stop the
    indexer: the run's later points and the runs indexed after it are stored."""
    write_run(runs_dir, "a-nants", [
        {"seq": 0, "step": 0, "ts": math.nan, "loss": 1.0},
        {"seq": 1, "step": 1, "ts": 1e9, "loss": "bad"},
        {"seq": 2, "step": 2, "ts": 1e9, "loss": 2.0},
    ])
    write_run(runs_dir, "b-fine", [{"seq": 0, "step": 0, "ts": 1e9, "loss": 1.0}])
    engine = open_engine(tmp_path / "i.db")
    Indexer(engine, runs_dir).index_once()
    assert [p[0] for p in stored(engine, "a-nants")["loss"]][-1] == 2
    assert len(stored(engine, "b-fine")["loss"]) == 1


def test_an_integer_value_beyond_64_bits_does_not_stop_the_indexer(runs_dir: Path,
                                                                    tmp_path: Path) -> None:
    """JSON integers are unbounded: a value outside the signed 64-bit range is stored as a
    float, and the runs indexed after it are stored too."""
    big = 2**63
    write_run(runs_dir, "a-big", [{"seq": 0, "step": 0, "ts": 1e9, "tokens": 1},
                                  {"seq": 1, "step": 1, "ts": 1e9, "tokens": big}])
    write_run(runs_dir, "b-fine", [{"seq": 0, "step": 0, "ts": 1e9, "loss": 1.0}])
    engine = open_engine(tmp_path / "i.db")
    Indexer(engine, runs_dir).index_once()
    assert [p[3] for p in stored(engine, "a-big")["tokens"]] == [1.0, float(big)]
    assert len(stored(engine, "b-fine")["loss"]) == 1


def _batch(seqs: list[int], value: float = 0.0) -> list[dict[str, Any]]:
    return [{"seq": q_, "step": 10 * q_, "ts": 1e9 + q_, "loss": value + q_} for q_ in seqs]


@pytest.mark.parametrize("batches", [
    # an older batch sent again after a newer one (an HTTP client retrying)
    [_batch([0, 1, 2]), _batch([3, 4, 5]), _batch([0, 1, 2])],
    # one batch whose records are not in seq order
    [_batch([0, 5, 3])],
    # one batch repeating a seq: the first record is the one stored
    [_batch([0, 1]) + _batch([1], value=100.0)],
], ids=["resent-older-batch", "out-of-order", "repeated-seq"])
def test_key_stats_name_the_newest_stored_point(runs_dir: Path, tmp_path: Path,
                                                batches: list[list[dict[str, Any]]]) -> None:
    """A key's statistics (shown by /api/runs/{run}/metrics/keys) count its stored points
    and name the newest one, by seq, whatever the batches: an older batch sent again,
    records out of seq order, or a repeated seq (whose first record is the one kept)."""
    write_run(runs_dir, "ks", [])
    engine = open_engine(tmp_path / "i.db")
    Indexer(engine, runs_dir).index_once()
    pk = pk_of(engine, "ks")
    for batch in batches:
        with engine.begin() as conn:
            ingest_records(conn, pk, "metrics.jsonl", batch)
    points = stored(engine, "ks")["loss"]
    newest = max(points)
    row = key_rows(engine, "ks")["loss"]
    assert row.points == len(points)
    assert (row.last_step, row.last_value) == (newest[1], newest[3])


def test_a_repeated_seq_in_one_batch_keeps_the_first_record_on_both_paths(
        runs_dir: Path, tmp_path: Path) -> None:
    """Of two records sharing a seq in one batch the first is kept, whichever ingest path
    each takes (a record without ts takes the record path, one with ts the block path)."""
    write_run(runs_dir, "a-block", [])
    engine = open_engine(tmp_path / "i.db")
    Indexer(engine, runs_dir).index_once()
    pk = pk_of(engine, "a-block")
    with engine.begin() as conn:
        ingest_records(conn, pk, "metrics.jsonl", [
            {"seq": 0, "step": 0, "ts": 1e9, "a": 1.0},
            {"seq": 0, "step": 1, "ts": 1e9, "a": 2.0},  # same shape: block path
            {"seq": 1, "step": 2, "a": 3.0},              # no ts: record path
            {"seq": 1, "step": 3, "ts": 1e9, "a": 4.0},  # block path
        ])
    values = [p[3] for p in stored(engine, "a-block")["a"]]
    assert values == [1.0, 3.0], "the first record of each seq is kept"


def test_a_record_with_a_seq_too_big_for_a_point_id_does_not_hide_the_rest(
        runs_dir: Path, tmp_path: Path) -> None:
    """A seq of 2**36 or more (too big for a point id) is refused with a problem and is
    not the file's high-water mark: the records written after it are indexed."""
    run = write_run(runs_dir, "bigseq", [{"seq": 0, "step": 0, "ts": 1e9, "loss": 0.0},
                                         {"seq": SEQ_LIMIT, "step": 1, "ts": 1e9, "loss": 1.0}])
    engine = open_engine(tmp_path / "i.db")
    report = Indexer(engine, runs_dir).index_once()
    assert any("'seq' must be an integer" in p for p in report.problems)
    with open(run / "metrics.jsonl", "a") as fh:  # the run goes on
        for i in (2, 3):
            fh.write(json.dumps({"seq": i, "step": i, "ts": 1e9, "loss": float(i)}) + "\n")
    Indexer(engine, runs_dir).index_once()
    assert [p[0] for p in stored(engine, "bigseq")["loss"]] == [0, 2, 3]


def test_a_line_longer_than_a_slice_is_one_problem_and_line_numbers_stay_right(
        runs_dir: Path, tmp_path: Path) -> None:
    """A line over SLICE_BYTES is one problem, "the line is longer than …", and is skipped
    whole: the lines after it are read with their true line numbers."""
    write_run(runs_dir, "long", [
        {"seq": 0, "step": 0, "ts": 1e9, "loss": 0.0},
        {"seq": 1, "step": 1, "ts": 1e9, "loss": 1.0, "note": "x" * (17 * MB)},
        {"seq": 2, "step": 2, "ts": 1e9, "loss": "bad"},
        {"seq": 3, "step": 3, "ts": 1e9, "loss": 3.0},
    ])
    engine = open_engine(tmp_path / "i.db")
    report = Indexer(engine, runs_dir).index_once()
    assert [p[0] for p in stored(engine, "long")["loss"]] == [0, 3]
    assert any("line 2: the line is longer than" in p for p in report.problems)
    assert any("line 3: 'loss' is str 'bad'" in p for p in report.problems), report.problems
    assert len(report.problems) == 2, report.problems


# --- the block and record paths agree, from files and over HTTP -------------------------


def _varied_records(first_seq: int, n: int, bad_every: int | None) -> list[dict[str, Any]]:
    """Records of several shapes: int/bool/NaN/±Infinity values, a key that appears
    mid-run, records without ts, records wider than one statement; with `bad_every`, a
    record of the same shape with a string value every so often (forcing its block onto
    the record path)."""
    out: list[dict[str, Any]] = []
    seq = first_seq
    for i in range(n):
        rec: dict[str, Any] = {"seq": seq, "step": i, "ts": 1e9 + i, "loss": 1 / (i + 1),
                               "n": i, "ok": i % 2 == 0,
                               "odd": math.nan if i % 5 == 0 else (math.inf if i % 5 == 1
                                                                   else -math.inf)}
        if i >= n // 2:
            rec["late"] = float(i)  # a key appearing mid-run
        if bad_every and i % bad_every == bad_every - 1:
            rec["loss"] = "not a number"
        out.append(rec)
        seq += 1
        if i % 50 == 0:
            out.append({"seq": seq, "step": i, "loss": 0.5})  # no ts
            seq += 1
        if i % 97 == 0:
            wide: dict[str, Any] = {f"w/{k:03d}": float(k + i)
                                    for k in range(KEYS_PER_STATEMENT + 1)}
            if bad_every and i % 2 == 0:
                wide[f"w/{KEYS_PER_STATEMENT:03d}"] = "bad"  # bad past the first statement
            out.append({"seq": seq, "step": i, "ts": 1e9 + i, **wide})
            seq += 1
    return out


def test_block_and_record_paths_store_and_report_the_same_points(runs_dir: Path,
                                                                 tmp_path: Path) -> None:
    """The same good records give the same stored points, key statistics and health
    hook columns whether their blocks go the block path (clean file) or the record path
    (each block also holds a bad record): int and bool stored as floats, NaN as NULL,
    ±Infinity kept, a missing ts as 0.0, wide records in full."""
    clean = _varied_records(0, 400, None)
    dirty = _varied_records(0, 400, bad_every=7)
    write_run(runs_dir, "clean", clean)
    write_run(runs_dir, "dirty", dirty)
    engine = open_engine(tmp_path / "i.db")
    hooks = {"clean": Collect(), "dirty": Collect()}
    for name in hooks:
        Indexer(engine, runs_dir, hooks=[hooks[name]]).index_run(runs_dir / name,
                                                                    _report())
    a, b = stored(engine, "clean"), stored(engine, "dirty")
    assert set(a) == set(b)
    bad_seqs = {r["seq"] for r in dirty if "not a number" in r.values() or "bad" in r.values()}
    for key in a:
        for name, got in (("clean", a[key]), ("dirty", b[key])):
            # the hook saw exactly what is stored
            assert same_points(hooks[name].points.get(key, []), got), (name, key)
        dropped_key = {"loss"} if key == "loss" else {f"w/{KEYS_PER_STATEMENT:03d}"}
        want = [p for p in a[key] if p[0] not in bad_seqs or key not in dropped_key]
        assert same_points(want, b[key]), key
    assert math.isnan(a["odd"][0][3]) and a["odd"][1][3] == math.inf
    assert a["ok"][0][3] == 1.0 and a["n"][3][3] == 3.0
    assert any(p[2] == 0.0 for p in a["loss"]), "a record without ts is stored at ts 0"
    for name, points in (("clean", a), ("dirty", b)):
        rows = key_rows(engine, name)
        for key, pts in points.items():
            assert rows[key].points == len(pts), (name, key)
            assert rows[key].last_step == pts[-1][1], (name, key)


def _report() -> Any:
    from runwatch.ingest.indexer import IndexReport

    return IndexReport()


def test_a_file_read_in_pieces_torn_and_growing_is_stored_once_with_right_lines(
        runs_dir: Path, tmp_path: Path) -> None:
    """A file over several 1 MiB pieces (lines straddle each piece boundary) ending in a
    torn line: the complete lines are stored once, in one slice and one hook call; a
    bad record past the first piece is reported with its true line number. When the
    torn line is finished and the file grows, the next pass stores exactly the rest,
    and indexing once more adds nothing."""
    pad = {f"padding/{'x' * 24}/{k}": float(k) for k in range(5)}  # longer lines
    lines: list[dict[str, Any]] = [{"seq": i, "step": i, "ts": 1e9 + i, "loss": float(i),
                                    **pad} for i in range(12_000)]
    lines[9_000]["loss"] = "x" * 50  # a bad value, far past the first piece
    run = write_run(runs_dir, "grow", lines)
    path = run / "metrics.jsonl"
    size = path.stat().st_size
    assert size > 2 * MB
    torn = json.dumps({"seq": 12_000, "step": 12_000, "ts": 1e9, "loss": 12_000.0})
    with open(path, "a") as fh:
        fh.write(torn[:20])
    engine = open_engine(tmp_path / "i.db")
    hook = Collect()
    indexer = Indexer(engine, runs_dir, hooks=[hook])
    report = indexer.index_once()
    assert [p for p in report.problems if "line" in p] == [
        f"{run}/metrics.jsonl line 9001: 'loss' is str '{'x' * 40}', not a number; skipped"]
    assert hook.calls == 1
    got = stored(engine, "grow")["loss"]
    assert [p[0] for p in got] == [i for i in range(12_000) if i != 9_000]
    assert same_points(hook.points["loss"], got)
    with open(path, "a") as fh:
        fh.write(torn[20:] + "\n")
        for i in range(12_001, 12_100):
            fh.write(json.dumps({"seq": i, "step": i, "ts": 1e9 + i, "loss": float(i)}) + "\n")
    hook2 = Collect()
    Indexer(engine, runs_dir, hooks=[hook2]).index_once()
    assert [p[0] for p in hook2.points["loss"]] == list(range(12_000, 12_100))
    got = stored(engine, "grow")["loss"]
    assert len(got) == 12_099 and key_rows(engine, "grow")["loss"].points == 12_099
    assert Indexer(engine, runs_dir).index_once().rows == 0


def _post(app: Any, body: dict[str, Any]) -> httpx.Response:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://test") as client:
            return await client.post("/api/ingest", json=body)

    return asyncio.run(go())


def test_http_batches_sent_again_store_and_count_each_point_once(tmp_path: Path) -> None:
    """Over HTTP, a batch sent twice and a batch overlapping an earlier one store each
    point once, keep the key's count exact and the health engine's seq high-water mark
    at the newest point."""
    engine = open_engine(tmp_path / "i.db")
    app = create_app(engine, runs_dir=tmp_path / "runs")

    def batch(seqs: range) -> dict[str, Any]:
        return {"run_id": "id-h", "file": "metrics.jsonl", "manifest": manifest("h"),
                "records": [{"seq": i, "step": i, "ts": 1e9 + i, "loss": i / 10, "n": i}
                            for i in seqs]}

    rows = [_post(app, batch(r)).json()["results"][0]["rows"]
            for r in (range(10), range(10), range(5, 15))]
    assert rows == [20, 0, 10]
    points = stored(engine, "h")
    assert [p[0] for p in points["loss"]] == list(range(15))
    assert {k: r.points for k, r in key_rows(engine, "h").items()} == {"loss": 15, "n": 15}
    with engine.connect() as conn:
        last_seq = conn.execute(select(s.health_state.c.last_seq).where(
            s.health_state.c.run_pk == pk_of(engine, "h"))).scalar()
    assert last_seq == 14
