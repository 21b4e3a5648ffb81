"""Session 21: an entropy that halves while the reward climbs still warns.

`grpo.entropy_collapse` warns when the entropy's trend falls steeply and it stands at half
its start or below. A GRPO policy that learns sharpens, so session 21 tried making the
finding an info while the reward rises (`Rule.learning`, as `grpo.zero_variance` has it).
On train that took the only warning from four runs of one project labelled
`entropy_collapse` (one as its main label, three beside `reward_hacking`: the reward climbs
because a proxy is gamed), so the rule warns whatever the reward does. These pin that
choice, and the rules that judge lower entropies.
"""

from __future__ import annotations

import math

from runwatch.health.findings import Finding
from runwatch.health.rules.base import SEVERITY_RANK

from .helpers import evaluate

ENTROPY_RULES = {"grpo.entropy_collapse", "grpo.entropy_low", "grpo.entropy_crash",
                 "grpo.entropy_near_zero"}


def _entropy(floor: float, n: int = 64) -> list[float]:
    """An entropy that falls from 1.0 towards `floor` of it, steeply at first."""
    return [floor + (1.0 - floor) * math.exp(-i / 12) for i in range(n)]


def _reward(rise: float, n: int = 64) -> list[float]:
    """A reward that climbs by `rise` over the run, with a wobble of ±0.05 a step."""
    return [0.2 + rise * i / (n - 1) + 0.05 * math.sin(1.7 * i) for i in range(n)]


def _worst(found: list[Finding]) -> dict[str, str]:
    """Each entropy rule's highest severity over its findings."""
    worst: dict[str, str] = {}
    for f in found:
        if f.rule_id in ENTROPY_RULES and SEVERITY_RANK[f.severity] >= SEVERITY_RANK[
                worst.get(f.rule_id, "info")]:
            worst[f.rule_id] = f.severity
    return worst


def test_an_entropy_at_a_third_of_its_start_warns_whatever_the_reward_does() -> None:
    for reward in (_reward(0.0), _reward(0.4)):
        found = _worst(evaluate("grpo", {}, {"entropy": _entropy(0.3), "reward_mean": reward}))
        assert found == {"grpo.entropy_collapse": "warning"}
    assert _worst(evaluate("grpo", {}, {"entropy": _entropy(0.3)})) == {
        "grpo.entropy_collapse": "warning"}


def test_an_entropy_falling_to_two_thirds_of_its_start_is_no_collapse() -> None:
    # near miss: the same fall, stopping at two thirds of the start
    assert _worst(evaluate("grpo", {}, {"entropy": _entropy(0.67),
                                         "reward_mean": _reward(0.4)})) == {}


def test_an_entropy_at_a_sixth_of_its_start_is_also_low() -> None:
    found = _worst(evaluate("grpo", {}, {"entropy": _entropy(0.15), "reward_mean": _reward(0.4)}))
    assert found == {"grpo.entropy_collapse": "warning", "grpo.entropy_low": "warning"}
