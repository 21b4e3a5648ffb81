"""Session 21: an entropy that halves while the reward climbs is told by an info.

`grpo.entropy_collapse` warns when the entropy's trend falls steeply and it stands at half
its start or below. A GRPO policy that learns sharpens: its entropy often halves while its
reward climbs. While the reward has risen beyond its noise since the start, the finding is
an info (`Rule.learning`, as for `grpo.zero_variance`); `grpo.entropy_low` still warns once
the entropy is a quarter of its start, and `grpo.entropy_crash` at a tenth, whatever the
reward does.
"""

from __future__ import annotations

import math

from runwatch.health.findings import Finding

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
    """Each entropy rule's severity, at the end of the run."""
    return {f.rule_id: f.severity for f in found if f.rule_id in ENTROPY_RULES}


def test_an_entropy_at_a_third_of_its_start_warns_while_the_reward_is_flat() -> None:
    found = _worst(evaluate("grpo", {}, {"entropy": _entropy(0.3), "reward_mean": _reward(0.0)}))
    assert found == {"grpo.entropy_collapse": "warning"}


def test_an_entropy_at_a_third_of_its_start_is_an_info_while_the_reward_climbs() -> None:
    found = evaluate("grpo", {}, {"entropy": _entropy(0.3), "reward_mean": _reward(0.4)})
    assert _worst(found) == {"grpo.entropy_collapse": "info"}
    (f,) = [f for f in found if f.rule_id == "grpo.entropy_collapse"]
    assert f.message.endswith("reward_mean has risen beyond its noise since the start: the "
                              "run learns.")
    # with no reward logged, nothing says the run learns: a warning
    assert _worst(evaluate("grpo", {}, {"entropy": _entropy(0.3)})) == {
        "grpo.entropy_collapse": "warning"}


def test_an_entropy_at_a_sixth_of_its_start_warns_however_the_reward_climbs() -> None:
    found = _worst(evaluate("grpo", {}, {"entropy": _entropy(0.15), "reward_mean": _reward(0.4)}))
    assert found["grpo.entropy_low"] == "warning"
    assert found["grpo.entropy_collapse"] == "info"
