"""Scorers, the overlong penalty, group advantages and the multi-turn parse step."""

from __future__ import annotations

from runwatch.recipes.config import parse_argv
from runwatch.recipes.grpo.config import GRPOConfig
from runwatch.recipes.grpo.multiturn import hint, parse_guess
from runwatch.recipes.grpo.rollout import Group, Sample, assign_advantages, overlong_penalty, score


def _sample(reward: float) -> Sample:
    s = Sample(prompt="p", completion="c", ids=[1, 2], gen_mask=[0, 1], gen_logprobs=[0, -1],
               prompt_tokens=1, completion_tokens=1, budget=4, truncated=False)
    s.raw_reward = reward
    return s


def test_scorers() -> None:
    assert score("052", "052", "exact") == 1.0
    assert score("0520", "052", "exact") == 0.0
    # The flawed scorer pays for noise: a long string of digits covers the answer.
    assert score("0123456789", "052", "digit_overlap") == 1.0
    assert score("anything", "052", "format") == 1.0 and score("", "052", "format") == 0.0


def test_overlong_penalty_ramps_over_the_buffer() -> None:
    cfg = parse_argv(GRPOConfig, ["overlong_penalty_factor=1.0", "overlong_buffer_tokens=2"])
    assert overlong_penalty(2, 4, cfg) == 0.0
    assert overlong_penalty(3, 4, cfg) == -0.5
    assert overlong_penalty(4, 4, cfg) == -1.0
    off = parse_argv(GRPOConfig, [])
    assert overlong_penalty(4, 4, off) == 0.0


def test_advantages_are_normalised_per_group() -> None:
    group = Group(samples=[_sample(r) for r in (1.0, 0.0, 0.0, 1.0)])
    assign_advantages(group)
    advs = [s.advantage for s in group.samples]
    assert abs(sum(advs)) < 1e-9 and abs(advs[0] - 1.0) < 1e-5
    flat = Group(samples=[_sample(1.0) for _ in range(3)])
    assign_advantages(flat)
    assert not flat.has_variance and flat.all_succeeded
    assert all(s.advantage == 0 for s in flat.samples)


def test_guess_parsing_and_hints() -> None:
    assert parse_guess(" 7 ", 16) == 7
    assert parse_guess("seven", 16) is None
    assert parse_guess("17", 16) is None and parse_guess("0", 16) is None
    assert hint(3, 9) == "higher" and hint(12, 9) == "lower"
