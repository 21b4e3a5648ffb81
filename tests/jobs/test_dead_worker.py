"""A worker that dies (SIGKILL) leaves its jobs to the other workers' reaper: once its
heartbeat is older than the timeout and nothing of the job's process is left, the job
fails with "the training job stopped before it finished" (stopped_early), or is queued
again as its next attempt when attempts remain.

The job runs in a session of its own, so it outlives its worker's SIGKILL. While it runs,
the reaper leaves it alone (it might still finish and record its end); the test then
kills it itself.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from runwatch.jobs.failures import CATALOGUE
from runwatch.rundir import format as fmt
from runwatch.store import jobs as store_jobs
from tests.support.jobs import events, job, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import FAST, Workers, group_gone, pid_alive, set_back, workers

__all__ = ["workers"]  # the fixture

# Attempt 1 writes its pid and runs until killed; a later attempt succeeds at once.
JOB = (f"import os, time\nif os.environ['{fmt.ENV_ATTEMPT}'] == '1':\n"
       "    open('pid', 'w').write(str(os.getpid()))\n    time.sleep(300)")


def _beat(engine: Engine, worker_id: str) -> float:
    with engine.connect() as conn:
        return next(float(w["heartbeat_at"]) for w in store_jobs.list_workers(conn)
                    if w["id"] == worker_id)


@pytest.mark.parametrize("max_attempts", [1, 2])
def test_a_dead_workers_job_fails_stopped_early_or_runs_again(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, tmp_path: Path,
        max_attempts: int) -> None:
    run = submit_command(engine, runs_dir, "orphan", JOB, max_attempts=max_attempts)
    first = workers.start(runs_dir, db_url)
    pid = wait_for(lambda: (runs_dir / "pid").exists() and (runs_dir / "pid").read_text(),
                   what="the job to start")
    wait_for(lambda: run_row(engine, "orphan").status == "PREPARING",
             what="the job's start to be indexed")
    held = job(engine, "orphan")
    assert held is not None and held["pid"] == int(pid)
    workers.stop(first, signal.SIGKILL)
    assert pid_alive(int(pid))  # the job outlives its worker
    set_back(engine, held["worker_id"])  # dead: its timeout set back, not waited out
    held = job(engine, "orphan")
    assert held is not None

    second = workers.start(runs_dir, db_url)
    wait_for(lambda: any(w["id"] != held["worker_id"] for w in _workers(engine)),
             what="the second worker to register")
    [other] = [w["id"] for w in _workers(engine) if w["id"] != held["worker_id"]]
    # once the claim is stale, the second worker's reaper passes it over while the job
    # runs: let it reap a few times past that point
    stale_at = held["heartbeat_at"] + FAST["heartbeat_timeout_s"]
    wait_for(lambda: _beat(engine, other) > stale_at + 3 * FAST["heartbeat_s"],
             what="the second worker to heartbeat past the stale point", deadline=60)
    assert run_row(engine, "orphan").status == "PREPARING"
    assert (job(engine, "orphan") or {}).get("worker_id") == held["worker_id"]

    os.killpg(int(pid), signal.SIGKILL)
    wait_for(lambda: group_gone(int(pid)), what="the job to be gone")
    want = "SUCCEEDED" if max_attempts == 2 else "FAILED"
    # the reaper indexes the end, then lets the job go
    wait_for(lambda: run_row(engine, "orphan").status == want
             and (job(engine, "orphan") or {}).get("worker_id") is None,
             what=f"the job to end {want} and be let go")
    evs = [(ev["phase"], ev.get("attempt"), ev.get("code")) for ev in events(run.dir)]
    assert evs[:3] == [("QUEUED", 1, None), ("PREPARING", 1, None),
                       ("FAILED", 1, "stopped_early")]
    if max_attempts == 2:  # queued again, and run by the worker that is left
        assert evs[3:] == [("QUEUED", 2, None), ("PREPARING", 2, None), ("SUCCEEDED", 2, None)]
        assert events(run.dir)[4]["worker"] == other
    else:
        assert evs[3:] == []
        row = run_row(engine, "orphan")
        assert (row.reason_code, row.reason) == (
            "stopped_early", CATALOGUE["stopped_early"].sentence)
    assert second.poll() is None


def _workers(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return store_jobs.list_workers(conn)
