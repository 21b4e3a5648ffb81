"""Session 16 (E18, after round 16 was spent), on the train split: a trigger series and a
near miss for each change to the supervised, DPO and loss rules.

- A supervised loss that stands at twice its start has risen, in a log of a few points
  (sft_mlx_lora_loss_blowup_issue: 1.59, 1.41, then 3.3, 6.4 and 4.6-5.5): `loss.doubled`.
- A jump is judged against a noise of at least the logger's last digit (1e-4): a GRPO
  loss logged as 0.0 for its first steps moves off 0 by 0.0001 with no spike
  (grpo_unsloth_gsm8k_250steps and four more Unsloth GRPO tables, `grpo.loss_spike`).
"""

from __future__ import annotations

from runwatch.health.findings import Finding

from .helpers import evaluate


def _of(found: list[Finding], rule_id: str) -> list[Finding]:
    return [f for f in found if f.rule_id == rule_id]


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
