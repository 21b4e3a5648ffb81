"""A plain command that a worker runs reports no phase and records nothing: its duration
runs from the worker's PREPARING, when it started the process, to its end (a trial saw
`runs list` show DURATION "-" and `started_at: null` for a command that ran 3 s)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from runwatch.analysis.views import run_summary
from runwatch.rundir import format as fmt
from tests.support.jobs import events, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, workers

__all__ = ["workers"]  # the fixture

SDK_RUN = """
import runwatch
run = runwatch.init(project="p", phase="PREPARING")
run.set_phase("RUNNING")
run.log({"train/loss": 1.0}, step=0)
run.finish()
"""


def _ended(engine: Engine, name: str) -> bool:
    return run_row(engine, name).status in fmt.TERMINAL_PHASES


def test_a_plain_command_counts_from_its_start(engine: Engine, db_url: str, runs_dir: Path,
                                               workers: Workers) -> None:
    plain = submit_command(engine, runs_dir, "plain", "import time; time.sleep(0.5)")
    workers.start(runs_dir, db_url)
    wait_for(lambda: _ended(engine, "plain"), what="the command to end")
    row = run_row(engine, "plain")
    by_phase = {e["phase"]: e["ts"] for e in events(plain.dir)}
    assert "RUNNING" not in by_phase
    assert row.started_at == by_phase["PREPARING"]
    summary = run_summary(row, row.ended_at, False)
    assert summary["duration_s"] == row.ended_at - by_phase["PREPARING"]
    assert summary["duration_s"] >= 0.5


def test_a_run_that_reports_running_counts_from_running(engine: Engine, db_url: str,
                                                        runs_dir: Path,
                                                        workers: Workers) -> None:
    sdk = submit_command(engine, runs_dir, "sdk", SDK_RUN)
    workers.start(runs_dir, db_url)
    wait_for(lambda: _ended(engine, "sdk"), what="the run to end")
    running = next(e["ts"] for e in events(sdk.dir) if e["phase"] == "RUNNING")
    assert run_row(engine, "sdk").started_at == running
