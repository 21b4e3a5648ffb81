"""A worker whose loop stands still stops heartbeating, so the others reap its jobs.

Its stamps come from a thread of their own (a long index pass must not make it look
dead: test_heartbeat_thread), but they stop once the loop has not moved for the
worker's stall timeout. Before that, a loop stuck for good kept looking alive: a job of
it that ended was never concluded nor run again, and no other worker could take it.
Once the loop moves again the worker heartbeats again, acts on a cancel, and lets go of
what the others concluded meanwhile.

Two real ways to stick: the index pass waits on a lock that another database session
holds on the run's row (PostgreSQL; on SQLite such a lock stops the stamps' writes too),
the worker a real `runwatch worker` with a `--stall-timeout-s` of seconds; and the worker
of `runwatch ui` waits for the index lock that its index loop holds (both stores). The
worker that reaps is `runwatch worker`.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, text

from runwatch.ingest import Indexer
from runwatch.jobs import control
from runwatch.jobs.worker import Worker
from runwatch.rundir.append import locked
from runwatch.store import jobs as store_jobs
from runwatch.store import schema as s
from tests.jobs.stacks import runs_in
from tests.support.jobs import events, job, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import FAST, Workers, group_gone, job_processes, set_back, workers

__all__ = ["workers"]  # the fixture

SCRIPTS = Path(__file__).resolve().parent / "scripts"
STALL_TIMEOUT_S = 3.0
# Runs until a file named `go` appears in its folder (the runs folder), then exits 0.
ENDS_ON_GO = "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.05)"


def _start_stuck_worker(workers: Workers, runs_dir: Path, db: str) -> subprocess.Popen[str]:
    """`runwatch worker` of two devices, FAST heartbeats and the short stall timeout;
    stopped at teardown with the others."""
    return workers.start(runs_dir, db, devices=2, log=runs_dir.parent / "stuck-worker.log",
                         stall_timeout_s=STALL_TIMEOUT_S)


def _waiting_on_a_lock(engine: Engine) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'")).scalar())


def _beat(engine: Engine, worker_id: str) -> float:
    with engine.connect() as conn:
        return next(float(w["heartbeat_at"]) for w in store_jobs.list_workers(conn)
                    if w["id"] == worker_id)


def _stalled(caplog: pytest.LogCaptureFixture, engine: Engine, worker: Worker) -> float:
    """Once `worker` (of this process) logs that its loop has not moved, so that it stamps
    no more: its heartbeat set back past its timeout (not waited out), and that stamp."""
    wait_for(lambda: any("its loop has not moved" in m for m in caplog.messages),
             what="the stuck worker to stop heartbeating")
    return set_back(engine, worker.id)


# PostgreSQL only: on SQLite the lock a stuck call waits on stops the stamps' writes too
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_worker_stuck_in_a_database_call_stops_heartbeating_and_is_reaped(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers) -> None:
    assert engine.dialect.name == "postgresql"
    ended = submit_command(engine, runs_dir, "ended", ENDS_ON_GO, max_attempts=2)
    # trains (a metric every 50 ms) until cancelled: its folder changes every pass, so
    # every index pass of it writes its runs row or rows that refer to it
    stuck = submit_command(engine, runs_dir, "stuck",
                           [sys.executable, str(SCRIPTS / "train.py"), "--seconds=120"])
    proc = _start_stuck_worker(workers, runs_dir, db_url)
    wait_for(lambda: all((job(engine, name) or {}).get("pid") for name in ("ended", "stuck")),
             what="both jobs to start")
    held = {name: job(engine, name) or {} for name in ("ended", "stuck")}
    stuck_worker = held["ended"]["worker_id"]
    assert held["stuck"]["worker_id"] == stuck_worker
    wait_for(lambda: run_row(engine, "stuck").status == "RUNNING", what="the training to run")

    with engine.connect() as holder:
        # another session's transaction holds the training run's row: the worker's next
        # index pass of it waits for that transaction, which does not end
        holder.execute(select(s.runs.c.pk).where(s.runs.c.pk == stuck.run_pk).with_for_update())
        wait_for(lambda: _waiting_on_a_lock(engine), what="the worker's index pass to wait")
        (runs_dir / "go").touch()
        wait_for(lambda: group_gone(int(held["ended"]["pid"])), what="the ended job to exit")
        other = workers.start(runs_dir, db_url)
        said = runs_dir.parent / "stuck-worker.log"
        wait_for(lambda: "its loop has not moved" in said.read_text(),
                 what="the stuck worker to stop heartbeating")
        stamped = set_back(engine, stuck_worker)
        # the stuck worker's job that ended is reaped, queued again and run by the other
        wait_for(lambda: run_row(engine, "ended").status == "SUCCEEDED",
                 what="the other worker to reap the stuck worker's ended job and run it again",
                 deadline=60)
        evs = [(ev["phase"], ev.get("attempt"), ev.get("code"), ev.get("worker"))
               for ev in events(ended.dir)]
        assert evs[:3] == [("QUEUED", 1, None, None), ("PREPARING", 1, None, stuck_worker),
                           ("FAILED", 1, "stopped_early", None)]
        assert evs[3][:2] == ("QUEUED", 2) and evs[4][:2] == ("PREPARING", 2)
        assert evs[4][3] not in (None, stuck_worker) and evs[5][:2] == ("SUCCEEDED", 2)
        # its training still runs, so the reaper leaves it to the stuck worker
        assert (job(engine, "stuck") or {}).get("worker_id") == stuck_worker
        assert run_row(engine, "stuck").status == "RUNNING"
        released_at = _beat(engine, stuck_worker)
        assert released_at == stamped  # it has not stamped since
        holder.rollback()

    # the loop moves again: the worker heartbeats, and acts on a cancel
    wait_for(lambda: _beat(engine, stuck_worker) > released_at, what="the worker to stamp again")
    assert control.cancel(engine, stuck.run_pk, runs_dir).phase == "CANCEL_REQUESTED"
    wait_for(lambda: run_row(engine, "stuck").status == "CANCELLED",
             what="the worker to stop its cancelled job")
    # ... and left the ended job as the other worker concluded it
    assert [(ev["phase"], ev.get("attempt")) for ev in events(ended.dir)] == [
        ("QUEUED", 1), ("PREPARING", 1), ("FAILED", 1), ("QUEUED", 2), ("PREPARING", 2),
        ("SUCCEEDED", 2)]
    assert proc.poll() is None and other.poll() is None
    log = said.read_text()
    assert "its loop has not moved" in log and "in _index" in log
    assert "its loop moves again" in log


def test_a_worker_stuck_on_the_index_lock_stops_heartbeating_and_is_reaped(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers,
        caplog: pytest.LogCaptureFixture) -> None:
    """The worker of `runwatch ui` shares the index lock with the index loop: an index
    loop that never finishes its pass (stuck reading a folder, or in the database) holds
    it, and the worker waits. Held here by the test, as that loop would."""
    ended = submit_command(engine, runs_dir, "ended", ENDS_ON_GO)
    lock = threading.Lock()
    worker = Worker(engine, runs_dir, indexer=Indexer(engine, runs_dir), index_lock=lock,
                    heartbeat_s=FAST["heartbeat_s"],
                    heartbeat_timeout_s=FAST["heartbeat_timeout_s"], grace_s=FAST["grace_s"],
                    stall_timeout_s=STALL_TIMEOUT_S)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run_forever, args=(stop,), daemon=True)
    thread.start()
    try:
        pid = int(wait_for(lambda: (job(engine, "ended") or {}).get("pid") or 0,
                           what="the job to start"))
        with lock:
            wait_for(lambda: runs_in(thread, Worker._index), what="the worker to wait for the lock")
            (runs_dir / "go").touch()
            wait_for(lambda: group_gone(pid), what="the job to exit")
            workers.start(runs_dir, db_url)
            stamped = _stalled(caplog, engine, worker)
            wait_for(lambda: run_row(engine, "ended").status == "FAILED",
                     what="the other worker to reap the stuck worker's ended job", deadline=60)
            assert [(ev["phase"], ev.get("code")) for ev in events(ended.dir)] == [
                ("QUEUED", None), ("PREPARING", None), ("FAILED", "stopped_early")]
            released_at = _beat(engine, worker.id)
            assert released_at == stamped  # it has not stamped since
        # the loop moves again: it stamps again and lets go of the job reaped meanwhile
        wait_for(lambda: _beat(engine, worker.id) > released_at, what="the worker to stamp again")
        # (it drops the job, then frees its devices: read from here, one after the other)
        wait_for(lambda: not worker.jobs and worker.free_devices == worker.devices,
                 what="the worker to let go of the reaped job and free its devices")
        assert len(events(ended.dir)) == 3
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()


def test_a_claim_reaped_while_the_loop_stood_still_is_not_started_again(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers,
        caplog: pytest.LogCaptureFixture) -> None:
    """A job the stuck worker claimed but could not start yet (its folder was busy) goes
    back to the queue and runs on another worker; the stuck worker, once it moves again,
    must not start it too."""
    submit_command(engine, runs_dir, "running", ENDS_ON_GO)
    unstarted = submit_command(engine, runs_dir, "unstarted", ENDS_ON_GO)
    lock = threading.Lock()
    worker = Worker(engine, runs_dir, devices=2, indexer=Indexer(engine, runs_dir),
                    index_lock=lock, heartbeat_s=FAST["heartbeat_s"],
                    heartbeat_timeout_s=FAST["heartbeat_timeout_s"], grace_s=FAST["grace_s"],
                    stall_timeout_s=STALL_TIMEOUT_S)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run_forever, args=(stop,), daemon=True)
    held = False
    try:
        with locked(unstarted.dir, 0.0):  # busy: the worker claims it but cannot start it
            thread.start()
            wait_for(lambda: (job(engine, "running") or {}).get("pid")
                     and (job(engine, "unstarted") or {}).get("worker_id") == worker.id,
                     what="one job to start and the other to be claimed")
            held = lock.acquire()
            wait_for(lambda: runs_in(thread, Worker._index),
                     what="the worker to wait for the index lock")
        other = workers.start(runs_dir, db_url)
        stamped = _stalled(caplog, engine, worker)
        # reaped (never started, so back to the queue), claimed and started by the other
        wait_for(lambda: (row := job(engine, "unstarted") or {}).get("pid")
                 and row.get("worker_id") not in (None, worker.id),
                 what="the other worker to run the reaped claim", deadline=60)
        assert _beat(engine, worker.id) == stamped  # it has not stamped since
        lock.release()
        held = False
        wait_for(lambda: unstarted.run_pk not in worker.jobs,
                 what="the worker to let go of the claim it lost")
        assert [(ev["phase"], ev.get("worker")) for ev in events(unstarted.dir)][1:] == [
            ("PREPARING", (job(engine, "unstarted") or {}).get("worker_id"))]
        assert len(set(job_processes(runs_dir).values())) == 2  # one process per job
        (runs_dir / "go").touch()
        for name in ("running", "unstarted"):
            wait_for(lambda: run_row(engine, name).status == "SUCCEEDED",  # noqa: B023
                     what=f"{name} to succeed")
        # the run shows its end once conclude has indexed it; the worker frees the job's
        # devices just after, in the same step of its loop
        wait_for(lambda: worker.free_devices == 2, what="the worker to free both devices")
        assert other.poll() is None
    finally:
        if held:
            lock.release()
        stop.set()
        if thread.is_alive():
            thread.join(timeout=30)
    assert not thread.is_alive()
