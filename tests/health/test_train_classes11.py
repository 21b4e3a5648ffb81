"""Session 16 (E18, after round 16 was spent), on the train split: a trigger series and a
near miss for each change to the supervised, DPO and loss rules.

- A supervised loss that stands at twice its start has risen, in a log of a few points
  (sft_mlx_lora_loss_blowup_issue: 1.59, 1.41, then 3.3, 6.4 and 4.6-5.5): `loss.doubled`.
- A jump is judged against a noise of at least the logger's last digit (1e-4): a GRPO
  loss logged as 0.0 for its first steps moves off 0 by 0.0001 with no spike
  (grpo_unsloth_gsm8k_250steps and four more Unsloth GRPO tables, `grpo.loss_spike`).
- A loss that repeats an earlier stretch of its values exactly comes from unchanged weights
  (sft_trace_llama3_lora_loss_repeats_issue: epoch 2 repeats epoch 1): `loss.repeats`.
- A held-out DPO margin past 10 is over-optimised where no training margin is logged
  (dpo_gpt2_harmful_two_epochs_readme: 16.1 and 24.3 at its two evaluations).
"""

from __future__ import annotations

from .helpers import evaluate
from .helpers import of_rule as _of

# loss.doubled

BLOWUP = ([25, 50, 75, 100, 125, 150, 175, 200],
          [1.593, 1.406, 3.316, 6.437, 5.478, 4.857, 4.874, 4.604])


def test_a_loss_that_doubles_and_stays_is_found_in_a_few_points() -> None:
    # On the engine before, only loss.above_max's info at step 75: no loss_rising rule
    # judges 8 points.
    found = evaluate("sft", {}, {"loss": BLOWUP})
    (f,) = _of(found, "loss.doubled")
    assert f.severity == "warning" and f.first_step == 150
    assert "1.593 to 5.478" in f.message


def test_a_single_doubled_batch_is_a_near_miss() -> None:
    # One batch at twice the loss, then back: a spike (loss.above_max), not a rise.
    loss = [1.6, 1.5, 1.45, 3.2, 1.4, 1.38, 1.35, 1.3, 1.3]
    assert _of(evaluate("sft", {}, {"loss": loss}), "loss.doubled") == []


def test_a_dpo_loss_of_a_few_pairs_is_not_judged() -> None:
    # A DPO loss of one or two pairs a batch swings from 0.35 to several times that and
    # back (dpo_beta_dpo_loss_spikes, loss_spike).
    loss = [0.35, 0.69, 0.2, 0.9, 1.1, 0.8, 0.6, 1.0, 0.9]
    assert _of(evaluate("dpo", {}, {"loss": loss}), "loss.doubled") == []


# Jump's noise floor: the logger's last digit

def _kl_loss(n_zero: int = 30) -> list[float]:
    """A GRPO loss (β·KL) logged as 0.0 while the policy sits on the reference, then at
    0.0001-0.0009 as it moves off it."""
    return [0.0] * n_zero + [0.0001, 0.0, 0.0002, 0.0001, 0.0003, 0.0005, 0.0004, 0.0009,
                             0.0006, 0.0008, 0.0011, 0.0009]


def test_a_grpo_loss_moving_off_zero_is_no_spike() -> None:
    # On the engine before, grpo.loss_spike at the first 0.0001: infinitely many standard
    # deviations of a noise measured as 0.
    assert _of(evaluate("grpo", {}, {"loss": _kl_loss()}), "grpo.loss_spike") == []


def test_a_grpo_loss_jumping_fifty_fold_for_a_step_is_a_near_miss() -> None:
    # A KL spike of one batch, 0.0012 -> 0.0653 -> 0.0018
    # (grpo_unsloth_llama31_8b_gsm8k_first132_window at step 57): still a spike.
    loss = [*_kl_loss(), 0.0012, 0.0009, 0.0011, 0.0019, 0.0051, 0.0012, 0.0653, 0.0018,
            0.0009, 0.0013]
    (f,) = _of(evaluate("grpo", {}, {"loss": loss}), "grpo.loss_spike")
    assert f.first_step == len(loss) - 4


# loss.repeats

EPOCH = [0.9741, 1.3742, 1.239, 0.967, 1.0386, 1.1681, 1.224, 0.961]


def test_a_second_epoch_repeating_the_first_is_found() -> None:
    # sft_trace_llama3_lora_loss_repeats_issue: eight per-batch losses, then the first six
    # again at steps 8-13. On the engine before, no finding at all.
    found = evaluate("sft", {}, {"loss": EPOCH + EPOCH[:6]}, finished=True)
    (f,) = _of(found, "loss.repeats")
    assert f.severity == "warning" and f.first_step == 11
    assert "at steps 8-13 repeats" in f.message and "from step 0" in f.message


def test_a_flat_loss_at_a_coarse_rounding_is_a_near_miss() -> None:
    # A loss at 46 in bf16 (a grid of 0.25) takes few values, and four in a row repeat by
    # chance over a long run (sft_custom_moe_brain_3000steps, flat).
    loss = [46.0 + 0.25 * ((i * 7) % 5 - 2) for i in range(300)]
    assert _of(evaluate("sft", {}, {"loss": loss}), "loss.repeats") == []


def test_steps_logged_again_after_a_resume_are_a_near_miss() -> None:
    # A run resumed from its checkpoint at step 4 replays steps 4-7 with the same data and
    # weights: the same losses at the same steps.
    steps = list(range(8)) + list(range(4, 12))
    loss = EPOCH + EPOCH[4:] + [0.95, 0.93, 0.94, 0.92]
    assert _of(evaluate("sft", {}, {"loss": (steps, loss)}), "loss.repeats") == []


# dpo.over_optimisation on held-out margins

def test_a_held_out_margin_past_10_is_over_optimised() -> None:
    # dpo_gpt2_harmful_two_epochs_readme: one evaluation an epoch, margins 16.1 and 24.3,
    # and no training margin. On the engine before, no finding.
    # (TRL's eval_rewards/margins, β-scaled: runwatch's own val/mean_margin is in nats,
    # held to 10/β, test_dpo_margin_units.py)
    found = evaluate("dpo", {}, {"loss": ([1, 2], [0.0539, 0.0001]),
                                 "eval_rewards/margins": ([1, 2], [16.14, 24.34])})
    (f,) = _of(found, "dpo.over_optimisation")
    assert f.severity == "warning" and f.first_step == 1 and "reached 24.3" in f.message


def test_a_held_out_margin_of_a_few_units_is_a_near_miss() -> None:
    # The healthy runs' held-out margins stand at 1.8 at most (dpo_starchat2_15b_two_epochs).
    margin = [0.2, 0.6, 0.9, 1.2, 1.4, 1.6, 1.7, 1.8, 1.8, 1.83, 1.8]
    assert _of(evaluate("dpo", {}, {"eval_rewards/margins": margin}),
               "dpo.over_optimisation") == []


def test_a_training_margin_is_read_before_the_held_out_one() -> None:
    # A run that logs both is judged on the pairs it trains on.
    found = evaluate("dpo", {}, {"rewards/margins": [0.5, 1.0, 1.5, 2.0],
                                 "eval_rewards/margins": [0.5, 1.0, 12.0, 13.0]})
    assert _of(found, "dpo.over_optimisation") == []
