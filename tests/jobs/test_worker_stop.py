"""A worker told to stop (Ctrl-C or SIGTERM) while a job trains: the job ends CANCELLED
`worker_stopped`, with no new attempt, and what it recorded stays in view.

It used to be queued again where attempts remained: the requeue moved the attempt that
had trained (metrics, samples, checkpoints) into attempts/1/ and the run showed an empty
QUEUED attempt 2 (`runs get`, `runs metrics` and the web app showed no step of it), and
once that attempt was cancelled, "CANCELLED … [cancelled]" with nothing behind it; with
one attempt the run read as a cancel ("It was asked to stop (cancelled…)") although
nobody cancelled it.
"""

from __future__ import annotations

import json
import logging
import signal
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.ingest import Indexer
from runwatch.jobs import reaper
from runwatch.jobs.failures import CATALOGUE, AttemptEnd
from runwatch.jobs.worker import Worker
from runwatch.rundir import format as fmt
from runwatch.rundir import stopnote
from runwatch.rundir.append import locked
from runwatch.server.runner import Runner
from runwatch.store import jobs as store_jobs
from tests.support import http
from tests.support.cli import cli_here
from tests.support.jobs import events, job, record_attempt, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import FAST, Workers, group_gone, workers

__all__ = ["workers"]  # the fixture

# Logs three steps, then trains on until stopped (its SDK handles SIGTERM).
TRAINS = """
import os, time
import runwatch
run = runwatch.init(project="p")
for step in range(3):
    run.log({"train/loss": 1.0 / (step + 1)}, step=step)
open("pid", "w").write(str(os.getpid()))
while True:
    time.sleep(0.05)
"""
WORKER_STOPPED = CATALOGUE["worker_stopped"]


def test_a_stopped_worker_s_job_ends_cancelled_and_keeps_what_it_trained_in_view(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, server: Runner) -> None:
    run = submit_command(engine, runs_dir, "trains", TRAINS, max_attempts=3)
    proc = workers.start(runs_dir, db_url)
    pid = int(wait_for(lambda: (runs_dir / "pid").exists() and (runs_dir / "pid").read_text(),
                       what="the job to log its steps"))
    assert workers.stop(proc, signal.SIGINT) == 0  # Ctrl-C, as a user stops it
    assert group_gone(pid)

    # the folder: the SDK recorded the worker's stop, and no next attempt was started
    evs = [(ev["phase"], ev.get("attempt"), ev.get("code")) for ev in events(run.dir)]
    assert evs[-1] == ("CANCELLED", None, "worker_stopped")
    assert [e for e in evs if e[0] == "QUEUED"] == [("QUEUED", 1, None)]
    assert events(run.dir)[-1]["reason"] == WORKER_STOPPED.sentence
    # what the attempt trained stays in the run folder; attempts/1/ has the worker's files
    steps = [json.loads(line)["step"] for line in (run.dir / fmt.METRICS).read_text().split()]
    assert steps == [0, 1, 2]
    assert sorted(p.name for p in fmt.attempt_dir(run.dir, 1).iterdir()) == [
        fmt.OUTPUT_LOG, fmt.WORKER_STOPPED]

    # the index, the job, the CLI and the web app's API
    row = run_row(engine, "trains")
    assert (row.status, row.attempt, row.reason_code, row.observed_step) == (
        "CANCELLED", 1, "worker_stopped", 2)
    held = job(engine, "trains")
    assert held is not None and (held["attempt"], held["worker_id"]) == (1, None)
    with engine.connect() as conn:
        assert store_jobs.queue_depth(conn) == 0
    where = ["--dir", str(runs_dir), "--db", db_url]
    shown = json.loads(cli_here("runs", "get", "trains", "-o", "json", *where).stdout)
    assert (shown["state"]["phase"], shown["state"]["observed_step"]) == ("CANCELLED", 2)
    assert shown["failure"] == {"code": "worker_stopped", "reason": WORKER_STOPPED.sentence,
                                "what_to_do": WORKER_STOPPED.what_to_do}
    assert [(a["attempt"], a["reason_code"]) for a in shown["attempts"]] == [
        (1, "worker_stopped")]
    metrics = json.loads(cli_here("runs", "metrics", "trains", "-o", "json", *where).stdout)
    assert [(s["step"], s["measured"]["train/loss"]) for s in metrics["steps"]] == [
        (0, 1.0), (1, 0.5), (2, 1 / 3)]
    page = http.get(f"{server.url}/api/runs/trains/history").json()
    assert [r["step"] for r in page["rows"]] == [0, 1, 2], page


def test_a_job_a_stopping_worker_left_to_the_reaper_ends_the_same_way(
        engine: Engine, runs_dir: Path) -> None:
    # the worker noted its stop, and its job's process group outlived it (stuck in the
    # kernel), so another worker's reaper concludes the attempt once the group has gone
    run = submit_command(engine, runs_dir, "stuck", max_attempts=2)
    with engine.begin() as conn:
        claim = store_jobs.claim(conn, "gone", 1, 100.0)
    assert claim is not None
    record_attempt(run.dir, 1, end=None)
    stopnote.write(run.dir, 1, "gone")
    indexer = Indexer(engine, runs_dir)

    def index(_: Path) -> None:
        indexer.index_once()

    verdict = reaper.conclude(engine, claim, "gone", AttemptEnd(worker_lost=True), index,
                              stale_before=time.time())
    assert verdict is not None and (verdict.phase, verdict.code) == (
        "CANCELLED", "worker_stopped")
    assert [(ev["phase"], ev.get("code")) for ev in events(run.dir)][-1] == (
        "CANCELLED", "worker_stopped")
    assert (run.dir / fmt.METRICS).exists()
    row = run_row(engine, "stuck")
    assert (row.status, row.attempt, row.observed_step) == ("CANCELLED", 1, 4)
    with engine.connect() as conn:
        assert store_jobs.queue_depth(conn) == 0


