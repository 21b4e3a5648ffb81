"""A cancel of a job whose worker is lost (it died, or its loop hung) is carried out by a
live worker on the same host as it reaps that worker's jobs: it stops the attempt's
process group (SIGTERM, the grace, SIGKILL) once it has proved the group is that
attempt's (a process of it carries the attempt's RUNWATCH_* variables), and concludes
the job CANCELLED, not queued again. Before, nobody acted: the job stayed
CANCEL_REQUESTED while its process ran on, and when that process ended by itself the
job was concluded `stopped_early` and, with attempts left, queued again. A run that
uses the SDK records the cancel itself on that SIGTERM.

A process group that a job row names but that does not carry the attempt's variables
(the pid was given again to another process) is never signalled.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine, update

from runwatch.ingest import Indexer
from runwatch.ingest.indexer import IndexReport
from runwatch.jobs import control, reaper
from runwatch.jobs.executors import LocalExecutor
from runwatch.jobs.worker import Worker
from runwatch.rundir import format as fmt
from runwatch.rundir.append import locked, write_events
from runwatch.server.runner import Runner
from runwatch.store import jobs as store_jobs
from runwatch.store import schema as s
from tests.jobs.stacks import runs_in
from tests.support import http
from tests.support.cli import cli_here
from tests.support.jobs import events, job, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import FAST, Workers, group_gone, pid_alive, set_back, workers

__all__ = ["workers"]  # the fixture

# Attempt 1 writes its pid and runs until stopped (a plain command: no SDK records its
# end); a later attempt succeeds at once.
JOB = (f"import os, time\nif os.environ['{fmt.ENV_ATTEMPT}'] == '1':\n"
       "    open('pid', 'w').write(str(os.getpid()))\n    time.sleep(300)")
STALL_TIMEOUT_S = 3.0
SCRIPTS = Path(__file__).resolve().parent / "scripts"


def _beat(engine: Engine, worker_id: str) -> float:
    with engine.connect() as conn:
        return next(float(w["heartbeat_at"]) for w in store_jobs.list_workers(conn)
                    if w["id"] == worker_id)


def _started(engine: Engine, runs_dir: Path) -> int:
    pid = wait_for(lambda: (runs_dir / "pid").exists() and (runs_dir / "pid").read_text(),
                   what="the job to start")
    wait_for(lambda: run_row(engine, "orphan").status == "PREPARING",
             what="the job's start to be indexed")
    return int(pid)


def _cancelled_and_stopped(engine: Engine, run_dir: Path, pid: int) -> None:
    assert control.cancel(engine, run_row(engine, "orphan").pk).phase == "CANCEL_REQUESTED"
    # the reaper indexes the end, then lets the job go
    wait_for(lambda: run_row(engine, "orphan").status == "CANCELLED"
             and (job(engine, "orphan") or {}).get("worker_id", "") is None,
             what="the live worker to stop the lost worker's cancelled job and let it go",
             deadline=60)
    assert group_gone(pid)
    row = run_row(engine, "orphan")
    assert (row.reason_code, row.attempt) == ("cancelled", 1)
    # the reaping worker records CANCEL_REQUESTED for a command without the SDK, so its
    # grace is not counted as PREPARING
    assert [(ev["phase"], ev.get("attempt"), ev.get("code")) for ev in events(run_dir)] == [
        ("QUEUED", 1, None), ("PREPARING", 1, None), ("CANCEL_REQUESTED", 1, None),
        ("CANCELLED", 1, "cancelled")]
    held = job(engine, "orphan") or {}
    assert (held.get("worker_id"), held.get("attempt")) == (None, 1)  # not queued again


def test_a_dead_workers_cancelled_job_is_stopped_and_ends_cancelled(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers) -> None:
    run = submit_command(engine, runs_dir, "orphan", JOB, max_attempts=2)
    first = workers.start(runs_dir, db_url)
    pid = _started(engine, runs_dir)
    holder = str((job(engine, "orphan") or {})["worker_id"])
    workers.stop(first, signal.SIGKILL)
    assert pid_alive(pid)  # the job outlives its worker
    set_back(engine, holder)  # dead: its timeout set back, not waited out
    second = workers.start(runs_dir, db_url)
    _cancelled_and_stopped(engine, run.dir, pid)
    assert second.poll() is None


def test_a_dead_workers_cancelled_training_records_its_own_cancel(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers) -> None:
    """A run that uses the SDK records the cancel itself on the reaping worker's SIGTERM
    (CANCEL_REQUESTED, then CANCELLED); its end is concluded once it lets go of its
    folder, with no verdict of the worker's beside it."""
    run = submit_command(engine, runs_dir, "training",
                         [sys.executable, str(SCRIPTS / "train.py"), "--seconds=120"],
                         max_attempts=2)
    first = workers.start(runs_dir, db_url)
    wait_for(lambda: run_row(engine, "training").status == "RUNNING", what="the training to run")
    held = job(engine, "training") or {}
    pid = int(held["pid"])
    workers.stop(first, signal.SIGKILL)
    set_back(engine, str(held["worker_id"]))  # dead: its timeout set back, not waited out
    workers.start(runs_dir, db_url)
    assert control.cancel(engine, run.run_pk).phase == "CANCEL_REQUESTED"
    wait_for(lambda: (job(engine, "training") or {}).get("worker_id", "") is None
             and run_row(engine, "training").status == "CANCELLED",
             what="the live worker to stop the training and conclude it", deadline=60)
    assert group_gone(pid)
    assert run_row(engine, "training").reason_code == "cancelled"
    ends = [ev["phase"] for ev in events(run.dir) if ev["phase"] in (*fmt.TERMINAL_PHASES,
                                                                      "QUEUED")]
    assert ends == ["QUEUED", "CANCELLED"]  # the SDK's, and no attempt 2


