"""The index on PostgreSQL gives what it gives on SQLite: points, key statistics, series,
the live stream's points and health findings, for runs with every kind of value; the
queue's claim is as atomic there, and cancel and retry leave the same rows.

Set RUNWATCH_TEST_POSTGRES_URL to a PostgreSQL server's URL (a database on it that the
user may connect to, and the right to create databases): the test works in a database
of its own, made and dropped here. `.ci/run` starts Debian's PostgreSQL and sets it;
without it the test is skipped, saying so.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

import runwatch
from runwatch.health import store as health_store
from runwatch.ingest import Indexer
from runwatch.jobs import control
from runwatch.server.series_cache import SeriesCache
from runwatch.server.updates import RunCursor, _new_points
from runwatch.store import jobs as store_jobs
from runwatch.store import open_engine
from runwatch.store import queries as q
from runwatch.store import schema as s
from runwatch.store.keys import run_keys
from tests.support import write_run
from tests.support.jobs import claim_race, record_attempt, submit_command
from tests.support.stores import PostgresDatabases

PG_URL = os.environ.get("RUNWATCH_TEST_POSTGRES_URL")
pytestmark = pytest.mark.skipif(
    not PG_URL, reason="set RUNWATCH_TEST_POSTGRES_URL to a PostgreSQL server (see the module)")


def write_runs(runs: Path) -> None:
    run = runwatch.init("p", name="sdk", dir=runs, method="grpo")
    for i in range(500):
        run.log({"loss": 1 / (i + 1), "ok": i % 2 == 0, "n": i,
                 "x": math.nan if i == 7 else i * 0.5, "truncated_ratio": 0.6}, step=i)
        if i % 50 == 0:
            run.log({"val/acc": i / 500, "inf": math.inf}, step=i)
    run.finish()
    records: list[dict[str, Any]] = [
        {"seq": i, "ts": 1e9 + i, "step": i, "loss": "bad" if i == 5 else 0.5, "k": i}
        for i in range(30)]
    records.append({"seq": 30, "ts": 1e9, "step": 30, **{f"w/{i}": float(i) for i in range(450)}})
    records.append({"seq": 3, "ts": 1e9, "step": 99, "loss": 9.0})  # a repeated seq
    write_run(runs, "hand", records)
    # fields longer than their columns, which PostgreSQL (unlike SQLite) enforces
    write_run(runs, "long", records[:3], method="m" * 100, trainer="t" * 300,
              project="p" * 200, group="g" * 300)


def everything(engine: Engine, runs: Path) -> dict[str, Any]:
    first, again = Indexer(engine, runs).index_once(), Indexer(engine, runs).index_once()
    out: dict[str, Any] = {"rows": (first.rows, again.rows),
                           "problems": sorted(p.split("/")[-1] for p in first.problems)}
    with engine.begin() as conn:
        long = q.resolve_run(conn, "long")
        out["long"] = (long.method, long.trainer, long.project, long.group_name)
        for name in ("sdk", "hand"):
            pk = q.resolve_run(conn, name).pk
            out[f"{name} history"] = [
                (h.step, h.ts, sorted((k, None if v != v else v) for k, v in h.values.items()))
                for h in q.history(conn, pk)]
            out[f"{name} keys"] = sorted(
                (r.key, r.points, r.last_step, r.last_value)
                for r in conn.execute(select(s.metric_keys).where(s.metric_keys.c.run_pk == pk)))
            out[f"{name} series"] = [(k.key, SeriesCache().get(conn, pk, k).step.tolist())
                                     for k in run_keys(conn, pk)]
            out[f"{name} stream"] = _new_points(conn, pk, RunCursor(), {})[0]
            health_store.reevaluate(conn, pk)
            out[f"{name} health"] = sorted(f["rule_id"]
                                           for f in health_store.health_for_run(conn, pk, now=0))
    return out


@pytest.fixture
def pg_url(postgres: PostgresDatabases) -> Iterator[str]:
    """A new, empty database on the server of RUNWATCH_TEST_POSTGRES_URL."""
    url = postgres.create(empty=True)
    yield url
    postgres.drop(url)


def test_postgresql_index_matches_sqlite(tmp_path: Path, pg_url: str) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    write_runs(runs)
    pg = open_engine(pg_url)
    lite = open_engine(tmp_path / "index.db")
    try:
        want, got = everything(lite, runs), everything(pg, runs)
    finally:
        pg.dispose()
        lite.dispose()
    assert want["rows"][0] > 0 and want["rows"][1] == 0
    assert want["long"] == ("m" * 32, "t" * 128, "p" * 128, "g" * 256), "cut to the columns"
    assert sum("longer than" in p for p in want["problems"]) == 4, want["problems"]
    for key, value in want.items():
        assert got[key] == value, key


def test_postgresql_claims_each_job_exactly_once(tmp_path: Path, pg_url: str) -> None:
    """Processes and threads racing `claim` on PostgreSQL (FOR UPDATE SKIP LOCKED) take
    each queued job once."""
    runs = tmp_path / "runs"
    engine = open_engine(pg_url)
    try:
        pks = [submit_command(engine, runs, f"job{i:02d}", priority=i % 3).run_pk
               for i in range(40)]
        claimed = claim_race(pg_url, processes=4, threads=3)
        with engine.connect() as conn:
            assert store_jobs.queue_depth(conn) == 0
    finally:
        engine.dispose()
    assert sorted(claimed) == sorted(pks), "each job claimed once, none missed"


def test_postgresql_cancel_and_retry_as_on_sqlite(tmp_path: Path, pg_url: str) -> None:
    """Cancel of a queued job and a retry's purge of the old attempt give PostgreSQL the
    same runs and rows as SQLite."""

    def scenario(engine: Engine, runs: Path) -> dict[str, Any]:
        queued = submit_command(engine, runs, "queued")
        failed = submit_command(engine, runs, "failed")
        record_attempt(failed.dir, 1, "FAILED", steps=5)
        Indexer(engine, runs).index_once()
        retried = control.retry(engine, failed.run_pk)
        # its next step names the runs folder, one of its own for each backend
        out: dict[str, Any] = {"cancel": control.cancel(engine, queued.run_pk),
                               "retry": (retried.phase, (retried.next or "").replace(
                                   str(runs), "RUNS"))}
        record_attempt(failed.dir, 2, "SUCCEEDED", steps=3)
        Indexer(engine, runs).index_once()
        with engine.connect() as conn:
            out["runs"] = [tuple(r) for r in conn.execute(select(
                s.runs.c.name, s.runs.c.status, s.runs.c.attempt, s.runs.c.reason_code,
                s.runs.c.observed_step).order_by(s.runs.c.name))]
            out["points"] = conn.execute(select(s.metric_points.c.value)
                                         .order_by(s.metric_points.c.id)).scalars().all()
            out["samples"] = conn.execute(select(s.samples.c.prompt)).scalars().all()
            out["claimable"] = store_jobs.queue_depth(conn)
        return out

    lite = open_engine(tmp_path / "index.db")
    pg = open_engine(pg_url)
    try:
        want = scenario(lite, tmp_path / "lite")
        got = scenario(pg, tmp_path / "pg")
    finally:
        lite.dispose()
        pg.dispose()
    assert want["runs"] == [("failed", "SUCCEEDED", 2, None, 2),
                            ("queued", "CANCELLED", 1, "cancelled_before_start", None)]
    assert want["points"] == [1 / 2, 1 / 3, 1 / 4] and want["samples"] == ["attempt 2"]
    assert got == want
