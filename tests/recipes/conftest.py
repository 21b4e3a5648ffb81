"""Shared pieces of the recipe tests: a tiny model config and run-directory readers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

# Small enough that a training step takes milliseconds on one core.
TINY = ["n_layer=1", "n_head=2", "d_model=32", "max_seq_length=32", "batch_size=8",
        "n_train=64", "n_val=8", "wandb_project=None"]


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def events(run_dir: Path) -> list[dict[str, Any]]:
    return read_jsonl(run_dir / "events.jsonl")


def final_event(run_dir: Path) -> dict[str, Any]:
    return events(run_dir)[-1]


def metrics(run_dir: Path) -> list[dict[str, Any]]:
    return read_jsonl(run_dir / "metrics.jsonl")


def logs(run_dir: Path) -> list[dict[str, Any]]:
    return read_jsonl(run_dir / "logs.jsonl")


def common(tmp: Path, name: str) -> list[str]:
    return [*TINY, f"runs_dir={tmp / 'runs'}", f"name={name}", f"cache_dir={tmp / 'cache'}"]