def test_a_hung_workers_cancelled_job_is_stopped_and_ends_cancelled(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers,
        caplog: pytest.LogCaptureFixture) -> None:
    """The worker of `runwatch ui` waits for the index lock its index loop holds (here the
    test): it stops heartbeating, and the cancel is carried out by `runwatch worker`.
    Once its loop moves again it lets go of the job the other concluded."""
    run = submit_command(engine, runs_dir, "orphan", JOB, max_attempts=2)
    lock = threading.Lock()
    hung = Worker(engine, runs_dir, indexer=Indexer(engine, runs_dir), index_lock=lock,
                  heartbeat_s=FAST["heartbeat_s"], heartbeat_timeout_s=FAST["heartbeat_timeout_s"],
                  grace_s=FAST["grace_s"], stall_timeout_s=STALL_TIMEOUT_S)
    stop = threading.Event()
    thread = threading.Thread(target=hung.run_forever, args=(stop,), daemon=True)
    thread.start()
    try:
        pid = _started(engine, runs_dir)
        with lock:
            wait_for(lambda: runs_in(thread, Worker._index),
                     what="the worker to wait for the index lock")
            workers.start(runs_dir, db_url)
            # once it says it stamps no more: its timeout set back, not waited out
            wait_for(lambda: any("its loop has not moved" in m for m in caplog.messages),
                     what="the hung worker to stop heartbeating")
            stamped = set_back(engine, hung.id)
            _cancelled_and_stopped(engine, run.dir, pid)
            assert _beat(engine, hung.id) == stamped  # it has not stamped since
        wait_for(lambda: not hung.jobs and hung.free_devices == hung.devices,
                 what="the hung worker, moving again, to let go of the concluded job")
        assert len(events(run.dir)) == 4  # QUEUED, PREPARING, CANCEL_REQUESTED, CANCELLED
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()


def test_a_process_group_not_proved_the_attempts_is_not_signalled(
        engine: Engine, runs_dir: Path, tmp_path: Path) -> None:
    """The job row of a dead worker's cancelled job names a process group that carries
    none of the attempt's variables: the reaper leaves it running (and the job waits);
    once that group has gone, the job ends CANCELLED."""
    submit_command(engine, runs_dir, "orphan", JOB, max_attempts=2)
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                                start_new_session=True)
    try:
        with engine.begin() as conn:
            store_jobs.register_worker(conn, store_jobs.WorkerRow(
                "dead", socket.gethostname(), 1, 1, "cpu", time.time(),
                heartbeat_timeout_s=FAST["heartbeat_timeout_s"]))
            claim = store_jobs.claim(conn, "dead", 1, time.time())
            assert claim is not None
            store_jobs.set_pid(conn, claim.run_pk, stranger.pid, "dead")
            conn.execute(update(s.jobs).where(s.jobs.c.run_pk == claim.run_pk)
                         .values(cancel_requested_at=time.time()))
        with locked(Path(claim.dir), 5.0):
            write_events(Path(claim.dir), [{"phase": "PREPARING", "attempt": 1,
                                            "worker": "dead"}])
        indexer, executor = Indexer(engine, runs_dir), LocalExecutor()

        def index(d: Path) -> None:
            indexer.index_run(d, IndexReport())

        def reap() -> int:
            later = time.time() + FAST["heartbeat_timeout_s"] + 1
            return reaper.reap(engine, "live", later, index, executor=executor, grace_s=0.0)

        for _ in range(3):  # past the grace: a SIGKILL would be due by now
            assert reap() == 0
        assert stranger.poll() is None
        assert (job(engine, "orphan") or {}).get("worker_id") == "dead"
    finally:
        stranger.kill()
        stranger.wait()
    assert reap() == 1
    assert [(ev["phase"], ev.get("code")) for ev in events(Path(claim.dir))][-1] == \
        ("CANCELLED", "cancelled")


