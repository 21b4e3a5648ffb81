"""`rl.no_progress` says what its reward did and what it judged on: a reward that fell
from 0.6 to 0 read "did not change over 44 logged points (0 to 0)", its two medians both
0 (session 38)."""

from __future__ import annotations

import math

from .helpers import evaluate, of_rule


def _message(series: list[float]) -> str:
    (found,) = of_rule(evaluate("grpo", {}, {"reward_mean": series}), "rl.no_progress")
    return found.message


def test_a_reward_that_fell_before_its_medians_says_it_fell() -> None:
    # 0.6 on its first 4 points, then 0: both 22-point medians are 0
    message = _message([0.6] * 4 + [0.0] * 40)
    assert "did not change" not in message, message
    assert message == (
        "reward_mean fell over 44 logged points (steps 0 to 43): it opened at 0.6, and the "
        "median of its latest 22 points is 0, no higher than 0 for its first 22.")


def test_a_fall_of_its_medians_is_said_with_both_medians_and_their_window() -> None:
    message = _message([0.6] * 15 + [0.0] * 25)
    assert message == (
        "reward_mean fell over 40 logged points (steps 0 to 39): the median of its latest "
        "20 points is 0, down from 0.6 for its first 20.")
    assert "within its noise" not in message


def test_a_reward_that_rose_too_little_says_so_within_its_noise() -> None:
    # a tiny rise under a swing of 0.2 per point
    message = _message([0.5 + 0.0005 * i + 0.2 * math.sin(1.7 * i) for i in range(60)])
    assert message.startswith("reward_mean rose only "), message
    assert "over 60 logged points (steps 0 to 59): the median of its latest 25 points is" \
        in message
    assert message.endswith("for its first 25, within its noise (sd 0.21 per point)."), message
