"""`val.collapsed`: a held-out accuracy that loses half its best at once (session 37: a
GRPO recipe run at 100 times its learning rate fell from 0.825 to 0 by its first
validation and stayed there for 11; `val.falling`'s Theil–Sen slope of 0.825, 0, 0, 0, 0, 0
is 0, and the run was told only that its validation had plateaued, "normal")."""

from __future__ import annotations

import pytest

from runwatch.health.against import AboveBest

from .helpers import evaluate, of_rule

STEPS = list(range(0, 48, 4))


def collapsed(values: list[float], key: str = "val/accuracy", method: str = "grpo") -> list[str]:
    found = evaluate(method, {}, {key: (STEPS[:len(values)], values)})
    return [f"{f.severity} {f.message}" for f in of_rule(found, "val.collapsed")]


@pytest.mark.parametrize(("key", "method"), [("val/accuracy", "grpo"), ("val/accuracy", "sft"),
                                             ("val/preference_accuracy", "dpo")])
def test_a_score_fallen_to_nothing_and_staying_there_is_a_warning(key: str, method: str) -> None:
    assert collapsed([0.825] + [0.0] * 11, key, method) == [
        f"warning {key} fell from its best 0.825 to 0 (down 100%; now 0)."]
    # two validations in a row are enough; one is not
    assert collapsed([0.825, 0.0, 0.0], key, method)
    assert collapsed([0.825, 0.0], key, method) == []


def test_near_misses() -> None:
    # a noisy score (a win rate over a few samples) swinging by a third
    assert collapsed([0.6, 0.4, 0.6, 0.35, 0.55, 0.5, 0.6, 0.4, 0.6, 0.5, 0.45, 0.6]) == []
    # fallen by less than half of its best
    assert collapsed([0.8, 0.45, 0.42, 0.5, 0.41, 0.44, 0.5, 0.46, 0.43, 0.45, 0.44, 0.5]) == []
    # by half, but by less than 0.2 of the pairs: a small score's noise
    assert collapsed([0.2, 0.05, 0.04, 0.03, 0.02, 0.03, 0.02, 0.03, 0.02, 0.03]) == []
    # fallen once, then back: two in a row are needed
    assert collapsed([0.8, 0.1, 0.7, 0.1, 0.75, 0.8]) == []


def test_it_resolves_when_the_score_comes_back() -> None:
    found = evaluate("grpo", {}, {"val/accuracy": (STEPS[:8], [0.8, 0.0, 0.0, 0.1, 0.7, 0.75,
                                                               0.8, 0.8])})
    (finding,) = of_rule(found, "val.collapsed")
    assert finding.status == "resolved"


def test_a_best_at_or_below_zero_is_no_best_to_fall_from() -> None:
    det = AboveBest(direction="down", min_rel=0.5, min_drop=0.2, k=2, single=0, min_points=2)
    assert det.feed([0.0, -0.5, -0.6, -0.7]) == [False] * 4
    assert det.feed([0.9, 0.1, 0.1]) == [False, False, True]
    assert det.rise == [0.9, 0.1]


def test_a_noisy_score_touching_its_best_once_between_falls_is_one_episode() -> None:
    # a win rate over five games: 0.6 at best, then falls it comes back from once at a time
    values = [0.6, 0.2, 0.2, 0.6, 0.0, 0.2, 0.6, 0.1, 0.2, 0.2, 0.4]
    found = evaluate("grpo", {}, {"val/accuracy": (STEPS[:len(values)], values)})
    (finding,) = of_rule(found, "val.collapsed")
    assert finding.status == "open" and finding.first_step == STEPS[2]
    # the fall at its deepest, and where the score stands now
    assert finding.message == "val/accuracy fell from its best 0.6 to 0 (down 100%; now 0.4)."


def test_a_point_0_2_below_its_best_is_not_back() -> None:
    # 0.6 - 0.4 is 0.19999999999999996 in floating point: still a fall, not a return
    values = [0.6, 0.2, 0.2, 0.4, 0.6, 0.0, 0.2]
    found = evaluate("grpo", {}, {"val/accuracy": (STEPS[:len(values)], values)})
    (finding,) = of_rule(found, "val.collapsed")
    assert finding.status == "open"
