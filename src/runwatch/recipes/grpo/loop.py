"""GRPO recipe: sample groups, score them, update the policy, record everything.

    python -m runwatch.recipes.grpo init_from=runs/<sft-run> key=value ...
                                                   (or `runwatch recipes grpo`)

Each step validates greedily when due (every val_interval steps, before the first
update and at the end), collects a batch of groups (sync, dynamic or async), trains on
it in num_minibatches updates, publishes weights to the generator and logs one line of
metrics. pathology=NAME applies a preset that breaks the run on purpose.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable

import torch
from torch import nn

from runwatch.recipes.build import build_policy
from runwatch.recipes.config import ConfigError
from runwatch.recipes.grpo import metrics as M
from runwatch.recipes.grpo.async_collect import AsyncCollector
from runwatch.recipes.grpo.config import GRPOConfig
from runwatch.recipes.grpo.loss import grpo_loss, make_batch
from runwatch.recipes.grpo.multiturn import GuessNumberEnv
from runwatch.recipes.grpo.rollout import (
    Group,
    Sample,
    SingleTurnEnv,
    assign_advantages,
    sample_record,
)
from runwatch.recipes.grpo.sampling import Env, PromptStream, SyncSampler
from runwatch.recipes.grpo.weights import GeneratorPolicy, WeightsChannel
from runwatch.recipes.memory import MemoryMeter, tensors_nbytes
from runwatch.recipes.optim import (
    UpdateMeter,
    apply_update,
    build_optimizer,
    linear_lr,
    set_lr,
    trainable_parameters,
)
from runwatch.recipes.runtime import (
    Recorder,
    log_engine_config,
    recipe_main,
    report_peak_memory,
    run_recipe,
)
from runwatch.recipes.steps import Shown, StepContext, StepResult
from runwatch.recipes.tasks import make_task, sft_rows
from runwatch.recipes.tokenizer import ChatTokenizer


def make_env(cfg: GRPOConfig, tok: ChatTokenizer) -> tuple[Env, list[str], list[str]]:
    """The environment and its train and validation prompts.

    Task questions are disjoint between the two; guess_number secrets are few (1 to
    guess_max), so there validation measures the policy, not unseen inputs.
    """
    seed = cfg.seed
    if cfg.env == "guess_number":
        env = GuessNumberEnv(tok, cfg)
        return env, env.secrets(cfg.n_train, seed), env.secrets(cfg.n_val, seed + 1)
    task = make_task(cfg.task, cfg.digits)
    train, val = sft_rows(task, cfg.n_train, cfg.n_val, seed)
    # The question is the user turn of each SFT row: with the SFT run's seed, GRPO
    # trains and validates on exactly the SFT run's split.
    return (SingleTurnEnv(task, tok, cfg), [r["messages"][1]["content"] for r in train],
            [r["messages"][1]["content"] for r in val])


def validate(env: Env, model: nn.Module, questions: list[str], cfg: GRPOConfig,
             ) -> tuple[dict[str, float], list[Sample]]:
    """Greedy: one completion (or episode) per validation prompt."""
    groups = env.rollout(model, questions, 1, 0.0, None)
    samples = [g.samples[0] for g in groups]
    return M.validation_metrics(samples, cfg.env != "single_turn"), samples


def train_on(model: nn.Module, ref: nn.Module | None, kept: list[Group], cfg: GRPOConfig,
             optimizer: torch.optim.Optimizer, pad_id: int, memory: MemoryMeter, step: int,
             on_update: Callable[[], None]) -> tuple[list[dict[str, float]], dict[str, float]]:
    """`num_minibatches` updates over the kept groups; returns each update's metrics and
    the `memory/*` metrics when an update set a new peak (measured before the gradients
    are freed).

    The first update is on-policy (ratio 1 when the generator holds the trainer's
    weights); later ones see weights the batch was not sampled from.
    """
    samples = [s for g in kept for s in g.samples]
    n = min(cfg.num_minibatches, len(samples))
    params = trainable_parameters(model)
    meter = UpdateMeter(params)
    updates: list[dict[str, float]] = []
    peak: dict[str, float] = {}
    for i in range(n):
        with memory.track_activations():
            loss, fb = grpo_loss(model, make_batch(samples[i::n], pad_id),
                                 cfg.clip_low_threshold, cfg.clip_high_threshold, cfg.beta,
                                 ref, cfg.loss_aggregation)
        loss.backward()
        fb.update(apply_update(optimizer, params, cfg.max_grad_norm, meter))
        peak = memory.observe(step) or peak
        optimizer.zero_grad(set_to_none=True)
        updates.append(fb)
        on_update()
    return updates, peak


def learning_rate(cfg: GRPOConfig, step: int) -> float:
    if cfg.lr_schedule == "linear":
        return linear_lr(step + 1, cfg.max_steps, cfg.learning_rate, cfg.warmup_steps)
    warm = min(1.0, (step + 1) / cfg.warmup_steps) if cfg.warmup_steps > 0 else 1.0
    return cfg.learning_rate * warm


def _mean_of(updates: list[dict[str, float]]) -> dict[str, float]:
    return {k: sum(u[k] for u in updates) / len(updates) for k in updates[0]}


class Trainer:
    """Holds the policy, its generator copy, the collector and the weight versions."""

    def __init__(self, cfg: GRPOConfig, rec: Recorder) -> None:
        self.cfg = cfg
        rec.progress("loading model", None, None)
        self.policy = build_policy(cfg)
        self.tok = self.policy.tok
        if cfg.max_model_length > self.policy.max_seq_len:
            raise ConfigError(
                f"max_model_length={cfg.max_model_length} is longer than the model's "
                f"{self.policy.max_seq_len} tokens; set max_model_length="
                f"{self.policy.max_seq_len} or lower")
        rec.progress("building prompts", None, None)
        self.env, self.train_q, self.val_q = make_env(cfg, self.tok)
        model = self.policy.model
        self.ref = copy.deepcopy(model).requires_grad_(False) if cfg.beta > 0 else None
        self.optimizer = build_optimizer(trainable_parameters(model), cfg.learning_rate,
                                         cfg.weight_decay)
        self.channel = WeightsChannel(model, version=0)
        self.generator = GeneratorPolicy(model, self.channel, in_flight=cfg.is_async)
        self.trainer_step = 0
        self.multi = cfg.env != "single_turn"
        prompts = PromptStream(self.train_q, cfg.seed + 7)
        collector = AsyncCollector if cfg.is_async else SyncSampler
        self.sampler: SyncSampler | AsyncCollector = collector(
            self.env, self.generator, prompts, cfg, cfg.seed + 11)
        # The generator's copy of the policy and the published snapshot are the
        # generation phase's share of the step.
        self.memory = MemoryMeter(model, self.optimizer, extra_weights=self.ref,
                                  generation=lambda: tensors_nbytes(
                                      self.generator.parameters()) + self.channel.nbytes())

    @property
    def collection(self) -> str:
        """How batches are collected: async, dynamic (redrawn) or sync."""
        if self.cfg.is_async:
            return "async"
        return "dynamic" if self.cfg.max_sampling_attempts > 1 else "sync"

    def log_start(self, rec: Recorder) -> None:
        """The engine configuration and the prompts, before the first step."""
        cfg = self.cfg
        log_engine_config(rec, cfg, self.policy, self.optimizer, ENGINE_SETTINGS, {
            "max_model_length": cfg.max_model_length, "collection": self.collection,
            "reference_model": self.ref is not None, "samples": self.env.kind})
        rec.text("info", f"{len(self.train_q)} train and {len(self.val_q)} validation prompts "
                         f"({cfg.env}, {cfg.task}); {self.collection} collection of "
                         f"{cfg.batch_size} groups of {cfg.group_size} per step",
                 {"train_prompts": len(self.train_q), "val_prompts": len(self.val_q),
                  "collection": self.collection})

    def after_update(self) -> None:
        self.trainer_step += 1
        if self.trainer_step % self.cfg.weights_sync_interval == 0:
            self.channel.publish(self.policy.model, self.trainer_step)

    def validation(self, step: int, rec: Recorder) -> dict[str, float]:
        line, samples = validate(self.env, self.policy.model, self.val_q, self.cfg)
        if self.cfg.export_samples:
            rec.run.log_samples(step, [sample_record(s, i) for i, s in enumerate(samples)],
                                "val", self.env.kind)
        return line

    def train_step(self, step: int, rec: Recorder) -> dict[str, float]:
        cfg = self.cfg
        lr = learning_rate(cfg, step)
        set_lr(self.optimizer, lr)
        batch = self.sampler.next_batch(self.trainer_step)
        for g in batch.kept:
            assign_advantages(g)
        line = dict(batch.metrics)
        line.update(M.sampling_metrics(batch.scored, self.multi))
        line.update(M.skip_metrics(batch.scored))
        line.update(M.training_metrics(batch.kept, self.multi))
        if cfg.is_async:
            line["async/mid_rollout_drift_ratio"] = M.drift_ratio(batch.scored)
        t0 = time.perf_counter()
        if batch.kept:
            updates, peak = train_on(self.policy.model, self.ref, batch.kept, cfg,
                                     self.optimizer, self.tok.pad_id, self.memory, step,
                                     self.after_update)
            line.update(_mean_of(updates))
            line.update(peak)
        line["timing/step_train_s"] = time.perf_counter() - t0
        line["learning_rate"] = lr
        line["policy/trainer_step"] = float(self.trainer_step)
        line["policy/target_weights_version"] = float(self.channel.version)
        line["policy/applied_weights_version"] = float(self.sampler.applied_version())
        if cfg.export_samples:
            rec.run.log_samples(step, [sample_record(s, g.index) for g in batch.scored
                                       for s in g.samples], "train", self.env.kind)
        bad = sorted(k for k, v in line.items() if not math.isfinite(v))
        if bad:
            raise FloatingPointError(f"step {step} produced non-finite {', '.join(bad)}; "
                                     "lower learning_rate")
        return line


# The GRPO settings the engine configuration lists besides the ones every recipe has.
ENGINE_SETTINGS = ("max_model_length", "group_size", "temperature", "max_sample_tokens",
                   "max_sampling_attempts", "num_minibatches", "clip_low_threshold",
                   "clip_high_threshold", "beta", "loss_aggregation", "max_steps_off_policy",
                   "groups_in_flight", "weights_sync_interval")


# The progress line after a validation: greedy accuracy (or reward, multi-turn) and
# the step's training reward (absent on the last step, which only validates).
SHOWN = (Shown("val", 3, ("val/accuracy", "val/reward_mean")), Shown("reward_mean", 3))


def train(cfg: GRPOConfig, rec: Recorder) -> None:
    """Each step: validate the policy before its update when due, train, end the step."""
    trainer = Trainer(cfg, rec)
    trainer.log_start(rec)
    steps = StepContext(rec, cfg, trainer.policy, trainer.optimizer,
                        (lambda at: trainer.validation(at, rec)) if trainer.val_q else None,
                        SHOWN, val_timing_key="timing/step_val_s")
    rec.run.set_phase("RUNNING")
    try:
        for step in range(cfg.max_steps + 1):
            t0 = time.perf_counter()
            line = steps.validation(step)
            trained = step < cfg.max_steps
            if trained:
                line.update(trainer.train_step(step, rec))
            steps.end(StepResult(step, t0, line, trained))
        report_peak_memory(rec, trainer.memory)
    finally:
        trainer.sampler.close()


def run_grpo(cfg: GRPOConfig) -> int:
    """Run GRPO as configured, recording it; returns the process exit code."""
    return run_recipe(cfg, "grpo", lambda rec: train(cfg, rec))


def main(argv: list[str] | None = None) -> int:
    return recipe_main(GRPOConfig, "grpo", __doc__, argv, train)
