"""Session 16 (E17), on the train split: a trigger series and a near miss for each change
to the RL rules.

- An entropy that falls back towards where it started, after rising from a low first
  few steps, has not collapsed: `grpo.entropy_collapse` (and `grpo.entropy_falling`) ask
  the entropy to stand at half (three quarters) of its start as well as to fall over
  their window (grpo_cs336_taoger_offpolicy_gspo_seed1_steady and _seed2_learns,
  healthy: 0.03 at step 1, 0.3-0.4 by step 10, 0.09-0.1 from step 100 while the reward
  rises; grpo_cs336_taoger_onpolicy_standard_seed1_entropy_fall, entropy_collapse:
  0.8-1.0 over steps 1-10, 0.11 at the end).
- An entropy logged as exactly 0 is no measurement (grpo_cs336_taoger_debug_all_zero_reward:
  0.0 at each of its 14 steps, where no sequence was kept to measure it on).
- `gradient_norm` is the gradient norm (the same debug run: 0.0 at every step, so
  grpo.no_gradient finds its groups that all score alike).
- A gradient norm of exactly 0 beside groups most of which differ is no zero-variance
  finding (grpo_self_directed_25prompts, rl_no_progress: grad_norm 0.0 at all 50 steps
  while frac_reward_zero_std is 0-0.5): `grpo.no_gradient` leaves such steps out.
- `NoProgress` with `moved` and `noise_z` holds only beyond its noise (asked by E16 for a
  supervised rule; no rule sets both yet).
"""

from __future__ import annotations

import math

from runwatch.health import progress as pg
from runwatch.metrics.aliases import health_name

from .helpers import evaluate, rule_ids

ENTROPY_RULES = {"grpo.entropy_collapse", "grpo.entropy_falling", "grpo.entropy_low",
                 "grpo.entropy_crash", "grpo.entropy_near_zero"}


def _sharpening(first: list[float], n: int = 200) -> list[float]:
    """An entropy that starts with `first`, stands at 0.35 by step 10 and decays to 0.09
    by step 100, holding there, with a wobble of about 15% a step."""
    out = list(first)
    for i in range(len(first), n):
        level = 0.09 + 0.26 * math.exp(-max(0, i - 10) / 25)
        out.append(level * (1 + 0.15 * math.sin(1.7 * i)))
    return out


def _severity(found: list, rule_id: str) -> str | None:
    levels = [f.severity for f in found if f.rule_id == rule_id]
    return max(levels, key=["info", "warning", "critical"].index) if levels else None


def test_an_entropy_falling_back_towards_a_low_start_is_no_collapse() -> None:
    # Low at the first steps (0.03-0.15: few sequences kept to measure it on), 0.35 by
    # step 10, 0.09 from step 100: a quarter of its peak, above where it started. On the
    # engine before, grpo.entropy_collapse warned at the fall from the peak.
    found = evaluate("grpo", {}, {"entropy": _sharpening(
        [0.025, 0.15, 0.09, 0.07, 0.16, 0.35, 0.29, 0.28, 0.28, 0.4])})
    assert not rule_ids(found) & ENTROPY_RULES


def test_the_same_fall_from_a_high_start_is_a_collapse() -> None:
    # Near miss: the entropy starts at its peak (0.35) and ends at a quarter of it.
    found = evaluate("grpo", {}, {"entropy": _sharpening([0.35] * 10)})
    assert _severity(found, "grpo.entropy_collapse") == "warning"
    first = next(f for f in found if f.rule_id == "grpo.entropy_collapse")
    assert "it started at 0.35" in first.message


def test_an_entropy_that_falls_from_its_start_and_halves_again_is_a_collapse() -> None:
    # Start 0.9, down to 0.4 by step 30 (the fall from the start alone is not half), then
    # on to 0.1: the collapse is found once the entropy stands at half its start.
    values = [0.9 * (1 + 0.05 * math.sin(i)) for i in range(5)]
    values += [0.1 + 0.8 * math.exp(-i / 20) for i in range(5, 120)]
    found = evaluate("grpo", {}, {"entropy": values})
    first = next(f for f in found if f.rule_id == "grpo.entropy_collapse")
    assert first.severity == "warning" and first.first_step < first.last_step


