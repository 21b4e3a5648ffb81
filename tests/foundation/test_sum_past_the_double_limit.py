"""A key whose finite values overflow their sum both ways (values near ±1.8e308) is indexed:
its summary's running sum was NaN, stored as NULL in a NOT NULL column, so the pass failed
and the run was never indexed (found in a durability audit). The sum is held finite."""

from __future__ import annotations

import json
from pathlib import Path

import runwatch
from runwatch.store.summaries import SUMMARY_MIN_POINTS
from tests.support import cli_here

BIG = 1.79e308


def test_a_series_near_both_double_limits_is_indexed(runs_dir: Path) -> None:
    with runwatch.init(name="extreme", dir=runs_dir) as run:
        for step in range(4 * SUMMARY_MIN_POINTS):  # enough to be summarised
            # a sum that overflows up, then down: inf + -inf was NaN
            run.log({"loss": BIG if step < 2 * SUMMARY_MIN_POINTS else -BIG,
                     "grad_norm": 1.0}, step=step)
    indexed = cli_here("index", str(runs_dir), check=False)
    assert indexed.returncode == 0, indexed.stderr
    shown = json.loads(cli_here("runs", "get", "extreme", "--dir", str(runs_dir), "-o",
                                "json").stdout)
    assert shown["state"]["phase"] == "SUCCEEDED"
    assert shown["state"]["observed_step"] == 4 * SUMMARY_MIN_POINTS - 1
    metrics = json.loads(cli_here("runs", "metrics", "extreme", "--dir", str(runs_dir),
                                  "--key", "loss", "-o", "json").stdout)
    assert len(metrics["steps"]) == 4 * SUMMARY_MIN_POINTS