def test_a_cancel_asked_just_before_the_worker_stops_stays_a_cancel(
        engine: Engine, runs_dir: Path) -> None:
    """A user's cancel that the worker had not acted on yet (asked since its last pass)
    when it was told to stop: the worker noted its own stop first, so the run read
    "stopped because its worker was stopped" and the cancel was lost from its record."""
    run = submit_command(engine, runs_dir, "both", TRAINS, max_attempts=3)
    worker = Worker(engine, runs_dir, indexer=Indexer(engine, runs_dir), **FAST)

    def started() -> bool:
        worker._safe_tick()  # one pass of the worker's loop: claim, start, watch
        return (runs_dir / "pid").exists()

    wait_for(started, what="the job to log its steps")
    with engine.begin() as conn:
        # False: a worker holds the job, and it is the one to stop it
        assert not store_jobs.request_cancel(conn, run_row(engine, "both").pk, time.time())
    worker.stop_jobs()  # no pass in between: the cancel is not acted on yet
    evs = [(ev["phase"], ev.get("code")) for ev in events(run.dir)]
    assert evs[-1] == ("CANCELLED", "cancelled"), evs
    assert not stopnote.written(run.dir, 1)
    row = run_row(engine, "both")
    assert (row.status, row.reason_code) == ("CANCELLED", "cancelled")


def test_a_claimed_job_not_started_yet_whose_cancel_was_asked_ends_cancelled(
        engine: Engine, runs_dir: Path) -> None:
    """A job its worker claimed but had not started (its folder busy) when a cancel was
    asked and the worker was told to stop: it went back to the queue, where no worker
    claims a job a cancel was asked of, and nothing ever ended it. (Found in review.)"""
    run = submit_command(engine, runs_dir, "unstarted", TRAINS)
    worker = Worker(engine, runs_dir, indexer=Indexer(engine, runs_dir), **FAST)
    with locked(run.dir):  # its folder busy: the claim is made, the start waits
        worker._safe_tick()
    held = job(engine, "unstarted")
    assert held is not None and held["worker_id"] == worker.id and held["pid"] is None
    with engine.begin() as conn:
        assert not store_jobs.request_cancel(conn, run_row(engine, "unstarted").pk, time.time())
    worker.stop_jobs()
    assert [(ev["phase"], ev.get("code")) for ev in events(run.dir)][-1] == (
        "CANCELLED", "cancelled_before_start")  # no process of it started
    assert not (runs_dir / "pid").exists()
    assert run_row(engine, "unstarted").status == "CANCELLED"
    held = job(engine, "unstarted")
    assert held is not None and held["worker_id"] is None


def test_the_workers_log_line_says_the_end_the_run_records(
        engine: Engine, runs_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A job stopped from outside (`ray job stop`) whose SDK recorded CANCELLED: the run
    read CANCELLED `cancelled` while the worker's log said "attempt 1: FAILED (stopped)"
    (its own verdict, which the recorded end outranks). Found in a trial."""
    run = submit_command(engine, runs_dir, "outside", max_attempts=1)
    with engine.begin() as conn:
        claim = store_jobs.claim(conn, "w", 1, time.time())
    assert claim is not None
    record_attempt(run.dir, 1, "CANCELLED", code="cancelled")
    indexer = Indexer(engine, runs_dir)

    def index(_: Path) -> None:
        indexer.index_once()

    with caplog.at_level(logging.INFO, logger="runwatch.jobs.reaper"):
        verdict = reaper.conclude(engine, claim, "w", AttemptEnd(exit_code=-15), index)
    assert verdict is not None
    assert "outside attempt 1: CANCELLED (cancelled)" in caplog.text, caplog.text
    assert run_row(engine, "outside").status == "CANCELLED"


def test_a_cancelled_unstarted_job_whose_folder_stays_busy_is_left_to_a_reaper(
        engine: Engine, runs_dir: Path) -> None:
    """The stopping worker cannot record the cancel (the folder stays busy): it put the
    job back in the queue, where no worker claims a job a cancel was asked of, and nothing
    ended it. It now leaves the claim held, and a live worker's reaper ends it (found in
    review)."""
    run = submit_command(engine, runs_dir, "busy", TRAINS)
    worker = Worker(engine, runs_dir, indexer=Indexer(engine, runs_dir), **FAST)
    with locked(run.dir):
        worker._safe_tick()  # claimed, not started: the folder is busy
        claim = worker.jobs[run_row(engine, "busy").pk].claim
        with engine.begin() as conn:
            store_jobs.request_cancel(conn, claim.run_pk, time.time())
        worker.stop_jobs()  # still busy: the cancel cannot be recorded
    held = job(engine, "busy")
    assert held is not None and held["worker_id"] == worker.id  # not back in the queue
    indexer = Indexer(engine, runs_dir)

    def index(_: Path) -> None:
        indexer.index_once()

    # another worker's reaper, once this one's heartbeat is old
    reaper.conclude(engine, claim, worker.id, AttemptEnd(worker_lost=True), index,
                    stale_before=time.time() + 1)
    assert [(ev["phase"], ev.get("code")) for ev in events(run.dir)][-1] == (
        "CANCELLED", "cancelled_before_start")  # no process of it started
    assert run_row(engine, "busy").status == "CANCELLED"