def test_cancel_says_what_happens_to_a_lost_workers_job(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, server: Runner) -> None:
    """`runwatch runs cancel` and the cancel API say that nothing can tell the process to
    stop while no live worker can reap its lost worker's jobs, and what it waits for;
    once a live worker on its host runs, that it stops it. Before, both said "its
    process is told to stop" whatever became of the worker."""
    run = submit_command(engine, runs_dir, "orphan", JOB, max_attempts=2)
    submit_command(engine, runs_dir, "orphan-2", "import time; time.sleep(300)", max_attempts=2)
    first = workers.start(runs_dir, db_url, devices=2)
    pid = _started(engine, runs_dir)
    wait_for(lambda: run_row(engine, "orphan-2").status == "PREPARING",
             what="the second job to start")
    held = job(engine, "orphan") or {}
    workers.stop(first, signal.SIGKILL)
    # dead, so nothing stamps it again: its heartbeat (its row's and its jobs') as it stands
    # once its timeout has passed, set back instead of waited out
    set_back(engine, held["worker_id"])

    said = cli_here("runs", "cancel", "orphan", "--dir", str(runs_dir), "--db", db_url).stdout
    assert "told to stop" not in said
    words = " ".join(said.split())
    assert f"its worker {held['worker_id']} no longer heartbeats" in words
    assert f"waits for a local worker (runwatch worker, or runwatch ui) on {socket.gethostname()}" \
        in words
    answer = http.post(f"{server.url}/api/runs/orphan-2/cancel", json={}, timeout=30).json()
    assert answer["status"] == "CANCEL_REQUESTED"
    then = answer.get("next") or ""
    assert "no longer heartbeats" in then and "waits for a local worker" in then
    assert run_row(engine, "orphan").status == "CANCEL_REQUESTED" and pid_alive(pid)

    # a live worker on its host stops it as it reaps the dead worker's jobs
    workers.start(runs_dir, db_url)
    wait_for(lambda: run_row(engine, "orphan").status == "CANCELLED"
             and run_row(engine, "orphan-2").status == "CANCELLED",
             what="the live worker to stop both cancelled jobs", deadline=60)
    assert group_gone(pid)
    assert [ev["phase"] for ev in events(run.dir)] == [
        "QUEUED", "PREPARING", "CANCEL_REQUESTED", "CANCELLED"]


def test_cancel_says_which_live_worker_can_stop_a_lost_workers_job(
        engine: Engine, db_url: str, runs_dir: Path) -> None:
    """A lost Ray worker's job is stopped by any live Ray worker, and waits for one while
    none is up; a lost local worker's process only by a live worker on its own host."""
    for name in ("on-ray", "on-ray-2", "elsewhere"):
        submit_command(engine, runs_dir, name)
    long_ago = time.time() - 600
    with engine.begin() as conn:
        for worker, host, executor, name in (("w-ray", "head", "ray", "on-ray"),
                                             ("w-ray-b", "head", "ray", "on-ray-2"),
                                             ("w-far", "host-b", "local", "elsewhere")):
            store_jobs.register_worker(conn, store_jobs.WorkerRow(
                worker, host, 1, 1, "cpu", long_ago, executor=executor))
            claim = store_jobs.claim(conn, worker, 1, long_ago)
            assert claim is not None and claim.name == name
            store_jobs.heartbeat(conn, worker, long_ago)
        store_jobs.register_worker(conn, store_jobs.WorkerRow(
            "w-here", socket.gethostname(), 2, 1, "cpu", time.time()))

    def cancel(name: str) -> str:
        said = cli_here("runs", "cancel", name, "--dir", str(runs_dir), "--db", db_url,
                        "-o", "json").stdout
        answer = json.loads(said)
        assert answer["status"] == "CANCEL_REQUESTED"
        return str(answer["next"])

    assert "waits for a Ray worker (runwatch worker --executor ray" in cancel("on-ray")
    far = cancel("elsewhere")
    assert "no live worker runs on host-b" in far and "stop it there yourself" in far
    with engine.begin() as conn:
        store_jobs.register_worker(conn, store_jobs.WorkerRow(
            "w-ray-live", "node", 3, 1, "cpu", time.time(), executor="ray"))
    assert cancel("on-ray-2").startswith(
        "its worker w-ray-b no longer heartbeats: a live worker stops its Ray job")
