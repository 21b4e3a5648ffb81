"""The cookbook metrics of a GRPO step, computed from the groups it sampled and trained.

Sampling statistics (truncation, lengths, budgets, log-probabilities, penalties) cover
every completion the step drew; training statistics (accuracy, reward, advantages)
cover only the groups that trained, so skipped groups do not pull them toward zero.
"""

from __future__ import annotations

import statistics

from runwatch.recipes.grpo.rollout import Group, Sample


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _std(xs: list[float]) -> float:
    return statistics.pstdev(xs) if len(xs) > 1 else 0.0


def sampling_metrics(groups: list[Group], multi_turn: bool) -> dict[str, float]:
    """Statistics over every sample drawn this step (kept or skipped)."""
    samples = [s for g in groups for s in g.samples]
    if not samples:
        return {}
    gen_logps = [lp for s in samples for lp, m in zip(s.gen_logprobs, s.gen_mask, strict=True)
                 if m]
    out = {
        "truncated_ratio": _mean([float(s.truncated) for s in samples]),
        "mean_sampled_response_length": _mean([float(s.completion_tokens) for s in samples]),
        "overlong_penalized_ratio": _mean([float(s.overlong_penalty < 0) for s in samples]),
        "mean_overlong_penalty": _mean([s.overlong_penalty for s in samples]),
        "mean_logprob": _mean(gen_logps),
    }
    if multi_turn:
        out.update(episode_metrics(samples))
    else:
        out["mean_response_budget"] = _mean([float(s.budget) for s in samples])
    return out


def episode_metrics(samples: list[Sample], prefix: str = "") -> dict[str, float]:
    """Per-episode statistics of a multi-turn batch (or of validation, with `val/`)."""
    return {
        f"{prefix}num_turns_mean": _mean([float(s.extra["num_turns"]) for s in samples]),
        f"{prefix}terminated_ratio": _mean([float(s.extra["terminated"]) for s in samples]),
        f"{prefix}truncated_ratio": _mean([float(not s.extra["terminated"]) for s in samples]),
        f"{prefix}parse_failure_ratio": _mean([float(s.extra["parse_failure"]) for s in samples]),
        f"{prefix}context_overflow_ratio":
            _mean([float(s.extra["context_overflow"]) for s in samples]),
    }


def skip_metrics(groups: list[Group]) -> dict[str, float]:
    """How many of the scored groups were skipped for identical rewards."""
    if not groups:
        return {}
    n = len(groups)
    zero = [g for g in groups if not g.has_variance]
    return {
        "zero_variance_skip_ratio": len(zero) / n,
        "identical_nonzero_reward_skip_ratio": sum(1 for g in zero if g.all_succeeded) / n,
    }


def training_metrics(kept: list[Group], multi_turn: bool) -> dict[str, float]:
    """Statistics over the groups that trained; empty when none did."""
    samples = [s for g in kept for s in g.samples]
    if not samples:
        return {}
    rewards = [s.reward for s in samples]
    out = {
        "accuracy": _mean([s.correct for s in samples]),
        "reward_mean": _mean(rewards),
        "reward_std": _std(rewards),
        "completion_advantage_std": _std([s.advantage for s in samples]),
    }
    if not multi_turn:
        out["mean_trainable_response_length"] = _mean(
            [float(s.trainable_tokens) for s in samples])
        out["post_budget_clip_ratio"] = _mean([float(s.post_budget_clipped) for s in samples])
    return out


def drift_ratio(groups: list[Group]) -> float:
    """Fraction of generated tokens made by a policy other than the scheduled one."""
    total = sum(s.completion_tokens for g in groups for s in g.samples)
    drift = sum(s.drift_tokens for g in groups for s in g.samples)
    return drift / total if total else 0.0


def validation_metrics(samples: list[Sample], multi_turn: bool) -> dict[str, float]:
    """val/* metrics from one greedy sample per validation prompt."""
    if multi_turn:
        out = episode_metrics(samples, prefix="val/")
        out["val/reward_mean"] = _mean([s.reward for s in samples])
        return out
    # val/accuracy is always exact match: the unbiased number even when the training
    # reward is a flawed scorer.
    exact = [float(s.truncated is False and s.completion.strip() == s.extra["answer"])
             for s in samples]
    return {
        "val/accuracy": _mean(exact),
        "val/reward_mean": _mean([s.reward for s in samples]),
        "val/mean_response_length": _mean([float(s.completion_tokens) for s in samples]),
    }
