"""Session 13, after round 11 joined the train split: a trigger series and a near miss each.

- A single batch's SFT loss is judged against its own noise: a 5-point median of a loss
  that swings by a third between steps cannot show the fall the flat-loss rules look for,
  nor a 16-point trend the rise `loss.rising` looks for.
- The reward trained on rising while the task score falls (beyond both series' noise) is
  reward hacking, and a task score that does not rise beside a rising reward is read as
  one that stays flat.
- Names: a share of the task solved on the training rollouts (`answer_f1`,
  `success_rate`), a return (`mean_return`), a `proxy` reward and a `true_*` score.
"""

from __future__ import annotations

import random

import pytest

from runwatch.metrics.aliases import health_name

from .helpers import evaluate, rule_ids


def _noisy(level: list[float], spread: float, seed: int = 0) -> list[float]:
    """`level` with a batch's noise of `spread` (relative) on every point."""
    rng = random.Random(seed)
    return [v * (1 + rng.uniform(-spread, spread)) for v in level]


# 500 logged steps of a loss whose level falls 20% over the run, slowly (20 epochs of 25
# batches, sft_spongebob_lm_20ep_noisy).
LEVEL = [5.0 * (1 - 0.2 * i / 499) for i in range(500)]


def test_a_noisy_single_batch_loss_is_judged_against_its_noise() -> None:
    # Per-step losses swing by 40% either way while the level falls. Two draws of that
    # noise on which the old rules fired: the 5-point medians sat within 5% of the
    # start (draw 0), a 16-point trend rose by half (draw 4).
    found = rule_ids(evaluate("sft", {}, {"loss": _noisy(LEVEL, 0.4, seed=0)}))
    assert "sft.loss_not_falling" not in found
    found = rule_ids(evaluate("sft", {}, {"loss": _noisy(LEVEL, 0.4, seed=4)}))
    assert "loss.rising" not in found
    # Near miss: a flat window with a batch noise of 1% is a loss that is not falling.
    found = rule_ids(evaluate("sft", {}, {"loss": _noisy([5.0] * 40, 0.01)}))
    assert "sft.loss_not_falling" in found


def test_a_noisy_falling_loss_is_not_called_flat_on_any_draw() -> None:
    # The same loss on ten draws of its noise. Judged by 5-point medians, the start, one
    # such median, sat up to a fifth below the level on some draws (3.9 against 5.0 on
    # draw 8), and one of the run's hundred latest medians then sat above it by chance
    # (draws 1, 3, 4, 7, 8 and 9). Medians of as many points as the noise needs: a loss
    # this noisy needs more than 16 and is not judged flat.
    for seed in range(10):
        found = rule_ids(evaluate("sft", {}, {"loss": _noisy(LEVEL, 0.4, seed=seed)}))
        assert "sft.loss_not_falling" not in found, seed
    # Near miss: a flat loss with a batch noise of 15% is judged by 10-point medians, and
    # is not falling.
    for seed in (1, 3, 4):
        found = rule_ids(evaluate("sft", {}, {"loss": _noisy([5.0] * 100, 0.15, seed=seed)}))
        assert "sft.loss_not_falling" in found, seed


def test_a_steady_rise_under_little_noise_still_reads_as_rising() -> None:
    rise = [2.0] * 30 + [2.0 * (1 + 0.06 * i) for i in range(1, 17)]
    found = rule_ids(evaluate("sft", {}, {"loss": _noisy(rise, 0.02)}))
    assert "loss.rising" in found


# A validation every 16 steps whose loss falls 0.15% each time (sft_fgpt712m_instruct_window).
VAL_STEPS = list(range(0, 400, 16))
VAL = [2.9 * (1 - 0.0015 * i) for i in range(len(VAL_STEPS))]


def test_a_slow_validation_fall_beside_a_noisy_training_loss_is_no_plateau() -> None:
    # The batch loss logged at every validation swings by a tenth, with a run of hard
    # batches (3.6-3.9 against about 3.0) from the 11th on.
    train = _noisy([3.0] * len(VAL_STEPS), 0.12, seed=1)
    train[10:14] = [3.85, 3.3, 3.65, 3.7]
    found = rule_ids(evaluate("sft", {}, {"loss": (VAL_STEPS, train),
                                          "val/loss": (VAL_STEPS, VAL)}))
    assert "sft.plateau" not in found
    # Near miss: a quiet training loss beside the same validation loss has not moved.
    quiet = _noisy([3.0] * len(VAL_STEPS), 0.005, seed=1)
    found = rule_ids(evaluate("sft", {}, {"loss": (VAL_STEPS, quiet),
                                          "val/loss": (VAL_STEPS, VAL)}))
    assert "sft.plateau" in found


