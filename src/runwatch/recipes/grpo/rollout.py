"""Sampling groups of single-turn completions and scoring them into rewards and advantages.

A `Sample` is one completion (or, in multi-turn, one episode) as token ids with the
mask of tokens the policy generated and the generator's log-probabilities of them, so
the trainer can form importance ratios without re-running the generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from runwatch.recipes.chat import render_prompt
from runwatch.recipes.grpo.config import GRPOConfig
from runwatch.recipes.inference import generate
from runwatch.recipes.tasks import Task, conversation
from runwatch.recipes.tokenizer import ChatTokenizer

ADV_EPS = 1e-6


@dataclass
class Sample:
    """One completion or episode, ready to train on once its group has an advantage."""

    prompt: str
    completion: str
    ids: list[int]
    gen_mask: list[int]          # 1 where the policy generated the token (trained)
    gen_logprobs: list[float]    # generator log-prob where gen_mask is 1, else 0.0
    prompt_tokens: int
    completion_tokens: int       # tokens the policy generated (all turns)
    budget: int                  # tokens the completion was allowed (first turn)
    truncated: bool
    raw_reward: float = 0.0
    overlong_penalty: float = 0.0
    correct: float = 0.0         # the dataset's metric (the scorer's own success)
    advantage: float = 0.0
    post_budget_clipped: bool = False
    drift_tokens: int = 0        # tokens made by a policy other than the scheduled one
    extra: dict[str, Any] = field(default_factory=dict)  # multi-turn episode facts

    @property
    def reward(self) -> float:
        return self.raw_reward + self.overlong_penalty

    @property
    def trainable_tokens(self) -> int:
        return sum(self.gen_mask)


@dataclass
class Group:
    """Samples that share one prompt; their rewards are compared with each other."""

    samples: list[Sample]
    version: int = 0             # weights version the group was scheduled against
    index: int = 0

    @property
    def rewards(self) -> list[float]:
        return [s.reward for s in self.samples]

    @property
    def has_variance(self) -> bool:
        r = self.rewards
        return max(r) - min(r) > 1e-9

    @property
    def all_succeeded(self) -> bool:
        return all(s.raw_reward > 0 for s in self.samples) and not self.has_variance


def score(completion: str, answer: str, reward: str) -> float:
    """The raw reward of a completion under the configured scorer.

    `digit_overlap` is flawed on purpose: it credits every answer character that shows
    up anywhere, so longer, noisier completions score higher (the hacking pathology).
    """
    text = completion.strip()
    if reward == "exact":
        return 1.0 if text == answer else 0.0
    if reward == "format":
        # Too lenient on purpose: any answer at all passes (the too-easy pathology).
        return 1.0 if text else 0.0
    wanted = set(answer)
    return len(wanted & set(text)) / len(wanted)


def overlong_penalty(length: int, budget: int, cfg: GRPOConfig) -> float:
    """A soft penalty that ramps to -overlong_penalty_factor over the budget's last tokens."""
    if cfg.overlong_penalty_factor <= 0:
        return 0.0
    buffer = max(1, min(cfg.overlong_buffer_tokens, budget))
    over = length - (budget - buffer)
    if over <= 0:
        return 0.0
    return -cfg.overlong_penalty_factor * min(1.0, over / buffer)


def assign_advantages(group: Group) -> None:
    """Group-normalised advantages: (reward - group mean) / group std."""
    rewards_G = torch.tensor(group.rewards, dtype=torch.float64)
    std = float(rewards_G.std(unbiased=False))
    adv_G = (rewards_G - rewards_G.mean()) / (std + ADV_EPS) if std > 0 else rewards_G * 0
    for s, a in zip(group.samples, adv_G.tolist(), strict=True):
        s.advantage = float(a)


