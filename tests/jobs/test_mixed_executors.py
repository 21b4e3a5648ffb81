"""Workers of both executors on one index: a local worker (`runwatch worker`, as the one
`runwatch ui` embeds) cannot ask Ray whether a Ray job still runs, so it leaves a lost
Ray worker's jobs alone, and the workers view says what such a job waits for; a Ray
worker started later reaps it once Ray says it ended. Before, the local worker
concluded the Ray job `stopped_early` unasked while it still ran on Ray, and queued and
started its next attempt beside it.

Each worker records its executor (workers.executor, migration 0009); a worker
registered before that ran local processes, and reads `local` (test_lost_worker's
test of rows older than migrations 0009 and 0010).
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from runwatch.analysis.workers import workers_view
from runwatch.store import jobs as store_jobs
from tests.jobs.rayhelp import (
    JOB_DEADLINE_S,
    PLAIN,
    RayHead,
    needs_ray,
    ray_status,
    spawn_ray_worker,
    wait_ended,
)
from tests.support.jobs import events, job, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import FAST, Workers, workers

__all__ = ["workers"]  # the fixture


# Its tests run on the Ray head the files of this group share (tests/jobs/conftest.py).
pytestmark = pytest.mark.xdist_group("ray-head")


def _worker(engine: Engine, worker_id: str) -> dict[str, Any]:
    with engine.connect() as conn:
        return next(w for w in store_jobs.list_workers(conn) if w["id"] == worker_id)


def workers_view_of(engine: Engine) -> dict[str, Any]:
    with engine.connect() as conn:
        return workers_view(conn, None, time.time())


def _in_view(engine: Engine, worker_id: str) -> dict[str, Any]:
    """Worker `worker_id` as the workers view (/api/workers, runwatch resources) shows it."""
    return next(w for w in workers_view_of(engine)["workers"] if w["id"] == worker_id)


@needs_ray
@pytest.mark.slow
def test_a_local_worker_leaves_a_lost_ray_workers_job_to_a_ray_worker(
        ray_head: RayHead, sqlite_index: Engine, runs_dir: Path, tmp_path: Path,
        workers: Workers) -> None:
    from runwatch.jobs.ray_executor import connect

    engine, ray = sqlite_index, connect(ray_head.address)
    gate = tmp_path / "gate"
    # a plain command (no SDK, so no lock on its folder says it runs), attempts left
    submit_command(engine, runs_dir, "mixed", [sys.executable, "-c", PLAIN, str(gate)],
                   max_attempts=2)
    db = str(tmp_path / "index.db")
    first = spawn_ray_worker(workers, runs_dir, Path(db), ray_head)
    wait_for(lambda: ray_status(ray, engine, "mixed") == "RUNNING", what="the Ray job to run",
             deadline=JOB_DEADLINE_S, interval=0.2)
    # the run leaves QUEUED once its worker sees Ray run it (within a tick)
    wait_for(lambda: run_row(engine, "mixed").status == "PREPARING",
             what="the Ray worker to record the job's start", deadline=JOB_DEADLINE_S)
    held = job(engine, "mixed") or {}
    workers.stop(first, signal.SIGKILL)

    local = workers.start(runs_dir, db)
    wait_for(lambda: len(workers_view_of(engine)["workers"]) == 2,
             what="the local worker to register")
    [other] = [w for w in workers_view_of(engine)["workers"] if w["id"] != held["worker_id"]]
    # past the stale point, the local worker's reaper passes the Ray job over each heartbeat
    stale_at = held["heartbeat_at"] + FAST["heartbeat_timeout_s"]
    wait_for(lambda: _worker(engine, other["id"])["heartbeat_at"] >
             stale_at + 5 * FAST["heartbeat_s"],
             what="the local worker to heartbeat past the stale point", deadline=60)
    now = job(engine, "mixed") or {}
    assert (now["worker_id"], now["attempt"]) == (held["worker_id"], 1)
    assert ray_status(ray, engine, "mixed") == "RUNNING"
    assert [(ev["phase"], ev.get("attempt")) for ev in events(runs_dir / "mixed")] == [
        ("QUEUED", 1), ("QUEUED", 1), ("PREPARING", 1)], "no attempt runs beside the Ray job"
    # whoever looks is told what the job waits for: the view counts its worker lost, as
    # the reaper does, past the heartbeat timeout that worker declared
    assert other["executor"] == "local"
    lost = _in_view(engine, held["worker_id"])
    assert lost["status"] == "lost"
    assert lost["executor"] == "ray"
    assert "waits for a Ray worker" in (lost["jobs"][0]["waits_for"] or "")

    # a Ray worker reaps it once Ray says it ended, as its own worker would
    spawn_ray_worker(workers, runs_dir, Path(db), ray_head)
    wait_for(lambda: _in_view(engine, held["worker_id"])["jobs"][0]["waits_for"] is None,
             what="the view to see a live Ray worker", deadline=JOB_DEADLINE_S)
    gate.touch()
    ended = wait_ended(engine, "mixed")
    assert (ended.status, ended.reason_code) == ("SUCCEEDED", None)
    assert ray_status(ray, engine, "mixed", 2) == ""
    assert local.poll() is None

