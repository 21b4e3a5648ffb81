"""A run whose latest loss or reward is NaN or infinite says so: `runwatch runs get` shows
"NaN" (its `-o json` keeps the token), and the API sends the result present as `null`, its
convention for every non-finite value, where a metric the run does not log is left out.
Before, the latest value went through a finiteness filter: the CLI hid the line and read
a diverged run as healthy, and the JSON said null as for a metric never logged."""

from __future__ import annotations

import json
import math
from pathlib import Path

from runwatch.server.runner import Runner, free_port
from runwatch.store import open_engine
from tests.support import cli_here, sdk_run
from tests.support.http import get


def diverged(runs: Path, name: str = "s") -> str:
    """An SFT run whose loss is NaN from step 45 and whose reward ends at +Infinity."""
    return sdk_run(runs, name, steps=50, method="sft", metrics=lambda i: {
        "loss": 1.0 - i * 0.01 if i < 45 else math.nan,
        "reward": math.inf if i == 49 else 0.1 * i})


def test_runs_get_shows_a_latest_loss_that_went_nan(runs_dir: Path) -> None:
    diverged(runs_dir)
    text = cli_here("runs", "get", "s", "--dir", str(runs_dir)).stdout
    assert "Train loss: NaN" in text
    assert "Reward mean: Inf" in text
    assert "Best train loss: 0.56" in text
    detail = json.loads(cli_here("runs", "get", "s", "--dir", str(runs_dir), "-o", "json").stdout)
    assert math.isnan(detail["results"]["train_loss"])
    assert detail["results"]["reward_mean"] == math.inf
    assert "val_loss" not in detail["results"]  # not logged: left out
    assert math.isnan(detail["scalars"]["latest_train_loss"])
    assert detail["scalars"]["mean_reward"] == math.inf
    assert detail["scalars"]["eval_loss"] is None


def test_the_api_sends_a_non_finite_latest_value_as_null_and_present(runs_dir: Path) -> None:
    run_id = diverged(runs_dir)
    engine = open_engine(runs_dir / ".runwatch" / "index.db")
    try:
        with Runner(engine, runs_dir=runs_dir, port=free_port(), warm=False) as srv:
            detail = get(f"{srv.url}/api/runs/{run_id}").json()
    finally:
        engine.dispose()
    results = detail["results"]
    assert "train_loss" in results and results["train_loss"] is None
    assert "reward_mean" in results and results["reward_mean"] is None
    assert "val_loss" not in results
    assert results["best_train_loss"] == 0.56
    # the tiles name which of their nulls were logged non-finite
    tiles = detail["scalars"]
    assert tiles["latest_train_loss"] is None and tiles["mean_reward"] is None
    assert sorted(tiles["non_finite"]) == ["latest_train_loss", "mean_reward"]
    assert tiles["eval_loss"] is None  # never logged


def test_runs_get_over_a_server_shows_nan_as_from_the_folder(runs_dir: Path) -> None:
    """`runs get --server` reads the API's nulls back as the values they were (it showed
    no train loss at all for a run that diverged)."""
    diverged(runs_dir)
    engine = open_engine(runs_dir / ".runwatch" / "index.db")
    try:
        with Runner(engine, runs_dir=runs_dir, port=free_port(), warm=False) as srv:
            text = cli_here("runs", "get", "s", "--server", srv.url).stdout
            detail = json.loads(cli_here("runs", "get", "s", "--server", srv.url,
                                         "-o", "json").stdout)
    finally:
        engine.dispose()
    assert "Train loss: NaN" in text and "Best train loss: 0.56" in text
    assert math.isnan(detail["results"]["train_loss"])
    assert math.isnan(detail["scalars"]["latest_train_loss"])
    assert math.isnan(detail["scalars"]["mean_reward"])  # an infinity is non-finite too
    assert detail["scalars"]["eval_loss"] is None
    assert "val_loss" not in detail["results"]
