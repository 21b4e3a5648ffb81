"""A second pass on the train split's classes (session 12, after round 10 joined): a
trigger series and a near miss each.

- A held-out share of the task solved under a name of its own (`validation_accuracy`,
  `val/success_rate`, `eval/pass_at_1`, TRL's `eval_rewards/accuracy_reward/mean`) is the
  held-out accuracy, read against the trained reward: the reward rising while it falls is
  reward hacking.
- A fall of a validation score must pass the score's own point-to-point noise: a win
  rate over 5 games moves by a fifth between validations without getting worse.
"""

from __future__ import annotations

import pytest

from runwatch.metrics.aliases import health_name

from .helpers import evaluate, rule_ids

# A trained reward that climbs every step for 60 steps.
REWARD = [0.2 + 0.01 * i for i in range(61)]
VAL_STEPS = list(range(0, 61, 10))
FALLING = [0.60, 0.58, 0.55, 0.50, 0.44, 0.40, 0.35]


@pytest.mark.parametrize("name", ["validation_accuracy", "val/success_rate",
                                  "eval/pass_at_1", "test/env/all/pass_rate", "dev_em",
                                  "eval_rewards/accuracy_reward/mean",
                                  "eval/rewards/correctness_reward_func"])
def test_a_held_out_share_falling_while_the_reward_rises_is_reward_hacking(name: str) -> None:
    found = evaluate("grpo", {}, {"reward_mean": REWARD, name: (VAL_STEPS, FALLING)})
    assert "grpo.reward_hacking" in rule_ids(found)
    # Near miss: the same held-out share rising with the reward.
    rising = [0.35, 0.40, 0.44, 0.50, 0.55, 0.58, 0.60]
    found = evaluate("grpo", {}, {"reward_mean": REWARD, name: (VAL_STEPS, rising)})
    assert "grpo.reward_hacking" not in rule_ids(found)


@pytest.mark.parametrize("name", ["eval/pass_at_8", "val/acc/maj@8", "eval_mean_token_accuracy",
                                  "val/format_correct", "val_acc_max", "dev_chrf",
                                  "test/env/all/num_passed",
                                  "eval_rewards/format_reward/mean"])
def test_names_that_are_not_a_held_out_share_of_the_task_stay_unread(name: str) -> None:
    # A best-of-k bound, a majority vote, a teacher-forced token accuracy, a format check,
    # a running best, a score on a 0-100 scale, a count and the eval mean of a reward
    # function that pays for the format are not the task solved.
    assert health_name(name)[0] != "val/accuracy"
    found = evaluate("grpo", {}, {"reward_mean": REWARD, name: (VAL_STEPS, FALLING)})
    assert "grpo.reward_hacking" not in rule_ids(found)


def test_a_spread_named_dev_is_still_the_rewards_spread() -> None:
    assert health_name("reward_std_dev")[0] == "reward_std"
    assert health_name("dev_accuracy")[0] == "val/accuracy"


def test_a_validation_score_that_falls_only_by_its_noise_is_not_falling() -> None:
    # A win rate over 5 games a validation (0.0, 0.2, ... 1.0): it moves by 0.2-0.6
    # between validations while the policy does not get worse.
    noisy = [0.6, 0.4, 0.6, 0.2, 0.4, 0.6, 0.2, 0.0, 0.4, 0.2, 0.6, 0.2]
    steps = [10 * i for i in range(len(noisy))]
    reward = [0.2 + 0.005 * i for i in range(steps[-1] + 1)]
    found = rule_ids(evaluate("grpo", {}, {"reward_mean": reward,
                                           "eval_accuracy": (steps, noisy)}))
    assert "val.falling" not in found
    assert "grpo.reward_hacking" not in found
    # Near miss: a fall as large with a tenth of the noise.
    steady = [0.62, 0.60, 0.61, 0.58, 0.55, 0.56, 0.52, 0.49, 0.47, 0.45, 0.42, 0.40]
    found = rule_ids(evaluate("grpo", {}, {"reward_mean": reward,
                                           "eval_accuracy": (steps, steady)}))
    assert "val.falling" in found
    assert "grpo.reward_hacking" in found


def test_a_validation_score_that_collapses_in_one_step_is_falling() -> None:
    # grpo_verl_mixed_cuts_divergence: val-core 0.7225, 0.73, 0.735, 0.70, 0.635, then
    # 0.0025: the last change is the fall, not the noise the fall is judged against.
    collapse = [0.7225, 0.73, 0.735, 0.70, 0.635, 0.0025]
    steps = [10 * (i + 1) for i in range(len(collapse))]
    found = rule_ids(evaluate("grpo", {}, {"eval_accuracy": (steps, collapse)}))
    assert "val.falling" in found
