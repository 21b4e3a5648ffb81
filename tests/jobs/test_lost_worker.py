"""When a worker counts as lost: when its own last heartbeat is older than the heartbeat
timeout it declared at its start (`runwatch worker --heartbeat-timeout-s`, kept in
workers.heartbeat_timeout_s, migration 0010), for the workers view (`/api/workers`,
`runwatch resources`, the web Resources page) and for reaping alike.

Before, the view called a worker lost after a fixed 30 s whatever it declared, and the
reaper judged another worker's jobs stale by the *reaping* worker's own timeout: a worker
that declared 120 s had its ended job concluded `stopped_early` by a worker that declared
3 s while it was only paused, and a worker that declared 3 s showed active for 30 s.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from runwatch.analysis.workers import workers_view
from runwatch.server.runner import Runner
from runwatch.store import jobs as store_jobs
from runwatch.store.db import HEAD_REVISION, open_engine
from runwatch.store.jobs import WorkerRow
from tests.support import http
from tests.support.cli import cli_here
from tests.support.jobs import events, job, run_row, submit_command
from tests.support.migrations import downgrade
from tests.support.wait import wait_for
from tests.support.workers import FAST, Workers, group_gone, set_back, workers

__all__ = ["workers"]  # the fixture

# A plain command (no SDK: no lock on its folder says it runs) that writes its pid and
# exits 0 once the gate file exists.
GATED = ("import os, sys, time\nopen('pid', 'w').write(str(os.getpid()))\n"
         "while not os.path.exists(sys.argv[1]):\n    time.sleep(0.05)")
LONG_S = 120.0


def _workers(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return store_jobs.list_workers(conn)


def _beat(engine: Engine, worker_id: str) -> float:
    return next(float(w["heartbeat_at"]) for w in _workers(engine) if w["id"] == worker_id)


def _started(engine: Engine, runs_dir: Path, name: str) -> tuple[int, dict[str, Any]]:
    """The pid of the job's process, and its job row, once it runs and is indexed."""
    pid = wait_for(lambda: (runs_dir / "pid").exists() and (runs_dir / "pid").read_text(),
                   what="the job to start")
    wait_for(lambda: run_row(engine, name).status == "PREPARING",
             what="the job's start to be indexed")
    return int(pid), job(engine, name) or {}


def _other(engine: Engine, worker_id: str) -> str:
    """The id of the one worker other than `worker_id`, once it has registered."""
    found = wait_for(lambda: [w["id"] for w in _workers(engine) if w["id"] != worker_id],
                     what="the second worker to register")
    return str(found[0])


def test_a_worker_is_lost_after_its_own_heartbeat_timeout(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, server: Runner
        ) -> None:
    """`runwatch resources` and /api/workers call a worker that declared 3 s lost once its
    last heartbeat is older than 3 s, and one that declared 120 s active at 60 s."""
    short = workers.start(runs_dir, db_url)
    wait_for(lambda: _workers(engine), what="the worker to register")
    [short_id] = [w["id"] for w in _workers(engine)]
    long_ = workers.start(runs_dir, db_url, heartbeat_timeout_s=LONG_S)
    long_id = _other(engine, short_id)
    workers.stop(short, signal.SIGKILL)
    # dead, so nothing stamps it again: its last heartbeat as it stands once its timeout
    # has passed, set back instead of waited out
    set_back(engine, short_id)

    listed = cli_here("resources", str(runs_dir), "--db", db_url, "-o", "json").stdout
    status = {w["id"]: w["status"] for w in json.loads(listed)["workers"]}
    assert status == {short_id: "lost", long_id: "active"}
    assert {w["id"]: w["heartbeat_timeout_s"] for w in _workers(engine)} == {
        short_id: FAST["heartbeat_timeout_s"], long_id: LONG_S}
    answer = http.get(f"{server.url}/api/workers", timeout=30).json()
    assert {w["id"]: (w["status"], w["heartbeat_timeout_s"]) for w in answer["workers"]} == {
        short_id: ("lost", FAST["heartbeat_timeout_s"]), long_id: ("active", LONG_S)}

    # the worker that declared 120 s, 60 s after its last heartbeat: not lost yet
    os.kill(long_.pid, signal.SIGSTOP)
    try:
        later = _beat(engine, long_id) + 60
        with engine.connect() as conn:
            view = {w["id"]: w["status"] for w in workers_view(conn, None, later)["workers"]}
        assert view[long_id] == "active"
    finally:
        os.kill(long_.pid, signal.SIGCONT)


