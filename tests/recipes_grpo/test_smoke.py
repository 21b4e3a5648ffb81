"""The recipe as a user runs it, two steps of each mode, a finished run record: one mode
as a subprocess (`python -m runwatch.recipes.grpo`), the others through the same `main`
in-process (a process spends seconds importing torch; the modes differ inside the loop)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from runwatch.recipes.grpo.loop import main

from .conftest import TINY

MODES = {
    "single_turn": [],
    "dynamic_sampling": ["max_sampling_attempts=3", "lora_rank=4"],
    "async": ["max_steps_off_policy=1", "groups_in_flight=4"],
    "multi_turn": ["env=guess_number", "max_turns=3", "guess_max=9", "max_sample_tokens=3"],
}
SUBPROCESS_MODE = "single_turn"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", WANDB_MODE="offline")
    env.pop("WANDB_API_KEY", None)
    return env


@pytest.mark.parametrize("mode", sorted(MODES))
def test_two_steps_of_each_mode(tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    args = [*TINY, f"runs_dir={tmp_path}", f"name={mode}", "wandb_project=None",
            "from_scratch=true", "max_steps=2", "batch_size=2", "group_size=3", "n_train=200",
            "n_val=4", "val_interval=1", "max_sample_tokens=4", "export_samples=true",
            *MODES[mode]]
    if mode == SUBPROCESS_MODE:
        proc = subprocess.run([sys.executable, "-m", "runwatch.recipes.grpo", *args],
                              capture_output=True, text=True, env=_env(), timeout=300)
        code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    else:
        monkeypatch.setenv("WANDB_MODE", "offline")  # torch has one thread (conftest)
        monkeypatch.delenv("WANDB_API_KEY", raising=False)
        code = main(args)
        stdout, stderr = capsys.readouterr()
    assert code == 0, stderr[-2000:]
    # The progress line after each validation: greedy score, then the step's reward.
    shown = [line for line in stdout.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in shown] == ["0/2", "1/2", "2/2"]
    for line in shown:
        assert re.fullmatch(r"step \d/2 val \d\.\d{3}( reward_mean -?\d+\.\d{3})?", line), line
    run = tmp_path / mode
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    assert events[-1]["phase"] == "SUCCEEDED"
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 1, 2]
    assert any(run.glob("step_0001_*.json")) and any(run.glob("val_0002_*.json"))
    kinds = [json.loads(x)["kind"] for x in (run / "checkpoints.jsonl").read_text().splitlines()]
    assert "inference" in kinds


def test_missing_wandb_key_fails_before_making_a_run_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    code = main([f"runs_dir={tmp_path}", "name=wb", "init_from=/nonexistent/checkpoint"])
    stderr = capsys.readouterr().err
    assert code == 1
    assert "WANDB_API_KEY" in stderr
    # The bad init_from was never reached: W&B is checked before the model loads.
    assert "nonexistent" not in stderr
    # Nor was a run made: no FAILED folder is left whose name a later run's prefix (the
    # one the user starts after setting the key) would collide with.
    assert list(tmp_path.iterdir()) == []

