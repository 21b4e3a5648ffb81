"""Step summaries (runwatch.store.summaries): a whole series read from the index's
summaries is what the points themselves give (min, max, last and time per bucket, `full`
when the series fits the budget), as the run grows, with NaN values, a re-logged step
and a new attempt; and it is read from the summaries, not from the points. Closed chunks
are packed as the run grows just as a summary made at once packs them, and an index of
revision 0007 (buckets as rows) is packed on its way up (migration 0008).

Each check asks the same /api/series of two apps on one index: one reading summaries
(the default) and one with `SeriesCache(summaries=False)`, which reads every point.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, delete, select

from runwatch.analysis.downsample import aligned_edges, downsample, width_shift
from runwatch.ingest import Indexer
from runwatch.jobs import control
from runwatch.server.app import create_app
from runwatch.server.series_cache import SeriesCache
from runwatch.store import schema as s
from runwatch.store.db import HEAD_REVISION, StoreError, open_engine
from runwatch.store.keys import metric_keys, run_keys
from runwatch.store.points import in_key
from runwatch.store.summaries import (
    CHUNK_BITS,
    SUMMARY_MIN_POINTS,
    UnitsRead,
    read_units,
    rebuild,
    summary_states,
)
from tests.foundation import test_postgres
from tests.support import write_run
from tests.support.jobs import record_attempt, submit_command
from tests.support.migrations import downgrade

from .apiclient import Api

BUDGETS = (10, 37, 300, 1000)
pg_database = test_postgres.pg_url  # the fixture: a new database on the PostgreSQL server


class Pair:
    """The app reading summaries and the app reading points, on one index."""

    def __init__(self, engine: Engine, runs: Path) -> None:
        self.engine, self.runs = engine, runs
        self.fast = Api(create_app(engine, runs_dir=runs))
        self._slow = Api(create_app(engine, runs_dir=runs, cache=SeriesCache(summaries=False)))

    def slow(self) -> Api:
        """The points side with an empty cache: nothing cached from an earlier answer. One
        app whose cache is replaced, as making an app builds every route (~0.1 s each)."""
        self._slow.app.state.runwatch.cache = SeriesCache(summaries=False)
        return self._slow

    def index(self) -> None:
        Indexer(self.engine, self.runs).index_once()

    def both(self, run: str | list[str], keys: list[str], points: int
             ) -> tuple[Any, Any]:
        params: dict[str, Any] = {"run": run, "key": keys, "points": points, "x": "time"}
        return (self.fast.ok("/api/series", params=params),
                self.slow().ok("/api/series", params=params))

    def assert_same(self, run: str, keys: list[str]) -> None:
        """The same answer from both apps at each budget; without bands (`bands=false`),
        the same less each bucket's min and max."""
        for points in BUDGETS:
            fast, slow = self.both(run, keys, points)
            assert fast == slow, f"points={points}"
            plain = self.fast.ok("/api/series", params={"run": run, "key": keys, "points": points,
                                                        "x": "time", "bands": "false"})
            for item in slow["series"]:
                item.pop("min", None)
                item.pop("max", None)
            assert plain == slow, f"points={points}, bands=false"


@pytest.fixture
def pair(engine: Engine, runs_dir: Path) -> Pair:
    return Pair(engine, runs_dir)


def append(run_dir: Path, records: list[dict[str, Any]]) -> None:
    with open(run_dir / "metrics.jsonl", "a", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)


def records(steps: list[int], first_seq: int = 0,
            value: Any = lambda i, step: math.sin(step / 9.0)) -> list[dict[str, Any]]:
    return [{"seq": first_seq + i, "ts": 1.7e9 + first_seq + i + 0.25, "step": step,
             "loss": value(first_seq + i, step), "lr": step * 1e-3}
            for i, step in enumerate(steps)]


def state_of(engine: Engine, run: str, key: str) -> Any:
    with engine.connect() as conn:
        pk = conn.execute(select(s.runs.c.pk).where(s.runs.c.name == run)).scalar_one()
        kid = metric_keys(conn, pk)[key]
        return kid, summary_states(conn, [kid]).get(kid)


def stored(engine: Engine, key_id: int) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """A key's stored buckets: as rows, {(level, bucket): row}, and as packs,
    {(level, chunk): bytes}."""
    r, p = s.metric_summaries, s.metric_summary_packs
    with engine.connect() as conn:
        rows = {(row.level, row.bucket): tuple(row) for row in conn.execute(
            select(r).where(r.c.key_id == key_id))}
        packs = {(row.level, row.chunk): bytes(row.data) for row in conn.execute(
            select(p).where(p.c.key_id == key_id))}
    return rows, packs