def test_an_entropy_logged_as_exactly_zero_is_no_measurement() -> None:
    # 0.0 at every step (grpo_cs336_taoger_debug_all_zero_reward). On the engine before,
    # grpo.entropy_near_zero warned from the 8th step.
    assert not rule_ids(evaluate("grpo", {}, {"entropy": [0.0] * 14})) & ENTROPY_RULES


def test_an_entropy_near_zero_between_zeros_is_still_near_zero() -> None:
    # Near miss: measured values of 0.001-0.004 between steps that logged 0 (no sequence
    # kept): the policy measured is near-deterministic.
    values = [0.0 if i % 3 == 0 else 0.001 + 0.003 * abs(math.sin(i)) for i in range(30)]
    assert _severity(evaluate("grpo", {}, {"entropy": values}),
                     "grpo.entropy_near_zero") == "warning"


def test_gradient_norm_is_read_as_the_gradient_norm() -> None:
    assert health_name("gradient_norm") == ("grad_norm", None)
    # 0.0 at every step: no group had a spread, so nothing was learned. On the engine
    # before, the name was not read and nothing was found.
    found = evaluate("grpo", {}, {"gradient_norm": [0.0] * 14})
    assert _severity(found, "grpo.no_gradient") == "warning"


def test_a_gradient_norm_zero_on_two_steps_in_ten_is_no_finding() -> None:
    # Near miss: two steps of 0 (a step whose groups all scored alike now and then).
    values = [0.0 if i in (1, 6) else 1.0 + 0.2 * math.sin(i) for i in range(20)]
    assert "grpo.no_gradient" not in rule_ids(evaluate("grpo", {}, {"gradient_norm": values}))


def _moved(values: list[float], noise_z: float) -> list[bool]:
    det = pg.NoProgress(direction="up", min_change=0.2, warmup=4, bucket=4, moved=True,
                        noise_z=noise_z)
    return det.feed(list(range(len(values))), values)


def test_a_move_within_the_noise_does_not_hold_with_noise_z() -> None:
    # Medians of 4 that move 30% (1.0 -> 1.3) on a series that swings ±0.6 a point: the
    # move is within one standard error of the two medians' difference. Without
    # noise_z (and on the engine before, with it) the move holds.
    values = [1.0 + 0.6 * (1 if i % 2 else -1) for i in range(8)]
    values += [1.3 + 0.6 * (1 if i % 2 else -1) for i in range(8)]
    assert _moved(values, 0.0)[-1]
    assert not _moved(values, 2.0)[-1]


def test_a_move_beyond_the_noise_holds_with_noise_z() -> None:
    # Near miss: the same 30% move on a series that swings ±0.01 a point.
    values = [1.0 + 0.01 * (1 if i % 2 else -1) for i in range(8)]
    values += [1.3 + 0.01 * (1 if i % 2 else -1) for i in range(8)]
    assert _moved(values, 2.0)[-1]


def test_a_zero_gradient_beside_groups_that_differ_is_not_theirs() -> None:
    # grad_norm 0.0 at every step while 0-50% of the groups score alike: their
    # advantages were not 0 (frozen weights, or a logger blind to the gradient). On the
    # engine before, grpo.no_gradient warned from the 3rd step.
    shares = [0.125, 0.25, 0.0, 0.375, 0.125, 0.5, 0.25, 0.0, 0.125, 0.25] * 3
    found = evaluate("grpo", {}, {"grad_norm": [0.0] * 30, "zero_variance_skip_ratio": shares})
    assert "grpo.no_gradient" not in rule_ids(found)


def test_a_zero_gradient_where_the_groups_score_alike_is_theirs() -> None:
    # Near miss: the same zeros where every group (or nearly: a mean over the steps
    # since the last log) scored alike.
    shares = [1.0, 0.9, 1.0, 0.8, 1.0, 1.0, 0.7, 1.0, 0.9, 1.0] * 3
    found = evaluate("grpo", {}, {"grad_norm": [0.0] * 30, "zero_variance_skip_ratio": shares})
    assert _severity(found, "grpo.no_gradient") == "warning"
