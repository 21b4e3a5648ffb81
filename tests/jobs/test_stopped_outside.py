"""A job's process stopped by a SIGTERM that runwatch did not send (a cluster preempting
it, `kill` from a shell, `ray job stop`) ends FAILED `stopped`, as docs/jobs.md classifies
it, and is queued again while attempts remain. Its SDK recorded CANCELLED `cancelled`,
"asked to stop", while its worker concluded it stopped and queued it again: the run read as
cancelled by a user and then restarted by itself (found in a trial). A cancel still ends
CANCELLED `cancelled`: job control leaves a note before its SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from sqlalchemy import Engine

from runwatch.jobs.submit import SubmittedRun
from runwatch.rundir import format as fmt
from runwatch.rundir import stopnote
from tests.support.cli import run_cli
from tests.support.jobs import events, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, workers

__all__ = ["workers"]  # the fixture

# Logs until stopped at its first attempt (its pid in a file); succeeds at its second.
PREEMPTED = """
import os, time
import runwatch
first = os.environ["RUNWATCH_ATTEMPT"] == "1"
with runwatch.init(project="p") as run:
    open(f"pid-{os.environ['RUNWATCH_ATTEMPT']}", "w").write(str(os.getpid()))
    for step in range(10_000 if first else 3):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
        time.sleep(0.05 if first else 0)
"""


def _pid(runs_dir: Path, attempt: int) -> int | None:
    path = runs_dir / f"pid-{attempt}"
    return int(path.read_text()) if path.exists() and path.read_text() else None


def _running(engine: Engine, db_url: str, runs_dir: Path, workers: Workers, name: str
             ) -> tuple[SubmittedRun, subprocess.Popen[str]]:
    """Job `name` (PREEMPTED, two attempts) submitted, and its worker once attempt 1 runs."""
    run = submit_command(engine, runs_dir, name, PREEMPTED, max_attempts=2)
    proc = workers.start(runs_dir, db_url)
    wait_for(lambda: _pid(runs_dir, 1) is not None, what="attempt 1 to run")
    return run, proc


def test_a_sigterm_from_outside_fails_the_attempt_stopped_and_it_runs_again(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers) -> None:
    run, proc = _running(engine, db_url, runs_dir, workers, "preempted")
    try:
        os.kill(_pid(runs_dir, 1) or 0, signal.SIGTERM)
        wait_for(lambda: run_row(engine, "preempted").status == "SUCCEEDED"
                 and run_row(engine, "preempted").attempt == 2, deadline=60,
                 what="attempt 2 to succeed")
    finally:
        workers.stop(proc)
    ends = [(ev["phase"], ev.get("code")) for ev in events(run.dir)
            if ev["phase"] in fmt.TERMINAL_PHASES]
    assert ends == [("FAILED", "stopped"), ("SUCCEEDED", None)]
    assert not stopnote.cancel_written(run.dir, 1) and not stopnote.written(run.dir, 1)


def test_a_cancel_still_ends_cancelled_with_its_note(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers) -> None:
    run, proc = _running(engine, db_url, runs_dir, workers, "cancelled")
    try:
        run_cli("runs", "cancel", "cancelled", "--dir", str(runs_dir), "--db", db_url)
        wait_for(lambda: run_row(engine, "cancelled").status == "CANCELLED", deadline=60,
                 what="the cancel to end the run")
    finally:
        workers.stop(proc)
    assert [(ev["phase"], ev.get("code")) for ev in events(run.dir)
            if ev["phase"] in fmt.TERMINAL_PHASES] == [("CANCELLED", "cancelled")]
    assert stopnote.cancel_written(run.dir, 1)
    assert run_row(engine, "cancelled").attempt == 1  # not queued again