class SingleTurnEnv:
    """Prompts from a task; one completion per sample, scored against the right answer."""

    kind = "completions"

    def __init__(self, task: Task, tok: ChatTokenizer, cfg: GRPOConfig) -> None:
        self.task, self.tok, self.cfg = task, tok, cfg

    def rollout(self, model: nn.Module, questions: list[str], group_size: int,
                temperature: float, gen: torch.Generator | None,
                trace: list[int] | None = None, version: int = 0) -> list[Group]:
        """One group of `group_size` completions per question (greedy if temperature 0)."""
        cfg, tok = self.cfg, self.tok
        prompts = [render_prompt(tok, conversation(self.task, q)) for q in questions]
        budgets = [max(1, min(cfg.max_sample_tokens, cfg.max_model_length - len(p)))
                   for p in prompts]
        flat = [p for p in prompts for _ in range(group_size)]
        if trace is not None:
            trace.clear()
        # One generate call per batch: the shortest budget is applied to all prompts in
        # it only when budgets differ, so group prompts by budget to keep each exact.
        outs: list[Any] = [None] * len(flat)
        for budget in sorted(set(budgets)):
            rows = [i for i in range(len(flat)) if budgets[i // group_size] == budget]
            res = generate(model, [flat[i] for i in rows], budget, temperature,
                           tok.end_id, tok.pad_id, generator=gen)
            versions = list(trace) if trace is not None else []
            for i, g in zip(rows, res, strict=True):
                drift = sum(1 for v in versions[: len(g.tokens)] if v != version)
                outs[i] = (g, budget, drift)
            if trace is not None:
                trace.clear()
        groups: list[Group] = []
        for qi, q in enumerate(questions):
            answer = self.task.answer(q)
            samples = []
            for gi in range(group_size):
                g, budget, drift = outs[qi * group_size + gi]
                samples.append(self._sample(q, answer, prompts[qi], g.tokens, g.logprobs,
                                            g.finished, budget, drift))
            groups.append(Group(samples=samples, version=version, index=qi))
        return groups

    def _sample(self, question: str, answer: str, prompt: list[int], tokens: list[int],
                logprobs: list[float], finished: bool, budget: int, drift: int) -> Sample:
        cfg, tok = self.cfg, self.tok
        # The trainer sees at most max_model_length tokens; anything past it is cut
        # before training (post_budget_clip_ratio) rather than silently overflowing.
        room = max(0, cfg.max_model_length - len(prompt))
        kept = tokens[:room]
        text = tok.decode(tokens)
        s = Sample(
            prompt=question, completion=text,
            ids=prompt + kept, gen_mask=[0] * len(prompt) + [1] * len(kept),
            gen_logprobs=[0.0] * len(prompt) + logprobs[: len(kept)],
            prompt_tokens=len(prompt), completion_tokens=len(tokens), budget=budget,
            truncated=not finished, post_budget_clipped=len(kept) < len(tokens),
            drift_tokens=drift,
        )
        # An answer must end to count, except under the flawed digit_overlap scorer,
        # which forgets to check and so rewards rambling to the budget.
        scored = finished or cfg.reward == "digit_overlap"
        s.raw_reward = score(text, answer, cfg.reward) if scored else 0.0
        s.correct = s.raw_reward
        s.overlong_penalty = overlong_penalty(len(tokens), budget, cfg)
        s.extra["answer"] = answer
        return s


def sample_record(s: Sample, group: int) -> dict[str, Any]:
    """The exported form of one sample (step_NNNN_*.json / val_NNNN_*.json)."""
    rec: dict[str, Any] = {
        "prompt": s.prompt, "completion": s.completion, "reward": s.reward,
        "reward_terms": {"raw": s.raw_reward, "overlong_penalty": s.overlong_penalty},
        "advantage": s.advantage, "group": group, "truncated": s.truncated,
        "prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens,
        "trainable_tokens": s.trainable_tokens,
    }
    rec.update({k: v for k, v in s.extra.items() if not isinstance(v, float) or math.isfinite(v)})
    return rec
