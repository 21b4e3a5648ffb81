"""A job whose process could not be started (a command not installed where the worker
runs) is told where the cause is: its advice points to `runwatch runs logs RUN`, and the
logs name the command and why it could not start.

Found in a trial (trial35, a wording finding): the advice said only to submit the run
again later or to ask whoever runs the workers, while the cause ("could not start
definitely-not-a-command …: No such file or directory") was in the run's logs.
"""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import Engine

from runwatch.jobs.failures import CATALOGUE
from tests.support.cli import cli_here
from tests.support.jobs import run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, workers

__all__ = ["workers"]  # the fixture


def test_a_job_that_could_not_start_points_to_its_logs_which_name_the_cause(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers) -> None:
    submit_command(engine, runs_dir, "missing", ["definitely-not-a-command", "--lr", "1"])
    workers.start(runs_dir, db_url)
    wait_for(lambda: run_row(engine, "missing").status == "FAILED", what="the job to end")
    assert run_row(engine, "missing").reason_code == "could_not_start"
    where = ("--dir", str(runs_dir), "--db", db_url)
    shown = " ".join(cli_here("runs", "get", "missing", *where).stdout.split())
    assert f"What to do: {CATALOGUE['could_not_start'].what_to_do}" in shown, shown
    assert "its logs say why (runwatch runs logs RUN)" in shown, shown
    logs = json.loads(cli_here("runs", "logs", "missing", *where, "-o", "json").stdout)
    [said] = [line["message"] for line in logs]
    assert said.startswith("attempt 1 ended FAILED; the last line of its output "
                           "(attempts/1/output.log):\nrunwatch: could not start "
                           "definitely-not-a-command in "), said
    assert said.endswith(": No such file or directory"), said
