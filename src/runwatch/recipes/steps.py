"""The end of a training step, the same for SFT, DPO and GRPO.

A recipe builds one `StepContext` before its loop. Each step takes the timed
validation when one is due (`validation`, placed where the recipe validates: after
SFT's and DPO's update, before GRPO's), then hands its metrics to `end` as a
`StepResult`, which echoes the progress line after a validation (and writes it to the
run's logs), logs the step and saves checkpoints when due.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from runwatch.recipes.build import Policy
from runwatch.recipes.config import TrainConfig
from runwatch.recipes.runtime import Recorder


@dataclass(frozen=True)
class Shown:
    """One column of the progress line, `label value`: the first of `keys` (default the
    label) that the step logged; a column whose keys are all missing is left out."""

    label: str
    decimals: int
    keys: tuple[str, ...] = ()

    def text(self, metrics: dict[str, Any]) -> str | None:
        key = next((k for k in self.keys or (self.label,) if k in metrics), None)
        return None if key is None else f"{self.label} {metrics[key]:.{self.decimals}f}"


@dataclass(frozen=True)
class StepResult:
    """What one step produced: its number, when it started (perf_counter) and its metrics."""

    step: int
    started: float
    metrics: dict[str, Any]
    # False for GRPO's last step, which only validates: it has no step_total_s.
    trained: bool = True


@dataclass(frozen=True)
class StepContext:
    """What ends every step of one run the same way; built once, before the loop."""

    rec: Recorder
    cfg: TrainConfig
    policy: Policy
    optimizer: torch.optim.Optimizer
    validate: Callable[[int], dict[str, Any]] | None  # None: no validation rows
    shown: tuple[Shown, ...]
    val_timing_key: str = "timing/val_s"

    def validation_due(self, step: int) -> bool:
        cfg = self.cfg
        return self.validate is not None and (
            step % cfg.val_interval == 0 or step == cfg.max_steps)

    def validation(self, step: int) -> dict[str, Any]:
        """The validation metrics and their wall time when `step` is due for one, else {}."""
        if self.validate is None or not self.validation_due(step):
            return {}
        t = time.perf_counter()
        metrics = dict(self.validate(step))
        metrics[self.val_timing_key] = time.perf_counter() - t
        return metrics

    def end(self, result: StepResult) -> None:
        """Echo (and log) the progress line after a validation, log the step, checkpoint
        when due."""
        cfg, step, metrics = self.cfg, result.step, result.metrics
        if result.trained:
            metrics["timing/step_total_s"] = time.perf_counter() - result.started
        if self.validation_due(step):
            columns = (c.text(metrics) for c in self.shown)
            self.rec.text("info", " ".join([f"step {step}/{cfg.max_steps}",
                                             *filter(None, columns)]))
        self.rec.log(metrics, step)
        if step > 0 and (step % cfg.checkpoint_interval == 0 or step == cfg.max_steps):
            self.rec.checkpoints.save(step, self.policy.model, self.optimizer,
                                      self.policy.source)
