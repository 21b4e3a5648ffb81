"""Money in the CLI (`runs get`'s Spend and Attempts lines, `runwatch resources`' SPEND and
RATE) is in fixed notation: "< 0.0001" below a cent's hundredth, else four significant
digits (runwatch.cli.output.fmt_money), as the web app shows it (web/src/format.ts).

Found in a trial (trial35, a wording finding): `Spend: 8.333e-08 at 0.05 per
device-hour`, `SPEND 4.146e-05`, `#1: … spend 3.722e-06`, hard to read as money.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.cli.output import fmt_money
from runwatch.rundir import format as fmt
from runwatch.store import jobs as store_jobs
from tests.support.cli import cli_here
from tests.support.jobs import run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, workers

__all__ = ["workers"]  # the fixture


@pytest.mark.parametrize(("amount", "shown"), [
    (None, "-"), (0.0, "0"), (8.333e-08, "< 0.0001"), (4.146e-05, "< 0.0001"),
    (0.0001, "0.0001"), (0.000273, "0.000273"), (0.0001389, "0.0001389"), (0.05, "0.05"),
    (0.04477, "0.04477"), (1.0, "1"), (12.345, "12.35"), (9.99995, "10"), (12345.6, "12346"),
])
def test_an_amount_of_money_is_in_fixed_notation(amount: float | None, shown: str) -> None:
    assert fmt_money(amount) == shown


def test_runs_get_and_resources_show_spend_in_fixed_notation(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers) -> None:
    code = (f"import os, sys; sys.exit(0 if os.environ['{fmt.ENV_ATTEMPT}'] == '2' else 1)")
    submit_command(engine, runs_dir, "cheap", [sys.executable, "-c", code], max_attempts=2)
    workers.start(runs_dir, db_url)
    wait_for(lambda: run_row(engine, "cheap").status == "SUCCEEDED", what="the job to end")
    shown = cli_here("runs", "get", "cheap", "--dir", str(runs_dir), "--db", db_url).stdout
    assert "Spend: < 0.0001 at 0.05 per device-hour" in shown, shown
    assert "spend < 0.0001 at 0.05" in shown, shown  # the attempts' lines
    assert "e-0" not in shown, shown

    now = time.time()
    with engine.begin() as conn:  # a worker that was up 10 s: 0.0001389 at 0.05
        store_jobs.register_worker(conn, store_jobs.WorkerRow(
            "w-short", "host-a", 1, 1, "cpu", now - 10, hourly_rate=0.05))
        store_jobs.stop_worker(conn, "w-short", now)
    table = cli_here("resources", str(runs_dir), "--db", db_url, "-o", "wide").stdout
    [row] = [[c.strip() for c in ln.split("│")] for ln in table.splitlines()
             if ln.startswith("w-short")]
    assert row[4:6] == ["0.0001389", "0.05"], row  # SPEND, RATE
    assert "e-0" not in table, table
