"""`runs wait` follows a job through its attempts, as a user (or a CI step with
`--exit-status`) expects.

- It ended at a failed attempt that its worker was about to queue again: the SDK records
  the end before its process exits, and the worker queues the next attempt only once the
  process has gone, so the index shows FAILED in between. `runs wait --exit-status`
  exited 1 on a run that then succeeded at attempt 2.
- A next attempt's run read as "process gone" while its worker prepared it: the manifest
  still named attempt 1's exited process until attempt 2's SDK attached, so the wait
  ended there too ("the training process is gone", exit 1).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.ingest import Indexer
from runwatch.rundir import format as fmt
from runwatch.server.runner import Runner
from runwatch.store import jobs as store_jobs
from tests.support.cli import cli_here
from tests.support.jobs import events, record_attempt, run_row, submit_command
from tests.support.wait import first_line
from tests.support.workers import Workers, workers

__all__ = ["workers"]  # the fixture

# Fails at its first attempt, recording FAILED and then living on for a while (as a
# process that writes its end, then flushes and tears down); succeeds at its second.
FLAKY = """
import os, sys, time
import runwatch
run = runwatch.init(project="p")
run.log({"loss": 1.0}, step=0)
if not os.path.exists("failed-once"):
    open("failed-once", "w").close()
    run.finish("FAILED")
    time.sleep(1.5)
    sys.exit(1)
