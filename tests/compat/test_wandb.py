"""`import runwatch.compat.wandb as wandb`: a script written for W&B (it runs under the
real wandb, offline, too) records a runwatch run with its import swapped; real
subprocesses, the run read back through the index (the CLI, run in this process: the
shim is tested here, tests/foundation run the commands)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support import cli_here

WANDB_SCRIPT = """
    import sys
    import wandb

    run = wandb.init(project="compat test", name="sweep arm/a", group="arms",
                     tags=["tiny"], config={"lr": 0.01, "layers": 2})
    wandb.config.update({"batch_size": 8})
    wandb.config.warmup = 3
    wandb.define_metric("val/*", step_metric="step")
    for step in range(5):
        wandb.log({"loss": 1.0 / (step + 1)}, commit=False)
        wandb.log({"lr": wandb.config.lr, "val": {"loss": 2.0 - step / 10}, "step": step})
    table = wandb.Table(columns=["prompt", "completion", "reward"],
                        data=[["2+2=", "4", 1.0], ["3+3=", "7", 0.0]])
    table.add_data("1+1=", "2", 1.0)
    run.log({"samples": table, "reward_mean": 2 / 3}, step=7)
    run.summary["best_loss"] = 0.2
    print("RUN", run.id, run.name)
    {ending}
"""


def script(tmp_path: Path, module: str, ending: str = "wandb.finish()") -> Path:
    text = textwrap.dedent(WANDB_SCRIPT).replace("{ending}", ending)
    if module != "wandb":
        text = text.replace("import wandb\n", f"import {module} as wandb\n")
    path = tmp_path / f"train_{module.replace('.', '_')}.py"
    path.write_text(text)
    return path


def run_script(path: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(cwd),
           "WANDB_CONFIG_DIR": str(cwd / "wandb-config"), "WANDB_SILENT": "true"}
    env.pop("RUNWATCH_DIR", None)
    return subprocess.run([sys.executable, str(path), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def read(cwd: Path, *args: str) -> Any:
    return json.loads(cli_here("runs", *args, "--dir", str(cwd / "runs"), "-o", "json").stdout)


def test_the_script_is_a_wandb_script(tmp_path: Path) -> None:
    pytest.importorskip("wandb")
    proc = run_script(script(tmp_path, "wandb"), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list((tmp_path / "wandb").glob("offline-run-*"))


def test_a_wandb_script_records_a_runwatch_run_with_the_import_swapped(tmp_path: Path) -> None:
    proc = run_script(script(tmp_path, "runwatch.compat.wandb"), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id, name = proc.stdout.split()[1:3]
    assert name == "sweep-arm-a"  # made safe as a folder name
    # W&B's idiom of a "step" metric (define_metric's step_metric): a runwatch record's own
    # field, said once and not recorded, where it overwrote the record's step
    assert proc.stderr.count("'step': a runwatch record's own field") == 1, proc.stderr

    got = read(tmp_path, "get", name)
    assert got["run_id"] == run_id and got["run"]["status"] == "SUCCEEDED"
    assert (got["run"]["project"], got["run"]["group"], got["run"]["tags"]) == (
        "compat-test", "arms", ["tiny"])
    assert got["settings"]["config"] == {"lr": 0.01, "layers": 2, "batch_size": 8,
                                         "warmup": 3}
    assert got["manifest"]["summary"] == {"best_loss": 0.2}

    steps = {s["step"]: s["measured"] for s in read(tmp_path, "metrics", name)["steps"]}
    # commit=False joins the next log's row: each step holds loss, lr and val/loss.
    assert sorted(steps) == [0, 1, 2, 3, 4, 7]
    assert steps[2] == {"loss": pytest.approx(1 / 3), "lr": 0.01,
                        "val/loss": pytest.approx(1.8)}
    assert steps[7] == {"reward_mean": pytest.approx(2 / 3)}

    rollouts = read(tmp_path, "rollouts", name, "--step", "7")
    assert [(r["prompt"], r["completion"], r["reward"]) for r in rollouts["samples"]] == [
        ("2+2=", "4", 1.0), ("3+3=", "7", 0.0), ("1+1=", "2", 1.0)]


def test_a_script_that_ends_without_finish_succeeds(tmp_path: Path) -> None:
    proc = run_script(script(tmp_path, "runwatch.compat.wandb", ending="pass"), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = read(tmp_path, "get", "sweep-arm-a")
    assert got["run"]["status"] == "SUCCEEDED" and got["run"]["observed_step"] == 7


def test_a_script_that_raises_fails_the_run_with_the_exception(tmp_path: Path) -> None:
    ending = 'raise ValueError("reward model returned NaN")'
    proc = run_script(script(tmp_path, "runwatch.compat.wandb", ending=ending), tmp_path)
    assert proc.returncode == 1 and "NaN" in proc.stderr
    got = read(tmp_path, "get", "sweep-arm-a")
    assert got["run"]["status"] == "FAILED"
    # The row still open when it raised was written.
    assert got["run"]["observed_step"] == 7
    logs = read(tmp_path, "logs", "sweep-arm-a")
    assert any("reward model returned NaN" in line["message"] for line in logs)
