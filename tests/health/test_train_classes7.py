"""Session 15 (E13), after round 14 joined the train split: a trigger series and a near miss
for each change to the supervised rules.

- A loss that creeps up through each epoch and steps back down at the next one's start is
  no climbing loss (sft_qlora_fujump_24_epochs, healthy: 24 epochs of ~45 logs, each epoch
  a third higher at its end than at its start, every epoch lower than the one before).
- Repeated spikes of the gradient norm beside an ordinary loss are info, not a warning
  (dpo_qwen25_15b_truthy_mps_lora_beta03_lr1e4, healthy: 160,621 against a median of 9 on
  9 of 50 steps while its loss falls).
- A DPO loss below 0.01 on two logs in a row is a collapse in a run that logs no preference
  accuracy too (dpo_qwen35_08b_day22_cpu_fallback_6steps: 0.693 -> 0.00013 in 6 logs).
- A gradient norm exactly 0 beside a loss exactly 0 is no frozen model (loss.zero finds
  it: no supervised token), so no loss_not_falling finding (sft_ovis2_34b_lora_loss_zero_issue).
- Losses that jumped up and stayed have moved: no plateau (distill_nmt_loss_jump).
"""

from __future__ import annotations

import math

from .helpers import evaluate
from .helpers import of_rule as _of

EPOCH = 45  # logs an epoch


def _sawtooth(epochs: int, rise: float) -> list[float]:
    """A many-epoch loss: the first epoch falls 1.0 -> 0.3; each later one starts a fifth
    below the last one's start and creeps up by `rise` of its level through the epoch;
    a wobble of 5% over 5 logs throughout."""
    out = [1.0 - 0.7 * k / (EPOCH - 1) for k in range(EPOCH)]
    for e in range(1, epochs):
        start = 0.3 * 0.8 ** e
        out += [start * (1 + rise * k / (EPOCH - 1)) for k in range(EPOCH)]
    return [v * (1 + 0.05 * math.sin(1.3 * i)) for i, v in enumerate(out)]


def _climbing(settle: int, n: int) -> list[float]:
    """A loss that falls to 0.3 over `settle` logs, then climbs 1.5% a log, wobbling 5%."""
    return [(0.3 * (1 + 2 * (settle - i) / settle) if i < settle
             else 0.3 * (1 + 0.015 * (i - settle))) * (1 + 0.05 * math.sin(1.3 * i))
            for i in range(n)]


def test_a_loss_that_climbs_through_each_epoch_and_steps_down_is_no_climb() -> None:
    # The second epoch's creep has nothing before it to tell it from a climb; once the
    # loss has stepped back down after one, no later epoch's is a finding. On the engine
    # before, loss.climbing warned again in every epoch.
    found = _of(evaluate("sft", {}, {"loss": _sawtooth(10, 0.6)}), "loss.climbing")
    assert [f.first_step for f in found if f.first_step >= 2 * EPOCH] == []


def test_a_loss_that_climbs_with_no_step_down_is_found() -> None:
    # Near miss: a climb that nothing undoes, right after a steep fall (a third of its
    # level in 8 logs, which rose to nothing first): found where the engine before found it.
    (f, *_) = _of(evaluate("sft", {}, {"loss": _climbing(30, 100)}), "loss.climbing")
    assert f.severity == "warning" and f.first_step == 26


def _truthy(loss_spikes: bool) -> dict[str, list[float]]:
    """50 steps: a gradient norm near 9 with spikes of 1e3-1.6e5 on 9 steps, two of them
    adjacent, beside a DPO loss falling 0.69 -> 0.3 (jumping at the spikes if asked)."""
    at = {1: 6649.0, 5: 40110.0, 6: 9635.0, 20: 963.0, 32: 61292.0, 41: 52397.0,
          45: 14084.0, 48: 160621.0, 49: 9825.0}
    grad = [at.get(i, 9.0 + math.sin(i)) for i in range(50)]
    loss = [0.69 - 0.008 * i + 0.03 * math.sin(1.7 * i) for i in range(50)]
    if loss_spikes:
        loss = [2.5 if i in at and i > 20 else v for i, v in enumerate(loss)]
    return {"grad_norm": grad, "loss": loss}


