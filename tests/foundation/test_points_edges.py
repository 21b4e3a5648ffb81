"""Edge cases of metric points: the block and record paths, the piecewise indexer, key
statistics, the health hook and the live stream's point query.

Every test uses real parts: run folders on disk, a real SQLite index (open_engine), the
real Indexer, ingest_records and the server's own functions and routes.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, select
from sqlalchemy.exc import OperationalError

from runwatch.ingest import Indexer, ingest_records
from runwatch.ingest.records import KEYS_PER_STATEMENT, MAX_PROBLEMS_LISTED
from runwatch.server.app import create_app
from runwatch.server.sse import RunCursor, _new_points
from runwatch.store import open_engine
from runwatch.store import queries as q
from runwatch.store import schema as s
from runwatch.store.points import SEQ_LIMIT, read_points

MB = 1024 * 1024


def manifest(name: str) -> dict[str, Any]:
    return {"schema_version": 1, "run_id": f"id-{name}", "name": name, "project": "p",
            "created_at": 1e9}


def write_run(runs: Path, name: str, lines: list[Any], end: str = "\n") -> Path:
    """A run folder whose metrics.jsonl holds `lines` (dicts as JSON, str as they are)."""
    run = runs / name
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps(manifest(name)))
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    (run / "metrics.jsonl").write_text(text + end if lines else "")
    return run


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

    def __call__(self, conn: Any, run_pk: int, points: dict[str, Any]) -> None:
        self.calls += 1
        for key, (seqs, steps, tss, values) in points.items():
            self.points.setdefault(key, []).extend(zip(seqs, steps, tss, values, strict=True))


# --- bugs ------------------------------------------------------------------------------


def test_stream_reads_new_points_of_a_run_with_over_a_thousand_keys(
        runs_dir: Path, tmp_path: Path) -> None:
    """The live stream's point query ORs one id range per changed key. SQLite parses
    `a OR b OR ...` into a tree as deep as the list, and refuses depth > 1000, so a run
    with more than ~1000 metric keys (per-layer statistics) can no longer be streamed.
    Before the change the query was `key_id IN (...)`, which has no such limit."""
    keys = 1100
    write_run(runs_dir, "wide", [{"seq": i, "step": i, "ts": 1e9 + i,
                                  **{f"layer/{k:04d}/norm": float(k) for k in range(keys)}}
                                 for i in range(2)])
    engine = open_engine(tmp_path / "i.db")
    Indexer(engine, runs_dir).index_once()
    error, points = None, []
    with engine.connect() as conn:
        try:
            points = _new_points(conn, pk_of(engine, "wide"), RunCursor(), {})
        except OperationalError as exc:  # keep the failure short: the SQL is 1100 ORs
            error = str(exc.orig)
    assert error is None, f"the stream's point query failed: {error}"
    assert [p["seq"] for p in points] == [0, 1]
    assert len(points[1]["values"]) == keys


def test_problems_of_one_slice_are_itemised_at_most_twenty_times(
        runs_dir: Path, tmp_path: Path) -> None:
    """At most MAX_PROBLEMS_LISTED problems are itemised per file and batch, the rest
    counted in one line. The indexer now calls ingest_records per 1 MiB piece and caps
    each piece on its own, so one 16 MiB slice lists up to 16 x 20 problems plus 16
    "N more problems" lines (before: 20 + 1), and the run's problem count grows with
    them. `total.merge` caps correctly, but its problems are never used."""
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
    """The block path registers a block's new keys before it checks the block; when the
    block then fails (here: every record has a negative step) the record path refuses
    each record, but the keys stay, with no points, and show up in the run's key list.
    The record path (and the code before the change) checks the step first."""
    write_run(runs_dir, "neg", [{"seq": 0, "step": 0, "ts": 1e9, "loss": 1.0}]
              + [{"seq": i, "step": -1, "ts": 1e9, "ghost": 1.0} for i in range(1, 4)])
    engine = open_engine(tmp_path / "i.db")
    report = Indexer(engine, runs_dir).index_once()
    assert sum("'step' must be a non-negative integer" in p for p in report.problems) == 3
    assert set(key_rows(engine, "neg")) == {"loss"}


def test_nan_ts_on_the_block_path_is_not_dropped_silently(runs_dir: Path,
                                                          tmp_path: Path) -> None:
    """NaN is a legal token in metrics.jsonl. A NaN ts binds as NULL into the NOT NULL ts
    column, and the block path's INSERT OR IGNORE then skips the point without a word:
    the record counts as ingested, the health hook is fed the point, key statistics
    name its step, yet it is not in the index and no problem is reported."""
    write_run(runs_dir, "nants", [{"seq": i, "step": i, "ts": math.nan if i == 1 else 1e9 + i,
                                   "loss": float(i)} for i in range(3)])
    engine = open_engine(tmp_path / "i.db")
    hook = Collect()
    report = Indexer(engine, runs_dir, on_metrics=hook).index_once()
    points = stored(engine, "nants")["loss"]
    reported = any("line 2" in p for p in report.problems)
    assert [p[0] for p in points] == [0, 1, 2] or reported, (points, report.problems)
    # whatever is decided, the health hook must see what the index holds, no more
    assert [p[0] for p in hook.points["loss"]] == [p[0] for p in points]


def test_nan_ts_on_the_record_path_does_not_stop_the_indexer(runs_dir: Path,
                                                             tmp_path: Path) -> None:
    """The same NaN ts on the record path (its block holds a bad record) goes through
    the ON CONFLICT DO NOTHING statement, which does not ignore NOT NULL: the
    IntegrityError aborts index_once, so this run and every run after it alphabetically
    is never indexed again. (Present before the change too; the two paths now differ.)"""
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
    """JSON integers are unbounded. The block path binds int values as they are, and
    sqlite3 raises OverflowError for one outside the signed 64-bit range, aborting the
    whole pass (every later run too). The record path converts to float and stores
    it. (The old fast path bound ints as they are too.)"""
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
    """metric_keys.points is now exact when a batch is sent again, but last_step and
    last_value are still taken from the last record of each call, not from the key's
    highest stored seq: a re-sent older batch turns them back, an out-of-order batch
    names a point that is not the newest, and a repeated seq names the value that
    INSERT OR IGNORE threw away. /api/runs/{run}/metrics/keys shows them."""
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
    """Within the block path, INSERT OR IGNORE keeps the first of two records sharing a
    seq. When the first goes the record path (here: it has no ts) and the second the
    block path, the block statements run first in flush(), so the later record wins:
    which point is kept depends on the path, not on the order of the records."""
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
    """A seq of 2**36 or more is refused (it does not fit a point id), but the indexer
    still takes it as the file's high-water mark: every later record, whose seq is
    lower, is filtered out as already indexed, silently and for good."""
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
    """A line over SLICE_BYTES is reported as too long, but only its first 16 MiB are
    skipped: the rest of it is read as another line ("not JSON"), so the line is
    reported twice and every later line number is one too high. (The reader did this
    before the change as well.)"""
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


# --- behaviour that holds (pinned) -----------------------------------------------------


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
            wide = {f"w/{k:03d}": float(k + i) for k in range(KEYS_PER_STATEMENT + 1)}
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
        Indexer(engine, runs_dir, on_metrics=hooks[name]).index_run(runs_dir / name,
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
    lines = [{"seq": i, "step": i, "ts": 1e9 + i, "loss": float(i), **pad}
             for i in range(12_000)]
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
    indexer = Indexer(engine, runs_dir, on_metrics=hook)
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
    Indexer(engine, runs_dir, on_metrics=hook2).index_once()
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