@pytest.mark.parametrize(("name", "role"), [
    ("answer_f1", "accuracy"), ("success_rate", "accuracy"), ("mean_correct", "accuracy"),
    ("eval_f1", "val/accuracy"), ("mean_return", "reward_mean"),
    ("episode_return", "reward_mean"), ("proxy", "reward_mean"),
    ("proxy_reward", "reward_mean"), ("true_acc", "accuracy"), ("true_reward", "accuracy"),
])
def test_names_of_a_task_score_and_a_trained_reward(name: str, role: str) -> None:
    assert health_name(name)[0] == role


@pytest.mark.parametrize("name", ["format_rate", "format_accuracy", "true_acc_std",
                                  "max_return", "proxy_loss", "mean_token_accuracy",
                                  "pass_at_8"])
def test_names_that_are_not_a_task_score_or_a_reward(name: str) -> None:
    assert health_name(name)[0] not in ("accuracy", "reward_mean")


# grpo_sps_squad_qa_policy_gradient: the return climbs as a format reward is learned while
# the answer F1 of the same rollouts falls, noisily (16 episodes an epoch).
EPOCHS = 48
RETURN = _noisy([1.0 + 1.3 * i / EPOCHS for i in range(EPOCHS)], 0.15, seed=2)


def test_a_task_score_falling_beside_a_rising_reward_is_read_as_not_rising() -> None:
    falling = _noisy([0.40 - 0.12 * i / EPOCHS for i in range(EPOCHS)], 0.1, seed=3)
    found = rule_ids(evaluate("grpo", {}, {"mean_return": RETURN, "answer_f1": falling}))
    assert "grpo.proxy_hacking" in found
    # Near miss: the same noise on a score that rises with the reward.
    rising = _noisy([0.30 + 0.3 * i / EPOCHS for i in range(EPOCHS)], 0.1, seed=3)
    found = rule_ids(evaluate("grpo", {}, {"mean_return": RETURN, "answer_f1": rising}))
    assert "grpo.proxy_hacking" not in found
    assert "grpo.task_score_falling" not in found


# grpo_tiny_rft_learned_rm_six_rounds: the proxy reward of the selected samples climbs
# while the true held-out accuracy falls from its level before training.
ROUNDS = list(range(7))
TRUE_ACC = [0.6087, 0.3027, 0.1913, 0.1713, 0.1473, 0.1367, 0.1387]


def test_a_trained_reward_rising_while_the_true_score_falls_is_reward_hacking() -> None:
    proxy = (ROUNDS[1:], [0.6503, 0.7053, 0.7188, 0.7283, 0.7506, 0.7509])
    found = rule_ids(evaluate("grpo", {}, {"proxy": proxy,
                                           "true_acc": (ROUNDS, TRUE_ACC)}))
    assert "grpo.task_score_falling" in found
    # Near miss: a reward that only jumps about (once far up) is not rising.
    jumpy = (ROUNDS[1:], [0.05, -0.36, 0.15, -0.5, -0.15, 0.87])
    found = rule_ids(evaluate("grpo", {}, {"proxy": jumpy,
                                           "true_acc": (ROUNDS, TRUE_ACC)}))
    assert "grpo.task_score_falling" not in found


# grpo_verifier_reward_qwen05b_mitigated (entropy collapse, not reward hacking): the accuracy
# falls 0.59 -> 0.45 and freezes, while a reward of noise ±0.5 leaps to 0.87 at its 8th point.
STEPS = list(range(0, 180, 20))
FROZEN_ACC = [0.475, 0.5625, 0.5875, 0.5625, 0.55, 0.5125, 0.45, 0.45, 0.45]
LEAPING = [-0.1075, -0.0537, -0.3603, 0.1454, -0.5057, -0.1454, 0.1075, 0.866]


def test_a_reward_that_leaps_once_beside_a_falling_score_is_no_reward_hacking() -> None:
    # The leap alone carried the window's rise past 3 standard errors of the reward's
    # noise over its 8 points; without its newest point the reward has not risen.
    found = rule_ids(evaluate("grpo", {}, {"mean_reward": (STEPS[1:], LEAPING),
                                           "accuracy": (STEPS, FROZEN_ACC)}))
    assert "grpo.task_score_falling" not in found
    # Near miss: a reward that rises as far, point by point, beside the same score.
    steady = [-0.3 + 0.15 * i for i in range(len(LEAPING))]
    found = rule_ids(evaluate("grpo", {}, {"mean_reward": (STEPS[1:], steady),
                                           "accuracy": (STEPS, FROZEN_ACC)}))
    assert "grpo.task_score_falling" in found
