"""Workers of both executors on one index: a local worker (`runwatch worker`, as the one
`runwatch ui` embeds) cannot ask Ray whether a Ray job still runs, so it leaves a lost
Ray worker's jobs alone, and the workers view says what such a job waits for; a Ray
worker started later reaps it once Ray says it ended. Before, the local worker
concluded the Ray job `stopped_early` unasked while it still ran on Ray, and queued and
started its next attempt beside it.

Each worker records its executor (workers.executor, migration 0009); a worker
registered before that ran local processes, and reads `local`.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from runwatch.analysis.workers import LOST_AFTER_S, workers_view
from runwatch.store import jobs as store_jobs
from runwatch.store.db import HEAD_REVISION, open_engine
from runwatch.store.jobs import WorkerRow
from tests.jobs.test_ray import (
    JOB_DEADLINE_S,
    PLAIN,
    RayHead,
    _ray_status,
    _wait_ended,
    needs_ray,
    ray_cluster,
    ray_head,
    sqlite_index,
)
from tests.support.jobs import events, job, submit_command
from tests.support.migrations import downgrade
from tests.support.wait import wait_for
from tests.support.workers import FAST, Workers, workers

__all__ = ["ray_cluster", "ray_head", "sqlite_index", "workers"]  # the fixtures


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
    settings = [f"--{key.replace('_', '-')}={value}" for key, value in FAST.items()]
    ray_args = ["worker", str(runs_dir), "--db", db, *settings, "--executor=ray",
                f"--address={ray_head.address}"]
    first = workers.spawn(runs_dir, ray_args)
    wait_for(lambda: _ray_status(ray, engine, "mixed") == "RUNNING", what="the Ray job to run",
             deadline=JOB_DEADLINE_S, interval=0.2)
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
    assert _ray_status(ray, engine, "mixed") == "RUNNING"
    assert [(ev["phase"], ev.get("attempt")) for ev in events(runs_dir / "mixed")] == [
        ("QUEUED", 1), ("PREPARING", 1)], "no attempt runs beside the Ray job"
    # whoever looks is told what the job waits for, once the view counts its worker lost
    # (after LOST_AFTER_S, the workers' default heartbeat timeout)
    assert other["executor"] == "local"
    lost = wait_for(lambda: (w := _in_view(engine, held["worker_id"]))["status"] == "lost" and w,
                    what="the view to show the Ray worker lost", deadline=LOST_AFTER_S * 3)
    assert lost["executor"] == "ray"
    assert "waits for a Ray worker" in (lost["jobs"][0]["waits_for"] or "")

    # a Ray worker reaps it once Ray says it ended, as its own worker would
    workers.spawn(runs_dir, ray_args)
    wait_for(lambda: _in_view(engine, held["worker_id"])["jobs"][0]["waits_for"] is None,
             what="the view to see a live Ray worker", deadline=JOB_DEADLINE_S)
    gate.touch()
    ended = _wait_ended(engine, "mixed")
    assert (ended.status, ended.reason_code) == ("SUCCEEDED", None)
    assert _ray_status(ray, engine, "mixed", 2) == ""
    assert local.poll() is None


def test_workers_registered_before_migration_0009_read_local(
        engine: Engine, db_url: str) -> None:
    downgrade(engine, "0008")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO workers (id, host, pid, devices, device_profile, "
                          "started_at, heartbeat_at, draining) VALUES ('old', 'h', 2, 1, "
                          "'cpu', 2.0, 2.0, false)"))
    engine.dispose()
    upgraded = open_engine(db_url)
    try:
        with upgraded.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == \
                HEAD_REVISION
            assert {w["id"]: w["executor"] for w in store_jobs.list_workers(conn)} == \
                {"old": "local"}
        with upgraded.begin() as conn:
            store_jobs.register_worker(conn, WorkerRow("new", "h", 3, 1, "cpu", 3.0,
                                                       executor="ray"))
            assert store_jobs.list_workers(conn)[0]["executor"] == "ray"
    finally:
        upgraded.dispose()