def test_a_paused_worker_keeps_its_job_until_its_own_timeout(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, tmp_path: Path
        ) -> None:
    """A worker that declared 120 s stops heartbeating for a few seconds (SIGSTOP) while
    its job ends: a worker that declared 3 s leaves the job alone, and the paused worker,
    once it moves again, concludes it from its real exit status (SUCCEEDED). Before, the
    3 s worker concluded it `stopped_early` (FAILED)."""
    gate = tmp_path / "gate"
    run = submit_command(engine, runs_dir, "paused", [sys.executable, "-c", GATED, str(gate)])
    first = workers.start(runs_dir, db_url, heartbeat_timeout_s=LONG_S)
    pid, held = _started(engine, runs_dir, "paused")
    os.kill(first.pid, signal.SIGSTOP)
    try:
        workers.start(runs_dir, db_url)
        other = _other(engine, held["worker_id"])
        gate.touch()
        wait_for(lambda: group_gone(pid), what="the job to end")
        stale_at = (job(engine, "paused") or {})["heartbeat_at"] + FAST["heartbeat_timeout_s"]
        wait_for(lambda: _beat(engine, other) > stale_at + 5 * FAST["heartbeat_s"],
                 what="the other worker to heartbeat past its own timeout", deadline=60)
        now = job(engine, "paused") or {}
        assert (now["worker_id"], now["attempt"]) == (held["worker_id"], 1)
        assert [ev["phase"] for ev in events(run.dir)] == ["QUEUED", "PREPARING"]
    finally:
        os.kill(first.pid, signal.SIGCONT)
    # its worker indexes the end, then lets the job go
    wait_for(lambda: run_row(engine, "paused").status == "SUCCEEDED"
             and (job(engine, "paused") or {}).get("worker_id") is None,
             what="the paused worker, moving again, to conclude its job and let it go")


def test_a_lost_workers_job_is_reaped_after_the_lost_workers_timeout(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, tmp_path: Path
        ) -> None:
    """A worker that declared 3 s dies; its job ends; a worker that declared 120 s reaps
    it once the dead worker's 3 s have passed, not its own 120 s."""
    gate = tmp_path / "gate"
    run = submit_command(engine, runs_dir, "orphan", [sys.executable, "-c", GATED, str(gate)])
    first = workers.start(runs_dir, db_url)
    pid, held = _started(engine, runs_dir, "orphan")
    workers.stop(first, signal.SIGKILL)
    set_back(engine, held["worker_id"])  # dead: its timeout set back, not waited out
    workers.start(runs_dir, db_url, heartbeat_timeout_s=LONG_S)
    gate.touch()
    wait_for(lambda: group_gone(pid), what="the job to end")
    wait_for(lambda: run_row(engine, "orphan").status == "FAILED",
             what="the live worker to reap the dead worker's job", deadline=60)
    assert run_row(engine, "orphan").reason_code == "stopped_early"
    assert [(ev["phase"], ev.get("code")) for ev in events(run.dir)] == [
        ("QUEUED", None), ("PREPARING", None), ("FAILED", "stopped_early")]


def test_workers_registered_before_migrations_0009_and_0010_read_local_and_30_s(
        engine: Engine, db_url: str) -> None:
    """A worker registered before runwatch recorded executors ran local processes, and
    one registered before it recorded heartbeat timeouts ran with the default."""
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
            [old] = store_jobs.list_workers(conn)
            assert (old["executor"], old["heartbeat_timeout_s"]) == (
                "local", store_jobs.HEARTBEAT_TIMEOUT_S)
            view = workers_view(conn, None, 2.0 + store_jobs.HEARTBEAT_TIMEOUT_S + 1)
            assert view["workers"][0]["status"] == "lost"
        with upgraded.begin() as conn:
            store_jobs.register_worker(conn, WorkerRow("new", "h", 3, 1, "cpu", 3.0,
                                                       executor="ray", heartbeat_timeout_s=5.0))
            new = store_jobs.list_workers(conn)[0]
            assert (new["executor"], new["heartbeat_timeout_s"]) == ("ray", 5.0)
    finally:
        upgraded.dispose()
