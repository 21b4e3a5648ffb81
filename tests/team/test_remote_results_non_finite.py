"""`runwatch runs get --server` reads a run's results as a local index shows them: the
API sends a NaN or infinite value as null, as one not known, and its results name the
non-finite ones (`results.non_finite`, as `scalars.non_finite` names the tiles'); the
client read every null result but two hand-listed names as NaN (session 38)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from runwatch.cli.main import app
from runwatch.sdk import init
from runwatch.server.runner import Runner, free_port
from tests.support.wait import wait_for


@pytest.fixture
def url(engine: Engine, runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for var in ("RUNWATCH_SERVER", "RUNWATCH_TOKEN", "RUNWATCH_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    # a train loss NaN at every step (no best: a result that is null, not NaN), a
    # validation loss that ended NaN, a reward that ended +Infinity, an accuracy finite
    run = init(name="diverged", dir=runs_dir, method="grpo")
    for step in range(4):
        run.log({"loss": math.nan, "val/loss": 1.0 if step < 3 else math.nan,
                 "reward": 0.5 if step < 3 else math.inf, "accuracy": 0.25}, step=step)
    run.finish("FAILED")
    with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05, prewarm=False,
                warm=False) as srv:
        wait_for(lambda: httpx.get(f"{srv.url}/api/runs/diverged").status_code == 200,
                 what="the run indexed")
        yield srv.url


def test_the_api_names_the_results_it_sends_null_for_being_non_finite(url: str) -> None:
    results = httpx.get(f"{url}/api/runs/diverged").json()["results"]
    assert results["train_loss"] is None and results["val_loss"] is None
    assert results["reward_mean"] is None and results["accuracy"] == 0.25
    assert results["best_train_loss"] is None and results["registered_model"] is None
    assert sorted(results["non_finite"]) == ["reward_mean", "train_loss", "val_loss"]


def test_runs_get_server_reads_non_finite_results_as_nan_and_null_ones_as_absent(
        url: str, runs_dir: Path) -> None:
    def get(*where: str) -> dict[str, object]:
        res = CliRunner().invoke(app, ["runs", "get", "diverged", *where, "-o", "json"])
        assert res.exit_code == 0, res.output
        results: dict[str, object] = json.loads(res.stdout)["results"]
        return results

    remote, local = get("--server", url), get("--dir", str(runs_dir))
    for results in (remote, local):
        assert all(math.isnan(results[name])  # type: ignore[arg-type]
                   for name in ("train_loss", "val_loss"))
        # the API's null keeps no sign: an infinity reads back as NaN over HTTP
        assert not math.isfinite(results["reward_mean"])  # type: ignore[arg-type]
        assert results["accuracy"] == 0.25
        assert results["best_train_loss"] is None and results["registered_model"] is None
    assert remote.keys() == local.keys()
    assert remote["non_finite"] == local["non_finite"]


def test_runs_get_s_results_table_lists_results_not_the_list_naming_them(
        url: str, runs_dir: Path) -> None:
    for where in (["--server", url], ["--dir", str(runs_dir)]):
        res = CliRunner().invoke(app, ["runs", "get", "diverged", *where],
                                 env={"COLUMNS": "120"})
        assert res.exit_code == 0, res.output
        assert "Train loss" in res.stdout and "nan" in res.stdout.lower(), res.stdout
        assert "Non finite" not in res.stdout, res.stdout
