"""A job whose process recorded phases with the SDK and exits 0 without finish() (a
framework's os._exit(0)) stopped before it finished: FAILED `stopped_early`, as
docs/jobs.md's table of what a process records says; a command that records nothing and
exits 0 still SUCCEEDS.

Found in a trial (trial35, defect 5): such a run, which had recorded RUNNING and three
steps, was marked SUCCEEDED by its worker, and `runs wait --exit-status` exited 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sqlalchemy import Engine

from runwatch.rundir import format as fmt
from tests.support.jobs import events, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, workers

__all__ = ["workers"]  # the fixture

EXIT_EARLY = str(Path(__file__).resolve().parent / "scripts" / "exit_early.py")
JOBS = {  # name: (argv, the phase and code it ends with)
    "running": ([sys.executable, EXIT_EARLY, "0"], ("FAILED", "stopped_early")),
    "preparing": ([sys.executable, EXIT_EARLY, "0", "preparing"], ("FAILED", "stopped_early")),
    "plain": ([sys.executable, "-c", "print('done')"], ("SUCCEEDED", None)),
}


def test_an_sdk_run_that_exits_0_without_finish_stopped_early_and_a_plain_command_succeeds(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers) -> None:
    runs = {name: submit_command(engine, runs_dir, name, argv, max_attempts=1)
            for name, (argv, _) in JOBS.items()}
    workers.start(runs_dir, db_url, devices=len(JOBS))
    names = list(JOBS)
    wait_for(lambda: all(run_row(engine, n).status in fmt.TERMINAL_PHASES for n in names),
             what="the jobs to end")
    for name, (_, (phase, code)) in JOBS.items():
        last = events(runs[name].dir)[-1]
        assert (last["phase"], last.get("code")) == (phase, code), (name, last)
        row = run_row(engine, name)
        assert (row.status, row.reason_code) == (phase, code), name
