"""Synchronous collection, with dynamic sampling when max_sampling_attempts > 1.

Dynamic sampling redraws batches until `batch_size` groups have varied rewards (or
the attempts run out), because a group whose completions all score the same has zero
advantage everywhere and teaches nothing.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import nn

from runwatch.recipes.config import ConfigError
from runwatch.recipes.grpo.config import GRPOConfig
from runwatch.recipes.grpo.rollout import Group
from runwatch.recipes.grpo.weights import GeneratorPolicy


class Env(Protocol):
    kind: str

    def rollout(self, model: nn.Module, questions: list[str], group_size: int,
                temperature: float, gen: torch.Generator | None,
                trace: list[int] | None = None, version: int = 0) -> list[Group]: ...


class PromptStream:
    """An endless, seeded stream of training prompts (one per group)."""

    def __init__(self, questions: list[str], seed: int) -> None:
        if not questions:
            raise ConfigError("the GRPO task has no training questions; raise n_train",
                              "n_train")
        self.questions = questions
        self.rng = random.Random(seed)

    def take(self, n: int) -> list[str]:
        return [self.rng.choice(self.questions) for _ in range(n)]


@dataclass
class StepBatch:
    """What one training step gets from collection."""

    kept: list[Group]                      # groups to train on
    scored: list[Group]                    # groups counted for skip ratios
    metrics: dict[str, float] = field(default_factory=dict)


class SyncSampler:
    """Samples with the generator after it applies the newest published weights."""

    def __init__(self, env: Env, generator: GeneratorPolicy, prompts: PromptStream,
                 cfg: GRPOConfig, seed: int) -> None:
        self.env, self.generator, self.prompts, self.cfg = env, generator, prompts, cfg
        self.gen = torch.Generator().manual_seed(seed)

    def next_batch(self, trainer_step: int) -> StepBatch:
        cfg = self.cfg
        t0 = time.perf_counter()
        version = self.generator.sync()
        kept: list[Group] = []
        scored: list[Group] = []
        attempts = 0
        while attempts < cfg.max_sampling_attempts and len(kept) < cfg.batch_size:
            attempts += 1
            groups = self.env.rollout(self.generator, self.prompts.take(cfg.batch_size),
                                      cfg.group_size, cfg.temperature, self.gen,
                                      trace=self.generator.trace, version=version)
            for g in groups:
                # Groups after the one that filled the batch are not counted: they are
                # the rest of the last attempt, never looked at.
                if len(kept) == cfg.batch_size:
                    break
                scored.append(g)
                if g.has_variance:
                    kept.append(g)
        metrics = {"timing/step_sample_s": time.perf_counter() - t0}
        if cfg.max_sampling_attempts > 1:
            metrics.update({
                "dynamic_sampling/attempts": float(attempts),
                "dynamic_sampling/total_groups_sampled": float(len(scored)),
                "dynamic_sampling/kept_groups": float(len(kept)),
            })
        return StepBatch(kept=kept, scored=scored, metrics=metrics)

    def applied_version(self) -> int:
        return self.generator.version

    def close(self) -> None:
        return None
