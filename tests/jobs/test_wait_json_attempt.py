"""`runwatch runs wait -o json` gives each event the attempt it belongs to: the end its SDK
recorded (which names no attempt in the run's events) is of the attempt job control
started last, 1 on a first attempt.

Found in a trial (trial35, a wording finding): the terminal event read `"attempt": null`
on attempt 1.
"""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import Engine

from runwatch.jobs import control
from tests.support.cli import cli_here
from tests.support.jobs import events, job, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, workers

__all__ = ["workers"]  # the fixture

TRAIN = """
import runwatch
run = runwatch.init(project="p")
run.log({"train/loss": 1.0}, step=0)
run.finish()
"""


def waited(runs: Path, db: str, name: str) -> dict[str, object]:
    """The terminal event `runs wait -o json` prints for an ended run (its first line)."""
    out = cli_here("runs", "wait", name, "--dir", str(runs), "--db", db, "-o", "json").stdout
    return dict(json.loads(out.splitlines()[0]))


def test_the_terminal_event_of_runs_wait_json_names_its_attempt(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers) -> None:
    run = submit_command(engine, runs_dir, "sdk", TRAIN)
    workers.start(runs_dir, db_url)
    wait_for(lambda: (job(engine, "sdk") or {}).get("worker_id", "") is None
             and run_row(engine, "sdk").status == "SUCCEEDED", what="attempt 1 to end")
    assert "attempt" not in events(run.dir)[-1]  # the SDK's end names none
    end = waited(runs_dir, db_url, "sdk")
    assert (end["phase"], end["attempt"]) == ("SUCCEEDED", 1), end

    control.retry(engine, run.run_pk)
    wait_for(lambda: run_row(engine, "sdk").attempt == 2
             and run_row(engine, "sdk").status == "SUCCEEDED", what="attempt 2 to end")
    end = waited(runs_dir, db_url, "sdk")
    assert (end["phase"], end["attempt"]) == ("SUCCEEDED", 2), end
