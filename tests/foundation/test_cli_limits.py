"""`runs metrics --limit` and `runs logs --tail` take a count from 1, as `runs list
--limit` does: a trial found `--limit -1` showing the last 4 of 5 steps (a Python slice),
`--limit 0` every step, and `--tail -1` every line. `--tail 0` is refused too: with no
follow mode it could only print nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import runwatch
from tests.support.cli import cli_here, run_cli


def _run_of_five(runs: Path) -> None:
    with runwatch.init(name="lim", dir=runs) as run:
        for step in range(5):
            run.log({"loss": 1.0 / (step + 1)}, step=step)
            run.log_text(f"line {step}")


@pytest.mark.parametrize(("args", "option"), [
    (["metrics", "lim", "--limit", "0"], "--limit"),
    (["metrics", "lim", "--limit", "-1"], "--limit"),
    (["logs", "lim", "--tail", "0"], "--tail"),
    (["logs", "lim", "--tail", "-5"], "--tail"),
])
def test_a_count_below_one_is_refused(runs_dir: Path, args: list[str], option: str) -> None:
    _run_of_five(runs_dir)
    said = cli_here("runs", *args, "--dir", str(runs_dir), check=False)
    assert said.returncode == 2, said.stdout
    assert option in said.stderr and "greater than or equal to 1" in said.stderr


def test_counts_from_one_show_that_many(runs_dir: Path) -> None:
    _run_of_five(runs_dir)
    table = run_cli("runs", "metrics", "lim", "--dir", str(runs_dir), "--limit", "2").stdout
    assert "showing the last 2 of 5 steps" in table
    logs = cli_here("runs", "logs", "lim", "--dir", str(runs_dir), "--tail", "1",
                    "-o", "json").stdout
    assert [entry["message"] for entry in json.loads(logs)] == ["line 4"]
