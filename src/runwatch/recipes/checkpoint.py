"""Training and inference checkpoints: tensors and plain values only, never pickled objects.

A training checkpoint holds what resume needs (trained weights, optimizer state, step,
RNG); an inference checkpoint holds the whole model with any adapter merged, plus what
rebuilds it (the tiny model's shape, or the Hugging Face directory it started from).
Both are loaded with `torch.load(..., weights_only=True)`. A recipe saves them through
`for_run(run)`, which for a run that records nothing (a NullRun) saves nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from runwatch.recipes.adapter import adapter_state_dict, is_adapter_param, merged_state_dict
from runwatch.recipes.chat import SetupError
from runwatch.rundir import format as fmt
from runwatch.sdk import NullRun, Run

CHECKPOINT_DIR = fmt.CHECKPOINT_DIR


def _save(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(payload, tmp)
    # Rename last, so a crash mid-save never leaves a checkpoint that looks whole.
    os.replace(tmp, path)


def load(path: str | Path) -> dict[str, Any]:
    data = torch.load(Path(path), map_location="cpu", weights_only=True)
    if not isinstance(data, dict):
        raise SetupError(f"{path} is not a runwatch recipe checkpoint")
    return data


def source(path: str | Path) -> dict[str, Any]:
    """What rebuilds the model of inference checkpoint `path` (its "source"), read without
    loading its weights into memory."""
    data = torch.load(Path(path), map_location="cpu", weights_only=True, mmap=True)
    if not isinstance(data, dict) or not isinstance(data.get("source"), dict):
        raise SetupError(f"{path} is not a runwatch inference checkpoint")
    return dict(data["source"])


def has_adapter(model: nn.Module) -> bool:
    return any(is_adapter_param(n) for n, _ in model.named_parameters())


def save_training(
    run_dir: Path, step: int, model: nn.Module, optimizer: torch.optim.Optimizer
) -> Path:
    """Everything resume needs; with an adapter, only the adapter's weights."""
    weights = adapter_state_dict(model) if has_adapter(model) else model.state_dict()
    path = run_dir / CHECKPOINT_DIR / f"step-{step:06d}-training.pt"
    _save(path, {
        "format": "runwatch-training-v1",
        "step": step,
        "model": weights,
        "optimizer": optimizer.state_dict(),
        "torch_rng": torch.get_rng_state(),
    })
    return path


def restore_training(
    path: Path, model: nn.Module, optimizer: torch.optim.Optimizer
) -> int:
    """Load a training checkpoint into `model` and `optimizer`; return its step."""
    data = load(path)
    missing, unexpected = model.load_state_dict(data["model"], strict=False)
    if unexpected or (missing and not has_adapter(model)):
        raise SetupError(
            f"checkpoint {path} does not match the model: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}; resume with the config that wrote it"
        )
    optimizer.load_state_dict(data["optimizer"])
    torch.set_rng_state(data["torch_rng"])
    return int(data["step"])


def save_inference(
    run_dir: Path, step: int, model: nn.Module, source: dict[str, Any]
) -> Path:
    """The merged model and `source`: {"kind": "tiny", "model_config": {...}} or
    {"kind": "hf", "base_model": path}."""
    path = run_dir / CHECKPOINT_DIR / f"step-{step:06d}-inference.pt"
    _save(path, {"format": "runwatch-inference-v1", "step": step,
                 "model": merged_state_dict(model), "source": source})
    return path


def checkpoint_records(run_dir: Path) -> list[dict[str, Any]]:
    """Whole lines of a run's checkpoints.jsonl (a torn last line is skipped)."""
    path = run_dir / "checkpoints.jsonl"
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def latest(run_dir: Path, kind: str) -> Path | None:
    """File of the run's last checkpoint of `kind` ("training" or "inference")."""
    for rec in reversed(checkpoint_records(run_dir)):
        if rec.get("kind") == kind and rec.get("path"):
            p = Path(rec["path"])
            return p if p.is_absolute() else run_dir / p
    return None


def resolve_inference(path_or_run: str | Path) -> Path:
    """An inference checkpoint file, given the file or the run directory that logged it."""
    p = Path(path_or_run).expanduser()
    if p.is_dir():
        found = latest(p, "inference")
        if found is None:
            raise SetupError(
                f"{p} records no inference checkpoint in checkpoints.jsonl; point init_from "
                "at a finished SFT run directory or a step-*-inference.pt file"
            )
        return found
    if not p.exists():
        raise SetupError(f"init_from {p} does not exist; give a run directory or a .pt file")
    return p


class RunCheckpoints:
    """A recorded run's checkpoints: files under its directory, lines in checkpoints.jsonl."""

    def __init__(self, run: Run | NullRun, run_dir: Path) -> None:
        self.run = run
        self.dir = run_dir
        self.where = str(run_dir)

    def save(self, step: int, model: nn.Module, optimizer: torch.optim.Optimizer,
             source: dict[str, Any]) -> None:
        """Save and record a training checkpoint (for resume) and an inference one (merged)."""
        train_path = save_training(self.dir, step, model, optimizer)
        self.run.log_checkpoint(step, kind="training", id=f"ckpt-{step:06d}",
                                path=str(train_path.relative_to(self.dir)))
        infer_path = save_inference(self.dir, step, model, source)
        self.run.log_checkpoint(step, kind="inference", id=f"model-{step:06d}",
                                path=str(infer_path.relative_to(self.dir)))

    def latest_training(self) -> Path | None:
        return latest(self.dir, "training")


class NoCheckpoints:
    """The checkpoints of a run that records nothing: none saved, none to resume from."""

    where = "this process's run, which records nothing (a non-zero RANK),"

    def save(self, step: int, model: nn.Module, optimizer: torch.optim.Optimizer,
             source: dict[str, Any]) -> None:
        return None

    def latest_training(self) -> Path | None:
        return None


def for_run(run: Run | NullRun) -> RunCheckpoints | NoCheckpoints:
    """Where `run`'s checkpoints go: its directory, or nowhere when it is a NullRun."""
    return NoCheckpoints() if run.dir is None else RunCheckpoints(run, run.dir)
