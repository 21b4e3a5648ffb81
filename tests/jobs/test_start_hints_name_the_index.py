"""The commands job control prints for a job no worker starts (a submit's and a retry's
`next`, the Waits of the run detail) and submit's hint for a script that is not executable
run as printed: they name the job's runs folder and the --dir and --db the command was
given, so the worker they start serves the index the job waits in.

Found in session 37 (defect 6.2): with no worker running, the words said `runwatch worker
--device-profile cpu` (no folder, no --db: a worker on the default runs folder, which
never claims the job), and the hint said `runwatch submit -- python X …` without --dir.
"""

from __future__ import annotations

import time
from pathlib import Path

from runwatch.cli.output import runwatch_command
from runwatch.jobs.control import queued_waits
from runwatch.store import jobs as store_jobs
from runwatch.store.db import open_engine
from tests.support.cli import cli_here
from tests.support.jobs import run_row


def said(args: list[str], check: bool = True) -> str:
    res = cli_here(*args, check=check)
    return " ".join((res.stdout + res.stderr).split())


def test_the_start_hints_name_the_runs_folder_and_the_index(tmp_path: Path) -> None:
    runs, db = tmp_path / "runs", str(tmp_path / "elsewhere.db")
    where = ["--dir", str(runs), "--db", db]
    out = said(["submit", *where, "--name", "job", "--", "python", "-c", "pass"])
    folder = str(runs.resolve())
    worker = runwatch_command("worker", folder, "--device-profile", "cpu", db=db)
    assert (f"no worker of profile cpu is running on this index; start one ({worker}, or "
            f"{runwatch_command('ui', folder, db=db)}, which runs one of the default "
            "profile)") in out, out
    engine = open_engine(db)
    try:
        with engine.connect() as conn:  # the run detail's Waits, rendered the CLI's way
            row = run_row(engine, "job")
            waits = queued_waits(conn, store_jobs.job_row(conn, row.pk), row.status, row.dir,
                                 time.time(), lambda *w: runwatch_command(*w, db=db))
        assert waits is not None and worker in waits, waits
    finally:
        engine.dispose()

    cli_here("runs", "cancel", "job", *where)
    out = said(["runs", "retry", "job", *where])
    assert worker in out, out

    script = tmp_path / "train.py"
    script.write_text("print(1)\n")  # not executable
    out = said(["submit", *where, "--", str(script)])
    submit = runwatch_command("submit", *where, "--", "python", str(script))
    assert f"run it through its interpreter ({submit} …)" in out, out