run.log({"loss": 0.5}, step=1)
run.finish()
"""


def test_wait_follows_a_failed_attempt_to_the_next_one_and_its_end(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers) -> None:
    run = submit_command(engine, runs_dir, "flaky", FLAKY, max_attempts=2)
    # the wait looks first, while the job is queued: started after the worker, a slow
    # start (a loaded machine) saw only the end
    wait = subprocess.Popen([sys.executable, "-m", "runwatch", "runs", "wait", "flaky",
                             "--exit-status", "--interval", "0.1", "--timeout", "60", "--dir",
                             str(runs_dir), "--db", db_url], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert "QUEUED" in first_line(wait, what="the wait's first look")
        proc = workers.start(runs_dir, db_url)
        try:
            out, err = wait.communicate(timeout=90)
        finally:
            workers.stop(proc)
    finally:
        if wait.poll() is None:
            wait.kill()
            wait.communicate()
    said = " ".join(out.split()) + " " + " ".join(err.split())
    assert wait.returncode == 0, said
    assert "attempt 1 failed and attempts remain: waiting for its worker to queue it " \
        "again" in said
    assert "process is gone" not in said
    assert [(ev["phase"], ev.get("attempt")) for ev in events(run.dir)
            if ev["phase"] in ("QUEUED", "FAILED", "SUCCEEDED")] == [
        ("QUEUED", 1), ("FAILED", None), ("QUEUED", 2), ("SUCCEEDED", None)]
    assert (run_row(engine, "flaky").status, run_row(engine, "flaky").attempt) == (
        "SUCCEEDED", 2)
    # attempt 2's SDK named its attempt in the manifest
    assert json.loads((run.dir / fmt.MANIFEST).read_text())["attempt"] == 2


def test_wait_ends_at_a_failed_last_attempt(engine: Engine, db_url: str, runs_dir: Path,
                                            workers: Workers) -> None:
    where = ["--dir", str(runs_dir), "--db", db_url]
    submit_command(engine, runs_dir, "once", "import sys; sys.exit(3)", max_attempts=1)
    proc = workers.start(runs_dir, db_url)
    try:
        waited = cli_here("runs", "wait", "once", "--exit-status", "--interval", "0.1",
                          "--timeout", "60", *where, check=False)
    finally:
        workers.stop(proc)
    assert waited.returncode == 1, waited.stdout + waited.stderr
    assert "attempts remain" not in waited.stdout + waited.stderr


@pytest.mark.parametrize("where", ["local", "server"])
def test_wait_on_a_queued_job_that_no_worker_will_start_says_so(
        where: str, engine: Engine, db_url: str, runs_dir: Path,
        request: pytest.FixtureRequest) -> None:
    """It waited in silence until --timeout; over --server it still did. The run detail
    says it too (`job.waits_for`), and `runs get` shows it."""
    submit_command(engine, runs_dir, "lonely", "pass")
    if where == "server":
        server: Runner = request.getfixturevalue("server")
        at = ["--server", server.url]
    else:
        at = ["--dir", str(runs_dir), "--db", db_url]
    waited = cli_here("runs", "wait", "lonely", "--interval", "0.1", "--timeout", "0.5", *at,
                      check=False)
    said = " ".join(waited.stdout.split())
    assert waited.returncode == 124, said
    words = "no worker of profile cpu is running on this index; start one ("
    # a worker on the job's runs folder (session 37, defect 6.2: it named none)
    start = f"worker {runs_dir.resolve()} --device-profile cpu"
    assert f"lonely waits in the queue, and {words}" in said and start in said, said
    shown = " ".join(cli_here("runs", "get", "lonely", *at).stdout.split())
    assert f"Waits: {words}" in shown and start in shown, shown
    detail = json.loads(cli_here("runs", "get", "lonely", *at, "-o", "json").stdout)
    assert detail["job"]["waits_for"].startswith(words)
    assert start in detail["job"]["waits_for"]


def test_wait_goes_on_while_the_index_lags_a_requeue(engine: Engine, db_url: str,
                                                     runs_dir: Path) -> None:
    """The worker queues attempt 2 in the index's job row before it indexes the folder: a
    look in between saw the run FAILED at attempt 1, and the job no longer held at that
    attempt, and ended the wait (exit 1) on a run that went on. (Found in review.)"""
    run = submit_command(engine, runs_dir, "lagging", max_attempts=2)
    with engine.begin() as conn:
        assert store_jobs.claim(conn, "w", 1, time.time()) is not None
    record_attempt(run.dir, 1, "FAILED")
    Indexer(engine, runs_dir).index_once()
    with engine.begin() as conn:  # what reaper.conclude commits before it indexes
        assert store_jobs.requeue(conn, run_row(engine, "lagging").pk, 2)
    waited = cli_here("runs", "wait", "lagging", "--exit-status", "--interval", "0.1",
                      "--timeout", "0.5", "--dir", str(runs_dir), "--db", db_url, check=False)
    said = " ".join(waited.stdout.split()) + " " + " ".join(waited.stderr.split())
    assert waited.returncode == 124, said  # it waits on, for the attempt the job moved to
    assert "attempt 1 failed and attempts remain" in said, said


@pytest.mark.parametrize("where", ["local", "server"])
def test_wait_on_a_failed_attempt_whose_worker_is_gone_says_who_ends_it(
        where: str, engine: Engine, db_url: str, runs_dir: Path,
        request: pytest.FixtureRequest) -> None:
    """The worker holding a failed attempt with attempts left died before it could queue
    it again: the wait waited in silence for a reaper (found in review); over --server it
    still did (the server's workers view knows the worker is lost)."""
    submit_command(engine, runs_dir, "orphan", max_attempts=2)
    with engine.begin() as conn:
        store_jobs.register_worker(conn, store_jobs.WorkerRow(
            "w-dead", "host", 1, 1, "cpu", time.time() - 3600))
        store_jobs.heartbeat(conn, "w-dead", time.time() - 3600)
        assert store_jobs.claim(conn, "w-dead", 1, time.time() - 3600) is not None
    record_attempt(runs_dir / "orphan", 1, "FAILED")
    Indexer(engine, runs_dir).index_once()
    if where == "server":
        server: Runner = request.getfixturevalue("server")
        at = ["--server", server.url]
    else:
        at = ["--dir", str(runs_dir), "--db", db_url]
    waited = cli_here("runs", "wait", "orphan", "--exit-status", "--interval", "0.1",
                      "--timeout", "0.3", *at, check=False)
    said = " ".join((waited.stdout + " " + waited.stderr).split())
    assert waited.returncode == 124, said
    assert "(its worker w-dead is no longer running: a live worker's reaper queues it " \
        "again; with none running, this waits until --timeout)" in said, said


def test_wait_on_an_attempt_whose_process_died_goes_on_while_attempts_remain(
        engine: Engine, db_url: str, runs_dir: Path) -> None:
    """A job's process and its worker were killed (kill -9): the run reads RUNNING, its
    process gone, and attempts remain, so a live worker's reaper concludes it stopped_early
    and queues it again. `runs wait --exit-status` said "the training process is gone"
    and exited 1 on a run that then succeeded (a crash-safety trial, session 37)."""
    run = submit_command(engine, runs_dir, "killed", max_attempts=2)
    with engine.begin() as conn:
        store_jobs.register_worker(conn, store_jobs.WorkerRow(
            "w-killed", "host", 1, 1, "cpu", time.time() - 3600))
        store_jobs.heartbeat(conn, "w-killed", time.time() - 3600)
        assert store_jobs.claim(conn, "w-killed", 1, time.time() - 3600) is not None
    record_attempt(run.dir, 1, end=None)  # RUNNING, no end recorded
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    manifest = json.loads((run.dir / fmt.MANIFEST).read_text())
    manifest.update(pid=dead.pid, host=socket.gethostname(), attempt=1)
    (run.dir / fmt.MANIFEST).write_text(json.dumps(manifest))
    Indexer(engine, runs_dir).index_once()
    waited = cli_here("runs", "wait", "killed", "--exit-status", "--interval", "0.1",
                      "--timeout", "0.3", "--dir", str(runs_dir), "--db", db_url, check=False)
    said = " ".join((waited.stdout + " " + waited.stderr).split())
    assert waited.returncode == 124, said  # it waits on for the next attempt
    assert "attempt 1 stopped (its process is gone) and attempts remain: waiting for its " \
        "worker to queue it again" in said, said
    assert "the training process is gone" not in said
