"""Shared fixtures: one thread for torch, and a small SFT checkpoint GRPO starts from.

The checkpoint comes from the real SFT recipe (Recipes I), trained just long enough
to answer in the right format and be right part of the time, which is what GRPO needs
to have something to compare within a group.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from runwatch.recipes import sft
from runwatch.recipes.config import parse_argv
from runwatch.recipes.grpo.config import GRPOConfig
from runwatch.recipes.grpo.loop import run_grpo
from runwatch.recipes.grpo.pathologies import expand

# A model small enough that a GRPO step takes a fraction of a second on one core.
TINY = ["n_layer=2", "n_head=2", "d_model=64", "max_seq_length=48"]
# Sorting 4 digits: this model learns it to roughly half right in a few seconds.
TASK = ["task=sort", "digits=4"]


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def sft_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)
    runs = tmp_path_factory.mktemp("sft")
    code = sft.main([*TINY, *TASK, f"runs_dir={runs}", "name=sft", "max_steps=80",
                     "batch_size=32",
                     "learning_rate=3e-3", "warmup_steps=10", "n_train=2000", "n_val=64",
                     "val_interval=150", "checkpoint_interval=150", "export_samples=false",
                     "cache_dir=None", "wandb_project=None"])
    assert code == 0
    return runs / "sft"


def grpo(tmp: Path, *settings: str, init: Path | None = None) -> list[dict[str, Any]]:
    """Run GRPO in-process with small defaults and return its metrics lines."""
    base = [f"runs_dir={tmp}", "name=grpo", "wandb_project=None", "export_samples=false",
            "n_train=2000", "n_val=32", "batch_size=4", "group_size=6", "max_steps=6",
            "validation_interval=3", "max_sample_tokens=6", "checkpoint_interval=1000", *TASK]
    if init is not None:
        base.append(f"init_from={init}")
    else:
        base += TINY
    # The small test defaults come first, then a pathology preset, then the test's own
    # settings: a preset must win over the defaults it exists to change.
    cfg = parse_argv(GRPOConfig, [*base, *expand(list(settings))])
    assert run_grpo(cfg) == 0
    return read_metrics(tmp / "grpo")


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def series(lines: list[dict[str, Any]], key: str) -> list[float]:
    return [line[key] for line in lines if key in line]
