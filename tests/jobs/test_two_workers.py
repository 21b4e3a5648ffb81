"""Two `runwatch worker` processes on one queue of 20 jobs: every job runs exactly once,
on SQLite and (where RUNWATCH_TEST_POSTGRES_URL names a server) on PostgreSQL.

Each job creates a marker file named after its run with O_EXCL, so a second run of the
same job would fail on it (and end FAILED); the events say how often each was started.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from runwatch.store import jobs as store_jobs
from tests.support.jobs import events, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, workers

__all__ = ["workers"]  # the fixture

JOBS = 20


def test_two_workers_run_every_job_exactly_once(engine: Engine, db_url: str, runs_dir: Path,
                                                workers: Workers, tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    names = [f"job-{i:02d}" for i in range(JOBS)]
    for name in names:
        mark = f"import os; os.close(os.open({str(markers / name)!r}, os.O_CREAT | os.O_EXCL))"
        submit_command(engine, runs_dir, name, mark)
    for _ in range(2):
        workers.start(runs_dir, db_url, devices=2)

    def statuses() -> list[str]:
        return [run_row(engine, name).status for name in names]

    wait_for(lambda: all(st in ("SUCCEEDED", "FAILED") for st in statuses()),
             what="all 20 jobs to end", deadline=120)
    assert statuses() == ["SUCCEEDED"] * JOBS
    assert sorted(p.name for p in markers.iterdir()) == names
    for name in names:
        started = [ev for ev in events(runs_dir / name) if ev["phase"] == "PREPARING"]
        assert len(started) == 1, f"{name} was started {len(started)} times"
    with engine.connect() as conn:
        assert store_jobs.queue_depth(conn) == 0
        assert len(store_jobs.list_workers(conn)) == 2