def test_aligned_edges_are_powers_of_two_within_the_budget() -> None:
    for lo, hi, budget in [(0, 2999, 30), (7, 7, 10), (5, 100_004, 1000), (1000, 1049, 100),
                           (3, 2**40 + 17, 999)]:
        e = aligned_edges([(lo, hi)], budget)
        shift = width_shift(e)
        assert shift is not None and e.width == 2**shift
        assert e.lo <= lo and e.hi > hi and e.buckets <= budget
        assert e.buckets > budget // 2 or shift == 0  # more than half the budget used


def test_a_long_series_is_read_from_summaries_not_points(pair: Pair) -> None:
    """After the points the summaries cover are deleted, the answer is still the one the
    points gave: so it came from the summaries (and a few points after them)."""
    run = write_run(pair.runs, "long", records(list(range(5000))))
    pair.index()
    want = {p: pair.both("long", ["loss", "lr"], p)[1] for p in BUDGETS}
    kid, state = state_of(pair.engine, "long", "loss")
    assert state is not None and state.frontier > 4000
    assert stored(pair.engine, kid)[1], "closed chunks are packs"
    shift = width_shift(aligned_edges([(0, 4999)], 300))
    assert shift is not None and shift >= state.base
    with pair.engine.begin() as conn:
        p = s.metric_points.c
        for key_id in metric_keys(conn, 1).values():
            conn.execute(delete(s.metric_points).where(
                in_key(p.id, key_id), p.step < (state.frontier >> shift) << shift))
    fast, gone = pair.both("long", ["loss", "lr"], 300)
    assert fast == want[300]
    assert gone != want[300], "the points app sees the deletion: the check can fail"
    assert run.is_dir()


def test_live_growth_nan_and_time(pair: Pair) -> None:
    """A run that grows batch by batch, with NaN values (a whole bucket of them, and
    the last point of a bucket), matches the points after every batch; `time` is each
    bucket's last point's time."""
    def value(i: int, step: int) -> float:
        if 1000 <= step < 1100 or step % 97 == 0:
            return math.nan
        return math.cos(step / 13.0)

    write_run(pair.runs, "live", [])
    seq = 0
    for size in (5, 70, 1, 300, 16, 2000, 3, 900):
        append(pair.runs / "live", records(list(range(seq, seq + size)), seq, value))
        seq += size
        pair.index()
        pair.assert_same("live", ["loss", "lr"])
    fast, _ = pair.both("live", ["loss"], 100)
    (item,) = fast["series"]
    assert not item["full"] and item["count"] == seq
    assert all(t == 1.7e9 + step + 0.25 for t, step in zip(item["time"], item["step"],
                                                           strict=True))
    assert None in item["min"], "the all-NaN bucket has no min"
    assert state_of(pair.engine, "live", "loss")[1] is not None


def test_a_relogged_step_supersedes_the_summarised_points(pair: Pair) -> None:
    """A run restored from a checkpoint logs step 300 again: what it logged from 300 on
    before is gone from the series, summaries included."""
    write_run(pair.runs, "restored", records(list(range(3000))))
    pair.index()
    kid, before = state_of(pair.engine, "restored", "loss")
    assert before is not None and before.frontier > 300
    assert stored(pair.engine, kid)[1], "the restore reaches into packed chunks"
    append(pair.runs / "restored",
           records(list(range(300, 1200)), 3000, lambda i, step: 5.0 + step))
    pair.index()
    pair.assert_same("restored", ["loss", "lr"])
    fast, _ = pair.both("restored", ["loss"], 10)
    (item,) = fast["series"]
    assert item["count"] == 1200 and item["value"][-1] == 5.0 + 1199
    assert max(v for v in item["max"][-5:]) > 1000, "the new points, not the old ones"


def test_an_index_made_before_summaries_gets_them_on_first_read(pair: Pair) -> None:
    write_run(pair.runs, "old", records(list(range(0, 9000, 3))))
    pair.index()
    with pair.engine.begin() as conn:  # as an index of revision 0004 has it
        conn.execute(delete(s.metric_summaries))
        conn.execute(delete(s.metric_summary_packs))
        conn.execute(delete(s.metric_summary_state))
    assert state_of(pair.engine, "old", "loss")[1] is None
    pair.assert_same("old", ["loss", "lr"])
    state = state_of(pair.engine, "old", "loss")[1]
    assert state is not None and state.base == 6, "about 16 points a bucket at 3 steps apart"


