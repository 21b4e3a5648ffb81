"""Shared pieces of the recipe tests: the tiny model with a tiny data set, and
run-directory readers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.support import TINY_MODEL

# The shared tiny model on a data set small enough that a run is mostly start-up.
TINY = [*TINY_MODEL, "batch_size=8", "n_train=64", "n_val=8", "wandb_project=None"]


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
