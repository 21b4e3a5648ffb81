"""Weight publishing between the trainer and the generator's copy of the policy.

The trainer publishes a snapshot after optimizer steps (`target_weights_version`); the
generator applies the newest snapshot when it next can (`applied_weights_version`).
With in-flight updates it checks before every token, so a publish can land in the
middle of a rollout, as it does on a real inference fleet.
"""

from __future__ import annotations

import copy
import threading

import torch
from torch import nn

from runwatch.recipes.memory import tensors_nbytes


class WeightsChannel:
    """The latest published weights and their version; safe across threads."""

    def __init__(self, model: nn.Module, version: int = 0) -> None:
        self._lock = threading.Lock()
        self._version = version
        self._state = _snapshot(model)

    def publish(self, model: nn.Module, version: int) -> None:
        state = _snapshot(model)
        with self._lock:
            self._version, self._state = version, state

    @property
    def version(self) -> int:
        with self._lock:
            return self._version

    def nbytes(self) -> int:
        """Bytes the published snapshot holds."""
        with self._lock:
            return tensors_nbytes(self._state.values())

    def newer_than(self, version: int) -> tuple[int, dict[str, torch.Tensor]] | None:
        with self._lock:
            if self._version <= version:
                return None
            return self._version, self._state


def _snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    # Cloned, so later optimizer steps on the trainer cannot change a published version.
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


class GeneratorPolicy(nn.Module):
    """The generator's own copy of the policy, which records the version of every forward.

    `trace` receives the weights version used for each generated token position, so a
    rollout can count the tokens made by a policy other than the one it was scheduled on.
    """

    def __init__(self, policy: nn.Module, channel: WeightsChannel, in_flight: bool) -> None:
        super().__init__()
        self.model = copy.deepcopy(policy)
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.channel = channel
        self.version = channel.version
        self.in_flight = in_flight
        self.trace: list[int] = []

    def sync(self) -> int:
        """Apply the newest published weights, if any; returns the version now served."""
        newer = self.channel.newer_than(self.version)
        if newer is not None:
            version, state = newer
            self.model.load_state_dict(state)
            self.version = version
        return self.version

    def forward(self, ids_BT: torch.Tensor,
                attention_mask_BT: torch.Tensor | None = None) -> torch.Tensor:
        if self.in_flight:
            self.sync()
        self.trace.append(self.version)
        out: torch.Tensor = self.model(ids_BT, attention_mask_BT)
        return out
