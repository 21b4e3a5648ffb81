"""Shared pieces of the GRPO tests: one thread for torch, the SFT checkpoint GRPO starts
from, and GRPO run in-process with small settings.

The checkpoint is the session's one SFT run (tests/conftest.py `sft_checkpoint`): the real
SFT recipe trained just long enough to answer in the right format and be right part of
the time, which is what GRPO needs to have something to compare within a group.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from runwatch.recipes.config import parse_argv
from runwatch.recipes.grpo.config import GRPOConfig
from runwatch.recipes.grpo.loop import run_grpo
from runwatch.recipes.grpo.pathologies import expand
from tests.support import SORT_TASK, TINY_MODEL

# The GRPO tests' names for the shared tiny model and the task its checkpoint learned.
TINY, TASK = TINY_MODEL, SORT_TASK


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def sft_run(sft_checkpoint: Path) -> Path:
    return sft_checkpoint


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