def test_repeated_gradient_spikes_beside_an_ordinary_loss_are_info() -> None:
    # On the engine before, optim.grad_norm_spike turned into a warning at step 45.
    found = evaluate("dpo", {}, _truthy(False))
    spikes = _of(found, "optim.grad_norm_spike")
    assert spikes and {f.severity for f in spikes} == {"info"}
    assert not [f for f in found if f.severity != "info"]


def test_repeated_gradient_spikes_with_the_loss_jumping_warn_through_the_loss() -> None:
    # Near miss: the loss jumps at the same steps, and that is the warning.
    found = evaluate("dpo", {}, _truthy(True))
    assert "warning" in {f.severity for f in _of(found, "loss.spike")}


def _dpo(loss: list[float]) -> dict[str, list[float]]:
    return {"loss": loss, "rewards/margins": [max(0.0, -math.log(max(x, 1e-9))) for x in loss]}


def test_a_dpo_loss_below_001_twice_in_six_logs_is_a_collapse() -> None:
    # On the engine before, nothing: the loss-only saturation rule asks 10 logs.
    loss = [0.6931, 0.2033, 0.02681, 0.00773, 0.004667, 0.0001294]
    (f,) = _of(evaluate("dpo", {}, _dpo(loss)), "dpo.loss_collapsed")
    assert f.severity == "warning" and f.first_step == 3


def test_a_dpo_loss_logged_as_exactly_0_or_above_001_is_no_collapse() -> None:
    # Near misses: zeros among ordinary losses (steps skipped, NaN logged as 0), and a loss
    # that stays above 0.01.
    assert not _of(evaluate("dpo", {}, _dpo([0.69, 0.35, 0.0, 0.0, 0.34, 0.0, 0.0])),
                   "dpo.loss_collapsed")
    assert not _of(evaluate("dpo", {}, _dpo([0.69, 0.2, 0.03, 0.012, 0.011, 0.0105])),
                   "dpo.loss_collapsed")


def test_a_zero_gradient_beside_a_zero_loss_is_the_zero_loss_alone() -> None:
    # On the engine before, optim.zero_gradient too (a loss_not_falling finding) on a run
    # whose loss and gradient norm are both exactly 0 (no supervised token).
    found = evaluate("sft", {}, {"loss": [0.0] * 20, "grad_norm": [0.0] * 20})
    assert not _of(found, "optim.zero_gradient") and _of(found, "loss.zero")


def test_a_zero_gradient_beside_a_loss_that_does_not_move_is_found() -> None:
    # Near miss: the gradient norm exactly 0 beside a loss of 2.3 (a frozen model).
    found = evaluate("sft", {}, {"loss": [2.3] * 20, "grad_norm": [0.0] * 20})
    assert _of(found, "optim.zero_gradient")


def _epochs(train: list[float], val: list[float]) -> dict[str, tuple[list[int], list[float]]]:
    steps = [1000 * (i + 1) for i in range(len(train))]
    return {"loss": (steps, train), "val/loss": (steps, val)}


def test_losses_that_jumped_up_and_stayed_are_no_plateau() -> None:
    # distill_nmt_loss_jump (loss_rising): both losses fall ~10% over 17 epochs, then jump
    # 35% and stay. On the engine before, sft.plateau warned "the model is not learning"
    # on the jump (both had "fallen less than 4%": they rose).
    train = [4.2 - 0.035 * i for i in range(17)] + [4.88, 4.85, 4.83]
    val = [3.87 - 0.016 * i for i in range(17)] + [4.89, 4.875, 4.865]
    found = evaluate("sft", {}, _epochs(train, val))
    assert not _of(found, "sft.plateau") and _of(found, "loss.stepped_up")


def test_losses_that_stay_within_2_percent_are_a_plateau() -> None:
    # Near miss: both losses within 2% of where they started over 12 validations.
    train = [2.0 * (1 - 0.001 * i) for i in range(12)]
    val = [2.1 * (1 + 0.001 * (i % 3)) for i in range(12)]
    assert _of(evaluate("sft", {}, _epochs(train, val)), "sft.plateau")
