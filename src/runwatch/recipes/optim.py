"""Optimizer, learning-rate schedule and the per-step update metrics every recipe logs.

`grad_norm` is measured before clipping; `grad_clip_factor` is max_grad_norm / grad_norm
when clipping happened, else 1; `adapter_norm` is the norm of the trained weights
after the step; `update_ratio` is ||update|| / ||trained weights before the step||.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import nn


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def build_optimizer(
    params: Iterable[nn.Parameter], learning_rate: float, weight_decay: float
) -> torch.optim.AdamW:
    # beta2 0.99 rather than 0.999: short runs need the second moment to warm up fast.
    return torch.optim.AdamW(
        list(params), lr=learning_rate, betas=(0.9, 0.99), weight_decay=weight_decay
    )


def linear_lr(step: int, max_steps: int, base_lr: float, warmup_steps: int) -> float:
    """Linear warmup to `base_lr`, then linear decay to zero at `max_steps` (1-based step)."""
    if warmup_steps > 0 and step <= warmup_steps:
        return base_lr * step / warmup_steps
    remaining = max(0, max_steps - step + 1)
    span = max(1, max_steps - warmup_steps)
    return base_lr * min(1.0, remaining / span)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def global_norm(tensors: Iterable[torch.Tensor]) -> float:
    total = 0.0
    for t in tensors:
        total += float(t.detach().float().pow(2).sum())
    return math.sqrt(total)


def clip_gradients(params: list[nn.Parameter], max_grad_norm: float) -> tuple[float, float]:
    """Scale gradients to at most `max_grad_norm`; return (norm before, factor used).

    A non-finite norm leaves the gradients alone (factor 1): the loss already shows the
    NaN, and scaling by NaN would only hide which step produced it.
    """
    grads = [p.grad for p in params if p.grad is not None]
    norm = global_norm(grads)
    factor = 1.0
    if max_grad_norm > 0 and math.isfinite(norm) and norm > max_grad_norm:
        factor = max_grad_norm / norm
        torch._foreach_mul_(grads, factor)
    return norm, factor


class UpdateMeter:
    """Measures how far one optimizer step moved the trained weights."""

    def __init__(self, params: list[nn.Parameter]) -> None:
        self.params = params
        self._before: list[torch.Tensor] = []

    def before_step(self) -> None:
        self._before = [p.detach().clone() for p in self.params]

    def after_step(self) -> dict[str, float]:
        norm_before = global_norm(self._before)
        update = global_norm(p.detach() - b for p, b in zip(self.params, self._before, strict=True))
        norm_after = global_norm(self.params)
        # A zero-initialised adapter (LoRA's B) has no norm yet: report the ratio as 0
        # rather than infinity, since nothing existed to be changed relative to.
        ratio = update / norm_before if norm_before > 0 else 0.0
        self._before = []
        return {"adapter_norm": norm_after, "update_ratio": ratio}


def apply_update(
    optimizer: torch.optim.Optimizer,
    params: list[nn.Parameter],
    max_grad_norm: float,
    meter: UpdateMeter,
) -> dict[str, float]:
    """Clip, step and measure: grad_norm, grad_clip_factor, adapter_norm, update_ratio."""
    grad_norm, factor = clip_gradients(params, max_grad_norm)
    meter.before_step()
    optimizer.step()
    return {"grad_norm": grad_norm, "grad_clip_factor": factor, **meter.after_step()}
