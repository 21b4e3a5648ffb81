"""Peak-memory breakdown of a training step, measured on CPU without a device allocator.

How each part is measured (CPU has no allocator statistics like CUDA's):
- weights, adapter, gradients, optimizer state: the byte size of those tensors;
- generation (reinforcement recipes): the byte size of what the generator holds besides
  the trainer's weights (its own copy of the policy, the published snapshot);
- activations: the tensors autograd saved for the backward pass during the forward
  pass (counted with `saved_tensors_hooks`, each storage once); they are all alive at
  the end of the forward pass, which is the step's peak;
- process_peak_rss: the process's peak resident memory from getrusage, which also
  holds the Python interpreter, libraries and the dataset.
The step reported is the one whose parts add up to the most.
"""

from __future__ import annotations

import contextlib
import resource
import sys
from collections.abc import Callable, Iterable, Iterator

import torch
from torch import nn

from runwatch.recipes.adapter import is_adapter_param

HOW_MEASURED = (
    "CPU: tensor byte sizes for weights, adapter, gradients, optimizer state and (GRPO) "
    "generation, the generator's copy of the weights; "
    "activations are the tensors autograd saved for backward (saved_tensors_hooks, each "
    "storage once), all alive at the end of the forward pass; process_peak_rss is "
    "getrusage's peak resident memory of the whole process"
)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def tensors_nbytes(tensors: Iterable[torch.Tensor]) -> int:
    """The byte size of `tensors` together."""
    return sum(_nbytes(t) for t in tensors)


def process_peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports kilobytes, macOS bytes.
    return int(peak if sys.platform == "darwin" else peak * 1024)


class MemoryMeter:
    """Tracks the step with the largest memory footprint and its breakdown."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                 extra_weights: nn.Module | None = None,
                 generation: Callable[[], int] | None = None) -> None:
        self.model = model
        self.optimizer = optimizer
        self.extra_weights = extra_weights
        # Bytes the generator holds now; None: the recipe does not generate while training.
        self.generation = generation
        self._activations = 0
        self._seen: set[tuple[int, int]] = set()
        self.peak: dict[str, int] = {}
        self.peak_step = 0

    @contextlib.contextmanager
    def track_activations(self) -> Iterator[None]:
        """Count what autograd saves for backward inside this block (one forward pass)."""
        self._activations = 0
        self._seen = set()

        def pack(t: torch.Tensor) -> torch.Tensor:
            try:
                key = (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
            except RuntimeError:
                # Some tensors (e.g. sparse or wrapper subclasses) have no plain storage.
                key = (id(t), _nbytes(t))
            if key not in self._seen:
                self._seen.add(key)
                self._activations += key[1]
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            yield

    def breakdown(self) -> dict[str, int]:
        """Bytes held right now, with the activations of the last tracked forward pass."""
        weights = adapter = grads = 0
        for name, p in self.model.named_parameters():
            if is_adapter_param(name):
                adapter += _nbytes(p)
            else:
                weights += _nbytes(p)
            if p.grad is not None:
                grads += _nbytes(p.grad)
        if self.extra_weights is not None:
            weights += tensors_nbytes(self.extra_weights.parameters())
        opt_state = sum(
            _nbytes(v)
            for state in self.optimizer.state.values()
            for v in state.values()
            if isinstance(v, torch.Tensor)
        )
        parts = {
            "weights": weights,
            "adapter": adapter,
            "gradients": grads,
            "optimizer_state": opt_state,
            "activations": self._activations,
        }
        if self.generation is not None:
            parts["generation"] = self.generation()
        parts["total"] = sum(parts.values())
        return parts

    def observe(self, step: int) -> dict[str, float] | None:
        """Call after the optimizer step; returns `memory/*_bytes` metrics on a new peak."""
        parts = self.breakdown()
        if self.peak and parts["total"] <= self.peak["total"]:
            return None
        self.peak, self.peak_step = parts, step
        metrics = {f"memory/{k}_bytes": float(v) for k, v in parts.items()}
        metrics["memory/process_peak_rss_bytes"] = float(process_peak_rss_bytes())
        return metrics

    def report(self) -> dict[str, object]:
        return {"step": self.peak_step, "bytes": dict(self.peak),
                "process_peak_rss_bytes": process_peak_rss_bytes(), "how_measured": HOW_MEASURED}