def test_a_new_attempt_purges_the_old_summaries(engine: Engine, runs_dir: Path) -> None:
    job = submit_command(engine, runs_dir, "job")
    record_attempt(job.dir, 1, "FAILED", steps=2000)
    Indexer(engine, runs_dir).index_once()
    old_kid, old = state_of(engine, "job", "loss")
    assert old is not None
    assert stored(engine, old_kid)[1], "attempt 1 has packs: the check can fail"
    control.retry(engine, job.run_pk)
    record_attempt(job.dir, 2, "SUCCEEDED", steps=150)
    Indexer(engine, runs_dir).index_once()
    assert stored(engine, old_kid) == ({}, {})
    pair = Pair(engine, runs_dir)
    pair.assert_same("job", ["loss"])
    fast, _ = pair.both("job", ["loss"], 10)
    assert fast["series"][0]["count"] == 150
    assert fast["series"][0]["value"][-1] == 1.0 / (149 + 2), "attempt 2's values"


@st.composite
def histories(draw: st.DrawFn) -> list[list[tuple[int, float]]]:
    """Batches of (step, value): mostly rising steps with gaps, sometimes a step logged
    again (a restore), NaN values now and then."""
    batches = []
    step = draw(st.integers(0, 50))
    for _ in range(draw(st.integers(1, 5))):
        batch = []
        for _ in range(draw(st.integers(1, 200))):
            if draw(st.integers(0, 60)) == 0:
                step = max(0, step - draw(st.integers(1, 400)))
            value = math.nan if draw(st.integers(0, 30)) == 0 else draw(
                st.floats(-1e6, 1e6, allow_nan=False))
            batch.append((step, value))
            step += draw(st.sampled_from([1, 1, 1, 2, 7, 40]))
        batches.append(batch)
    return batches


def retained(batches: list[list[tuple[int, float]]]) -> list[int]:
    """The steps a series keeps: a step logged again drops those at or after it."""
    kept: list[int] = []
    for step, _ in (p for batch in batches for p in batch):
        while kept and kept[-1] >= step:
            kept.pop()
        kept.append(step)
    return kept


