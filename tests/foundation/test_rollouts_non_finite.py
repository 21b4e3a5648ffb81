"""`runs rollouts` shows a NaN or ±Infinity reward as `runs metrics` shows one, not as the
"-" of a sample that logged none (a trial: the index holds NaN as null, and JSON holds no
infinity, so the four read the same in the table and in -o json)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import runwatch
from tests.support.cli import cli_here, run_cli


def _rollouts(runs: Path) -> None:
    with runwatch.init(name="r", dir=runs) as run:
        run.log_samples(0, [
            {"prompt": "p0", "completion": "nan", "reward": math.nan,
             "reward_terms": {"a": math.inf, "b": 0.5}, "advantage": math.nan},
            {"prompt": "p1", "completion": "up", "reward": math.inf},
            {"prompt": "p2", "completion": "down", "reward": -math.inf,
             "reward_terms": {"a": -math.inf}},
            {"prompt": "p3", "completion": "none"},
            {"prompt": "p4", "completion": "fine", "reward": 0.25, "advantage": 0.1},
        ])


def test_non_finite_rewards_read_as_metrics_show_them(runs_dir: Path) -> None:
    _rollouts(runs_dir)
    table = run_cli("runs", "rollouts", "r", "--dir", str(runs_dir), "-o", "wide").stdout
    cells = {row.split("│")[2].strip(): [c.strip() for c in row.split("│")]
             for row in table.splitlines() if row.count("│") == 6}
    assert [cells[c][3] for c in ("nan", "up", "down", "none", "fine")] == [
        "NaN", "Inf", "-Inf", "-", "0.25"]
    assert cells["nan"][4] == "a=Inf, b=0.5" and cells["down"][4] == "a=-Inf"
    assert cells["nan"][5] == "NaN" and cells["none"][5] == "-"

    samples = json.loads(cli_here("runs", "rollouts", "r", "--dir", str(runs_dir),
                                  "-o", "json").stdout)["samples"]
    by_completion = {s["completion"]: s for s in samples}
    assert math.isnan(by_completion["nan"]["reward"])
    assert math.isnan(by_completion["nan"]["advantage"])
    assert by_completion["nan"]["reward_terms"] == {"a": math.inf, "b": 0.5}
    assert by_completion["up"]["reward"] == math.inf
    assert by_completion["down"]["reward"] == -math.inf
    assert by_completion["none"]["reward"] is None
    assert by_completion["fine"]["reward"] == 0.25
    # --jq gives null for every non-finite value, as for runs metrics
    rewards = cli_here("runs", "rollouts", "r", "--dir", str(runs_dir), "--jq",
                       "[.samples[].reward]").stdout
    assert json.loads(rewards) == [None, None, None, None, 0.25]

