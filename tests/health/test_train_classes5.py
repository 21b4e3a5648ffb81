"""Session 14, after round 12 joined the train split: a trigger series and a near miss each.

- A reward that has risen beyond its noise is not called flat on a later dip: it takes
  the reward falling back below where it started.
- A training loss that fell in the run's first steps has learned, though it and the
  validation loss move little after the first validation.
- A preference accuracy below chance beside a margin above 0 is pairs scored alike, not a
  policy at chance.
- A loss that spikes at the run's third log, a DPO loss of exactly 0 beside pairs not
  preferred, a loss that climbs slowly (cases.py), and `zvf`, the zero-variance fraction.
"""

from __future__ import annotations

import random

import pytest

from runwatch.metrics.aliases import health_name

from .helpers import evaluate, rule_ids


def _reward(levels: list[float], seed: int) -> list[float]:
    """A mean reward over 16 samples a step: `levels` with noise of ±0.3, in 1/16ths."""
    rng = random.Random(seed)
    return [min(1.0, max(0.0, round((v + rng.uniform(-0.3, 0.3)) * 16) / 16)) for v in levels]


def _no_progress_after(step: int, reward: list[float]) -> list[str]:
    """The severities of rl.no_progress findings that open after `step`."""
    return [f.severity for f in evaluate("grpo", {}, {"reward_mean": reward})
            if f.rule_id == "rl.no_progress" and f.first_step > step]


@pytest.mark.parametrize("seed", [0, 2, 3, 4, 9, 13, 16, 38, 39])
def test_a_reward_that_rose_is_not_called_flat_on_a_dip(seed: int) -> None:
    # grpo_invokerl_1000steps_three_windows: a reward of noise ±0.2 a step that rose
    # 0.44 -> 0.58 and stays there. On these draws a 25-point median dipped within one
    # standard error of the start long after the rise (a second finding, a warning).
    reward = _reward([0.44] * 44 + [0.58] * 90, seed)
    assert _no_progress_after(44, reward) == []


def test_a_reward_that_rose_and_fell_back_is_still_not_improving() -> None:
    # Near miss: the same rise, then the reward back at its start for 60 steps.
    reward = _reward([0.44] * 44 + [0.58] * 60 + [0.40] * 60, 0)
    assert "warning" in _no_progress_after(104, reward)


# sft_qwen_essam_lora_250steps: a LoRA's batch loss logged every 10 steps falls
# 1.08 -> 0.77 before its first validation at step 50, then stays at 0.72-0.80, while the
# validation loss falls at every evaluation, 3.4% in all.
TRAIN_STEPS = list(range(10, 260, 10))
SETTLED = [0.795, 0.743, 0.822, 0.758, 0.789, 0.779, 0.775, 0.756, 0.721, 0.785, 0.797,
           0.729, 0.782, 0.722, 0.697, 0.746, 0.770, 0.736, 0.646, 0.756, 0.707]
VAL = ([50, 100, 150, 200, 250], [0.7995, 0.7827, 0.7770, 0.7742, 0.7725])


def test_a_loss_that_fell_before_the_first_validation_is_no_plateau() -> None:
    train = (TRAIN_STEPS, [1.076, 0.933, 0.826, 0.775, *SETTLED])
    assert "sft.plateau" not in rule_ids(evaluate("sft", {}, {"loss": train, "val/loss": VAL}))
    # Near miss: the same losses, with the first four logs at the settled level too.
    flat = (TRAIN_STEPS, [0.79, 0.80, 0.78, 0.79, *SETTLED])
    assert "sft.plateau" in rule_ids(evaluate("sft", {}, {"loss": flat, "val/loss": VAL}))


# orpo_llama32_1b_beta001_evalsteps: ORPO at beta 0.01 counts 11% of the eval pairs as
# preferred at every evaluation, beside a margin of +2e-4.
EVALS = [50 * (i + 1) for i in range(14)]
ACCURACY = [0.119, 0.113, 0.119, 0.106, 0.106, 0.113, 0.119, 0.113, 0.119, 0.113, 0.119,
            0.113, 0.113, 0.106]


def test_accuracy_below_chance_beside_a_positive_margin_is_no_chance_policy() -> None:
    margin = [0.0002] * len(EVALS)
    found = rule_ids(evaluate("dpo", {}, {"val/preference_accuracy": (EVALS, ACCURACY),
                                          "val/mean_margin": (EVALS, margin)}))
    assert "dpo.preference_accuracy_low" not in found
    # Near miss: the same accuracy beside a margin that is not above 0.
    found = rule_ids(evaluate("dpo", {}, {"val/preference_accuracy": (EVALS, ACCURACY),
                                          "val/mean_margin": (EVALS, [-m for m in margin])}))
    assert "dpo.preference_accuracy_low" in found


def test_a_spike_at_the_third_log_is_found() -> None:
    # sft_flant5_mgzon_nan_val_spike: a loss per epoch, 65 times its highest at the third.
    found = rule_ids(evaluate("sft", {}, {"loss": [0.2456, 0.0888, 15.9533, 0.1136, 0.0626]}))
    assert "loss.above_max" in found
    # Near miss: a third log 1.8 times the first.
    found = rule_ids(evaluate("sft", {}, {"loss": [0.2456, 0.0888, 0.44, 0.1136, 0.0626]}))
    assert "loss.above_max" not in found


def test_the_zero_variance_fraction_is_read_as_the_share_of_groups_without_spread() -> None:
    assert health_name("zvf")[0] == "zero_variance_skip_ratio"
