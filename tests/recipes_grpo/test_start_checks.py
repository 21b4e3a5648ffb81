"""GRPO without init_from refuses to start (a random model earns the same reward on every
completion and learns nothing), from its command line and from `runwatch submit`, with
nothing made; init_from, base_model or from_scratch=true let it start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runwatch.jobs.settings import SettingsError, check_recipe_settings


def _runwatch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WANDB_MODE": "offline"}
    return subprocess.run([sys.executable, "-m", "runwatch", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)


def _names_the_fix(text: str) -> bool:
    return ("init_from is not set" in text and "runwatch recipes sft" in text
            and "init_from=runs/<sft-run>" in text and "from_scratch=true" in text)


def test_the_recipe_refuses_before_making_anything(tmp_path: Path) -> None:
    env = {**os.environ, "WANDB_MODE": "offline"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "runwatch", "recipes",
                           "grpo", "wandb_project=None"], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert _names_the_fix(proc.stderr), proc.stderr
    assert list(tmp_path.iterdir()) == []  # no runs folder, no run
    # and at once: refused before the recipe's modules import torch (seconds)
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")]
    assert "runwatch.recipes.grpo.config" in imported and "torch" not in imported


def test_submit_refuses_it_before_queueing(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    proc = _runwatch("submit", "recipes", "grpo", "wandb_project=None", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert _names_the_fix(proc.stderr), proc.stderr
    assert [p.name for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")] == []


@pytest.mark.parametrize("start", ["init_from=runs/sft-1", "base_model=/models/small",
                                   "from_scratch=true"])
def test_a_start_named_passes_the_check(start: str) -> None:
    check_recipe_settings("grpo", [start], {}, "see --help")


def test_the_settings_check_names_init_from() -> None:
    with pytest.raises(SettingsError) as refused:
        check_recipe_settings("grpo", ["group_size=4"], {}, "see --help")
    assert refused.value.field == "settings.init_from" and _names_the_fix(str(refused.value))