@pytest.fixture
def tmp_index(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(histories())
def test_any_history_reads_the_same_from_summaries(tmp_index: Path,
                                                   batches: list[list[tuple[int, float]]]
                                                   ) -> None:
    root = Path(tempfile.mkdtemp(dir=tmp_index))
    runs = root / "runs"
    runs.mkdir()
    engine = open_engine(root / "index.db")
    try:
        pair = Pair(engine, runs)
        write_run(runs, "h", [])
        seq = 0
        for batch in batches:
            append(runs / "h", [{"seq": seq + i, "ts": 1e9 + seq + i, "step": step, "v": v}
                                for i, (step, v) in enumerate(batch)])
            seq += len(batch)
            pair.index()
            for points in (10, 50):
                fast, slow = pair.both("h", ["v"], points)
                assert fast == slow
        if len(retained(batches)) >= SUMMARY_MIN_POINTS:
            assert state_of(engine, "h", "v")[1] is not None
    finally:
        engine.dispose()


def test_several_runs_and_keys_in_one_request_read_as_their_points(pair: Pair) -> None:
    """The series of one request are reduced together (`reduce_reads`): runs whose steps
    overlap, where one ends in the bucket the next begins in, one sparse and one with NaN,
    each get the buckets their own points give."""
    spans = {"a": range(0, 1500), "b": range(1499, 4000), "c": range(700, 4000, 7)}
    for name, steps in spans.items():
        nan = (lambda i, step: math.nan if step % 50 == 3 else math.sin(step / 5.0)
               ) if name == "b" else (lambda i, step: math.cos(step / 11.0))
        write_run(pair.runs, name, records(list(steps), value=nan))
    pair.index()
    for points in (37, 300):
        fast, slow = pair.both(["a", "b", "c"], ["loss", "lr"], points)
        assert [(x["run"], x["key"]) for x in fast["series"]] == [
            (x["run"], x["key"]) for x in slow["series"]]
        assert fast == slow, f"points={points}"
        assert not any(x["full"] for x in fast["series"] if len(x["step"]) > points)


def test_downsample_carries_the_time_of_each_buckets_last_point() -> None:
    import numpy as np

    steps = np.arange(100, dtype=np.int64)
    ts = 1e9 + steps * np.float64(2.0)
    d = downsample(steps, np.zeros(100), aligned_edges([(0, 99)], 10), 10, ts)
    assert d.ts is not None
    assert list(d.ts) == [1e9 + 2.0 * s for s in d.step]


def test_run_tiles_read_least_greatest_and_sum_from_summaries(pair: Pair) -> None:
    """The run detail's tiles (best loss, examples, peak memory) need the least, greatest
    and sum of a series' finite values: from the summaries they are those of the points,
    infinities and NaN left out, a re-logged step's old points too."""
    def value(i: int, step: int) -> float:
        return [math.inf, -math.inf, math.nan][step % 3] if step % 101 == 0 else float(step % 89)

    write_run(pair.runs, "tiles", records(list(range(3000)), 0, value))
    append(pair.runs / "tiles", records(list(range(2000, 2500)), 3000, lambda i, step: 1000.0))
    pair.index()
    with pair.engine.connect() as conn:
        pk = conn.execute(select(s.runs.c.pk).where(s.runs.c.name == "tiles")).scalar_one()
        infos = {k.key: k for k in run_keys(conn, pk)}
        assert summary_states(conn, [infos["loss"].id])
        fast = SeriesCache().values(conn, pk)
        slow = SeriesCache(summaries=False).values(conn, pk)
        for key in ("loss", "lr"):
            for how in ("min", "max", "sum"):
                assert fast.stat(infos[key], how) == pytest.approx(slow.stat(infos[key], how),
                                                                   rel=1e-12), (key, how)
        assert fast.stat(infos["loss"], "max") == 1000.0
        want = {how: slow.stat(infos["loss"], how) for how in ("min", "max", "sum")}
    # with the points the summaries cover deleted, the tiles' answer stays: it came from them
    _, state = state_of(pair.engine, "tiles", "loss")
    assert state is not None
    with pair.engine.begin() as conn:
        p = s.metric_points.c
        conn.execute(delete(s.metric_points).where(in_key(p.id, infos["loss"].id),
                                                   p.step < state.frontier))
    with pair.engine.connect() as conn:
        fast = SeriesCache().values(conn, pk)
        slow = SeriesCache(summaries=False).values(conn, pk)
        for how in ("min", "max", "sum"):
            assert fast.stat(infos["loss"], how) == pytest.approx(want[how], rel=1e-12), how
        assert slow.stat(infos["loss"], "sum") != pytest.approx(want["sum"], rel=1e-12), \
            "the points no longer give it: the check can fail"


@pytest.mark.skipif(not os.environ.get("RUNWATCH_TEST_POSTGRES_URL"),
                    reason="set RUNWATCH_TEST_POSTGRES_URL (see tests/foundation/test_postgres.py)")
def test_postgresql_summaries_read_as_the_points(tmp_path: Path, pg_database: str) -> None:
    """The same on PostgreSQL: a run grown batch by batch with NaN and a re-logged step,
    an index whose summaries are built on first read, and the tiles' statistics."""
    runs = tmp_path / "runs"
    runs.mkdir()
    engine = open_engine(pg_database)
    try:
        pair = Pair(engine, runs)
        write_run(runs, "pg", [])
        seq = 0
        for steps in (list(range(70)), list(range(70, 3000)), list(range(1500, 2600))):
            append(runs / "pg", records(steps, seq, lambda i, step: math.nan
                                        if step % 50 == 0 else math.sin(step / 7.0) + i))
            seq += len(steps)
            pair.index()
            pair.assert_same("pg", ["loss", "lr"])
        with engine.begin() as conn:
            conn.execute(delete(s.metric_summaries))
            conn.execute(delete(s.metric_summary_packs))
            conn.execute(delete(s.metric_summary_state))
        pair.assert_same("pg", ["loss", "lr"])
        with engine.connect() as conn:
            info = {k.key: k for k in run_keys(conn, 1)}["loss"]
            assert summary_states(conn, [info.id])
            fast = SeriesCache().values(conn, 1)
            slow = SeriesCache(summaries=False).values(conn, 1)
            for how in ("min", "max", "sum"):
                assert fast.stat(info, how) == pytest.approx(slow.stat(info, how), rel=1e-12)
    finally:
        engine.dispose()


def test_history_pages_of_long_keys_read_a_step_window(pair: Pair) -> None:
    """The History table's pages of a long run, cold: the same rows, total and cursors as
    the points give, without reading whole series (none ends up cached); a run with a
    re-logged step is read whole, and its pages are the same too."""
    def rec(i: int, step: int) -> dict[str, Any]:
        out: dict[str, Any] = {"seq": i, "ts": 1e9 + i, "step": step,
                               "loss": math.nan if step % 777 == 0 else step / 7.0,
                               "lr": 1e-3}
        if step % 500 == 0:
            out["val/loss"] = step * 2.0
        return out

    write_run(pair.runs, "hist", [rec(i, step) for i, step in enumerate(range(0, 12000, 2))])
    write_run(pair.runs, "redo", [rec(i, step) for i, step in
                                  enumerate([*range(6000), *range(5000, 7000)])])
    pair.index()
    cache = SeriesCache()
    fast = Api(create_app(pair.engine, runs_dir=pair.runs, cache=cache))
    for run in ("hist", "redo"):
        slow = pair.slow()
        asks: list[dict[str, Any]] = [{"limit": 50}, {"limit": 7, "order": "latest"},
                                      {"limit": 50, "after": "3000"},
                                      {"limit": 50, "before": "5003"},
                                      {"limit": 20, "key": ["val/loss", "loss"]}]
        for params in asks:
            got = fast.ok(f"/api/runs/{run}/history", params=params)
            assert got == slow.ok(f"/api/runs/{run}/history", params=params), (run, params)
            assert got["rows"], (run, params)
        if run == "hist":
            assert cache.held_points < 1000, "long series were not read whole"
    assert cache.held_points >= 7000, "the re-logged run was read whole"


def test_history_of_keys_that_logged_every_step_reads_no_steps(pair: Pair) -> None:
    """Long keys with a point at every step from their first to their last (here two,
    over different spans) give their steps as ranges; a long strided key's steps and a
    short key's are read and merged in. Pages, totals and cursors are the points' own; and
    after every-step keys' points in the middle are deleted the total is still the one
    before (the points app sees fewer), so their steps were not read from the points."""
    def rec(i: int, step: int) -> dict[str, Any]:
        out: dict[str, Any] = {"seq": i, "ts": 1e9 + i, "step": step, "loss": step / 7.0}
        if step >= 100:
            out["lr"] = 1e-3 * step
        if step % 2 == 0:
            out["grad_norm"] = 1.0 + step % 5
        if step % 1000 == 0:
            out["val/loss"] = step * 2.0
        return out

    write_run(pair.runs, "every", [rec(i, step) for i, step in enumerate(range(11000))])
    pair.index()
    fast = Api(create_app(pair.engine, runs_dir=pair.runs))
    slow = pair.slow
    asks: list[dict[str, Any]] = [{"limit": 50}, {"limit": 7, "order": "latest"},
                                  {"limit": 50, "after": "3000"}, {"limit": 50, "before": "99"},
                                  {"limit": 20, "key": ["lr", "val/loss"]},
                                  {"limit": 20, "key": ["grad_norm", "lr"], "after": "40"}]
    before = {}
    for i, params in enumerate(asks):
        before[i] = fast.ok("/api/runs/every/history", params=params)
        assert before[i] == slow().ok("/api/runs/every/history", params=params), params
    assert before[0]["total"] == 11000
    with pair.engine.begin() as conn:
        p = s.metric_points.c
        for key in ("loss", "lr"):
            kid = metric_keys(conn, 1)[key]
            conn.execute(delete(s.metric_points).where(
                in_key(p.id, kid), p.step >= 5001, p.step < 6000, p.step % 2 == 1))
    fresh = Api(create_app(pair.engine, runs_dir=pair.runs))
    assert fresh.ok("/api/runs/every/history", params=asks[0]) == before[0]
    gone = slow().ok("/api/runs/every/history", params=asks[0])
    assert gone["total"] < 11000, "the points app sees the deletion: the check can fail"


def test_a_growing_run_packs_its_chunks_as_a_summary_made_at_once(pair: Pair) -> None:
    """Batches of every size, some across a chunk's end and some within one, leave the
    same rows and packs as summarising the whole key again; the open chunk of each level
    is rows (less than a chunk of them), the closed ones are packs."""
    write_run(pair.runs, "grow", [])
    seq = 0
    for size in (1, 63, 1024, 1, 1023, 1025, 7000, 40, 9000):
        append(pair.runs / "grow", records(list(range(seq, seq + size)), seq))
        seq += size
        pair.index()
    pair.assert_same("grow", ["loss"])
    kid, state = state_of(pair.engine, "grow", "loss")
    assert state is not None
    grown = stored(pair.engine, kid)
    levels = {level for level, _ in grown[1]}
    assert len(levels) >= 2, "packs on more than the base level"
    for level in {level for level, _ in grown[0]}:
        assert sum(1 for lv, _ in grown[0] if lv == level) < 1 << CHUNK_BITS
    with pair.engine.begin() as conn:
        rebuild(conn, kid)
    assert stored(pair.engine, kid) == grown


def test_an_index_of_revision_0007_is_packed_on_its_way_up(engine: Engine,
                                                            runs_dir: Path) -> None:
    """Going down to 0007 leaves every bucket a row; coming up packs the closed chunks
    again, and the answers are the same throughout."""
    pair = Pair(engine, runs_dir)
    write_run(runs_dir, "old", records(list(range(9000))))
    pair.index()
    kid, _ = state_of(engine, "old", "loss")
    packed = stored(engine, kid)
    want = pair.both("old", ["loss", "lr"], 300)[1]
    downgrade(engine, "0007")
    with engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT count(*) FROM metric_summaries").scalar()
        assert rows is not None and rows > (1 << CHUNK_BITS) * 2, "every bucket a row"
    url = engine.url.render_as_string(hide_password=False)
    engine.dispose()
    again = open_engine(url)
    try:
        with again.connect() as conn:
            assert conn.exec_driver_sql(
                "SELECT version_num FROM alembic_version").scalar() == HEAD_REVISION
        assert stored(again, kid) == packed
        up = Pair(again, runs_dir)
        assert up.fast.ok("/api/series", params={"run": "old", "key": ["loss", "lr"],
                                                 "points": 300, "x": "time"}) == want
    finally:
        again.dispose()


def test_a_migration_0008_that_fails_midway_leaves_a_sqlite_index_at_0007(
        tmp_path: Path, runs_dir: Path) -> None:
    """SQLite's driver opens its transaction at the first write, not at CREATE TABLE: a
    0008 that failed while packing (here a trigger refuses the rows' deletion, as a full
    disk or a killed process would stop it) left its new table behind, committed, and
    every later open failed on "table metric_summary_packs already exists". The table
    and the packing now commit or roll back together."""
    url = f"sqlite:///{tmp_path / 'index.db'}"
    engine = open_engine(url)
    write_run(runs_dir, "old", records(list(range(9000))))
    Pair(engine, runs_dir).index()
    want = Pair(engine, runs_dir).both("old", ["loss"], 300)[1]
    downgrade(engine, "0007")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TRIGGER refuse BEFORE DELETE ON metric_summaries "
                             "BEGIN SELECT RAISE(ABORT, 'refused'); END")
    engine.dispose()
    with pytest.raises(StoreError, match="refused"):
        open_engine(url)
    plain = open_engine(url, migrate=False)
    try:
        with plain.begin() as conn:
            tables = {r[0] for r in conn.exec_driver_sql(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            assert "metric_summary_packs" not in tables, "nothing of 0008 stays"
            assert conn.exec_driver_sql(
                "SELECT version_num FROM alembic_version").scalar() == "0007"
            conn.exec_driver_sql("DROP TRIGGER refuse")
    finally:
        plain.dispose()
    again = open_engine(url)
    try:
        kid, _ = state_of(again, "old", "loss")
        assert stored(again, kid)[1], "packed on the next open"
        assert Pair(again, runs_dir).fast.ok("/api/series", params={
            "run": "old", "key": ["loss"], "points": 300, "x": "time"}) == want
    finally:
        again.dispose()


def test_a_read_across_an_ingest_that_packs_a_chunk_loses_no_bucket(
        tmp_path: Path, runs_dir: Path) -> None:
    """A series' buckets are read in two statements, one of packs and one of rows. An
    ingest that closes a chunk (its rows deleted, its pack stored) committed between them
    made a read that took the packs first find that chunk in neither: its buckets were
    missing from the chart. Here the ingest commits as the second statement starts (a
    SQLite trace hook on the reader's connection runs the real indexer on another)."""
    url = f"sqlite:///{tmp_path / 'index.db'}"
    engine, writer = open_engine(url), open_engine(url)
    try:
        write_run(runs_dir, "live", records(list(range(9000))))
        Pair(engine, runs_dir).index()
        kid, state = state_of(engine, "live", "loss")
        assert state is not None and (state.frontier >> state.base) % (1 << CHUNK_BITS)
        want = (state.frontier >> state.base) + 1 >> CHUNK_BITS << CHUNK_BITS
        seen: list[str] = []

        def ingest_at_the_second(sql: str) -> None:
            if "metric_summar" in sql and "metric_summary_state" not in sql:
                seen.append(sql)
                if len(seen) == 2:
                    append(runs_dir / "live", records(list(range(9000, 9000 + 16 * 64)), 9000))
                    Indexer(writer, runs_dir).index_once()

        with engine.connect() as conn:
            before = read_units(conn, [UnitsRead(kid, state, state.base)])[kid]
            raw = conn.connection.dbapi_connection
            raw.set_trace_callback(ingest_at_the_second)  # type: ignore[union-attr]
            try:
                during = read_units(conn, [UnitsRead(kid, state, state.base)])[kid]
            finally:
                raw.set_trace_callback(None)  # type: ignore[union-attr]
        assert len(seen) >= 2, "the ingest ran between the two statements"
        after = state_of(engine, "live", "loss")[1]
        assert after.frontier >> after.base >= want, "the ingest closed the read's chunk"
        # the points after the read's frontier are read after the ingest: more of them
        size = before.step.size
        for field in ("step", "n", "min", "max", "last"):
            assert getattr(during, field)[:size].tolist() == getattr(before, field).tolist(), (
                field)
    finally:
        writer.dispose()
        engine.dispose()


def test_every_stored_level_reads_the_same_across_packed_and_open_chunks(
        engine: Engine, runs_dir: Path) -> None:
    """A key long enough that each stored level it is read at (4 to 10, budgets 5000 to
    30) has packed chunks and an open one: the answers are the points' as it grows by a
    batch that closes chunks on several levels at once, after a re-logged step inside a
    packed chunk, and after migration 0008 down and up again."""
    pair = Pair(engine, runs_dir)
    budgets = (5000, 2000, 500, 100, 30)

    def value(i: int, step: int) -> float:
        return math.nan if step % 1009 == 0 else math.sin(step / 97.0) + i * 1e-6

    def check() -> None:
        for points in budgets:
            fast, slow = pair.both("long", ["loss"], points)
            assert fast == slow, f"points={points}"

    write_run(runs_dir, "long", records(list(range(30_011)), 0, value))
    pair.index()
    append(runs_dir / "long", records(list(range(30_011, 70_123)), 30_011, value))
    pair.index()
    kid, state = state_of(engine, "long", "loss")
    assert state is not None and state.base == 4
    rows, packs = stored(engine, kid)
    for level in (4, 6, 8, 10):
        assert any(lv == level for lv, _ in packs), f"level {level} has packs"
        assert any(lv == level for lv, _ in rows), f"level {level} has an open chunk"
    check()
    append(runs_dir / "long", records(list(range(20_000, 20_500)), 70_123,
                                      lambda i, step: 3.0))
    pair.index()
    check()
    before = stored(engine, kid)
    downgrade(engine, "0007")
    url = engine.url.render_as_string(hide_password=False)
    engine.dispose()
    again = open_engine(url)
    try:
        assert stored(again, kid) == before
        pair = Pair(again, runs_dir)
        check()
    finally:
        again.dispose()


def test_a_deleted_run_leaves_no_packs(engine: Engine, runs_dir: Path) -> None:
    """A run's packs go with its keys (the foreign key's cascade, on SQLite and
    PostgreSQL): deleting the run leaves none."""
    from runwatch.store.runs import delete_run

    write_run(runs_dir, "gone", records(list(range(3000))))
    Pair(engine, runs_dir).index()
    kid, _ = state_of(engine, "gone", "loss")
    assert stored(engine, kid)[1], "the run has packs: the check can fail"
    with engine.begin() as conn:
        pk = conn.execute(select(s.runs.c.pk).where(s.runs.c.name == "gone")).scalar_one()
        delete_run(conn, pk)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM metric_summary_packs").scalar() == 0
        assert conn.exec_driver_sql("SELECT count(*) FROM metric_summaries").scalar() == 0
