"""A resumed attempt reads QUEUED until its process starts, as a fresh one does, though the
run's record up to its checkpoint is back in view (runwatch.ingest.lifecycle,
predates_queueing).

Found in session 38: a Ray worker puts a resumed attempt's record back as it submits the
attempt, and the index took those records for the attempt's start, so the run read
RUNNING all the while Ray kept the job PENDING (tests/jobs/test_ray_cluster_queue.py
shows it on a real head). Here the worker's steps are taken as a worker takes them
(worker._start: restore, then its start event), on real files and a real index, for
both executors' start events.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import Engine

from runwatch.ingest import Indexer
from runwatch.jobs import control, reaper
from runwatch.jobs.ray_executor import RayExecutor
from runwatch.jobs.resume import restore, resumed
from runwatch.rundir import format as fmt
from runwatch.rundir.append import locked, write_events
from tests.jobs.test_resume import RESUMABLE
from tests.support.jobs import events, run_row, submit_command


def _attempt_one_and_resume(engine: Engine, runs_dir: Path) -> Path:
    """Run "cmd" (RESUMABLE: a checkpoint at step 3, steps 1-5, then it fails) as attempt 1,
    as a worker would, index it, and retry it with resume; its folder."""
    run = submit_command(engine, runs_dir, "cmd", [sys.executable, "-c", RESUMABLE])
    env = {**os.environ, fmt.ENV_RUN_DIR: str(run.dir), fmt.ENV_RUN_ID: run.run_id,
           fmt.ENV_ATTEMPT: "1"}
    assert subprocess.run([sys.executable, "-c", RESUMABLE], env=env, cwd=run.dir,
                          capture_output=True, timeout=120).returncode == 3
    Indexer(engine, runs_dir).index_once()
    assert run_row(engine, "cmd").status == "FAILED"
    control.retry(engine, run_row(engine, "cmd").pk, runs_dir, resume=True)
    Indexer(engine, runs_dir).index_once()
    assert run_row(engine, "cmd").status == "QUEUED"
    return run.dir


def _start(run_dir: Path, queue: str | None) -> None:
    """What a worker does as it starts attempt 2 (worker._start): put its record back, then
    write its start event: QUEUED `queue` (a Ray job, waiting for its cluster), else
    PREPARING."""
    with locked(run_dir, 5.0):
        resume = resumed(events(run_dir), 2)
        assert resume is not None and resume.step == 3
        restore(run_dir, resume)
        write_events(run_dir, [reaper.start_event(2, "w", queue)])


def test_a_resumed_attempt_waiting_for_its_cluster_reads_queued_with_its_record_back(
        engine: Engine, runs_dir: Path) -> None:
    run_dir = _attempt_one_and_resume(engine, runs_dir)
    _start(run_dir, RayExecutor.queue)
    Indexer(engine, runs_dir).index_once()
    row = run_row(engine, "cmd")
    assert (row.status, row.stage, row.attempt) == ("QUEUED", RayExecutor.queue, 2)
    assert row.started_at is None
    assert (row.observed_step, row.saved_step) == (3, 3)  # its record up to step 3

    with locked(run_dir, 5.0):  # the cluster started it
        write_events(run_dir, [{"phase": "PREPARING", "attempt": 2}])
    Indexer(engine, runs_dir).index_once()
    row = run_row(engine, "cmd")
    assert (row.status, row.observed_step) == ("PREPARING", 3)


def test_a_resumed_attempt_of_a_local_worker_starts_when_its_worker_starts_it(
        engine: Engine, runs_dir: Path) -> None:
    """The records put back are attempt 1's, older than attempt 2's start: they do not
    date it (a command job's duration runs from its worker's start)."""
    run_dir = _attempt_one_and_resume(engine, runs_dir)
    _start(run_dir, None)
    Indexer(engine, runs_dir).index_once()
    row = run_row(engine, "cmd")
    queued = [ev["ts"] for ev in events(run_dir) if ev["phase"] == "QUEUED"][-1]
    assert (row.status, row.attempt, row.observed_step) == ("PREPARING", 2, 3)
    assert row.started_at is not None and row.started_at >= queued
