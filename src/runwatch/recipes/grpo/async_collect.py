"""Async off-policy collection: a background thread keeps groups coming while the trainer steps.

The collector samples with its own copy of the policy, which lags the trainer: it
picks up published weights between tokens, and finished groups wait in a bounded
queue (`groups_in_flight`). The trainer drops any group older than
`max_steps_off_policy` optimizer steps, so `async/staleness_max` never exceeds it.
"""

from __future__ import annotations

import queue
import threading
import time

import torch

from runwatch.recipes.grpo.config import GRPOConfig
from runwatch.recipes.grpo.rollout import Group
from runwatch.recipes.grpo.sampling import Env, PromptStream, StepBatch
from runwatch.recipes.grpo.weights import GeneratorPolicy


class CollectorError(RuntimeError):
    """The background collector stopped with an error; the message carries its cause."""


class AsyncCollector:
    """Runs rollouts on a thread; `next_batch` accepts fresh groups and drops stale ones."""

    def __init__(self, env: Env, generator: GeneratorPolicy, prompts: PromptStream,
                 cfg: GRPOConfig, seed: int) -> None:
        assert cfg.max_steps_off_policy is not None
        self.env, self.generator, self.prompts, self.cfg = env, generator, prompts, cfg
        self.max_stale = cfg.max_steps_off_policy
        self.gen = torch.Generator().manual_seed(seed)
        self.queue: queue.Queue[Group] = queue.Queue(maxsize=cfg.groups_in_flight)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="grpo-collector", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                version = self.generator.sync()
                group = self.env.rollout(self.generator, self.prompts.take(1),
                                         self.cfg.group_size, self.cfg.temperature, self.gen,
                                         trace=self.generator.trace, version=version)[0]
                while not self.stop.is_set():
                    try:
                        self.queue.put(group, timeout=0.1)
                        break
                    except queue.Full:
                        continue
        except BaseException as exc:
            self.error = exc

    def _get(self) -> Group:
        while True:
            if self.error is not None:
                raise CollectorError(f"the rollout collector failed: {self.error}") \
                    from self.error
            try:
                return self.queue.get(timeout=0.1)
            except queue.Empty:
                continue

    def next_batch(self, trainer_step: int) -> StepBatch:
        cfg = self.cfg
        t0 = time.perf_counter()
        depth = self.queue.qsize()
        kept: list[Group] = []
        scored: list[Group] = []
        staleness: list[int] = []
        dropped_stale = dropped_zero = 0
        wait_s = 0.0
        zero_cap = cfg.batch_size * cfg.max_sampling_attempts
        while len(kept) < cfg.batch_size and dropped_zero < zero_cap:
            w0 = time.perf_counter()
            group = self._get()
            wait_s += time.perf_counter() - w0
            age = trainer_step - group.version
            if age > self.max_stale:
                dropped_stale += 1
                continue
            scored.append(group)
            if not group.has_variance:
                dropped_zero += 1
                continue
            kept.append(group)
            staleness.append(age)
        metrics = {
            "async/accepted_groups": float(len(kept)),
            "async/staleness_mean": sum(staleness) / len(staleness) if staleness else 0.0,
            "async/staleness_max": float(max(staleness, default=0)),
            "async/dropped_stale_groups": float(dropped_stale),
            "async/dropped_zero_variance_groups": float(dropped_zero),
            "async/queue_depth": float(depth),
            "async/train_wait_s": wait_s,
            "timing/step_sample_s": time.perf_counter() - t0,
        }
        return StepBatch(kept=kept, scored=scored, metrics=metrics)

    def applied_version(self) -> int:
        return self.generator.version

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
