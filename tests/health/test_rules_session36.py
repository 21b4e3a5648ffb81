"""Session 36: the loss rules after a new user's trial of the health engine.

- A loss that fell and then jumped back was "not falling, raise learning_rate", and one
  that rose from its start was too (`fell_once`, `rise_limit`): the jump and the rise are
  other rules' (loss.stepped_up, loss.above_start), whose advice is the other way.
- Three masked steps logged as an exact 0 made the loss's jump rules compare the loss that
  came back with 0 ("up 61713784824464%"): the SFT and DPO loss rules leave exact zeros
  out (`zero_unmeasured`; loss.zero reports them), and a loss below 0 is no "exactly 0".
- A completion budget under another trainer's name (TRL's max_completion_length) was not
  read, so grpo.length_at_budget never judged.
- loss.rising said "over the last 16 logged points" of a 10-point log: trend messages name
  the steps their change was measured between.
"""

from __future__ import annotations

import random

from .helpers import evaluate, of_rule


def _noisy(values: list[float], sd: float, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [v + rng.gauss(0, sd) for v in values]


def _diverged(seed: int = 1) -> list[float]:
    """A supervised loss that falls from 3.0 to 1.0, then jumps back to 3.0 at step 150."""
    import math
    rng = random.Random(seed)
    return [(2.0 * math.exp(-i / 40) + 1.0 + rng.gauss(0, 0.02)) if i < 150
            else 3.0 + rng.gauss(0, 0.05) for i in range(200)]


def test_a_loss_that_fell_and_jumped_back_is_no_loss_that_does_not_fall() -> None:
    # before: sft.loss_not_falling warning "fell only 0.8% over 197 steps ... raise lr"
    found = evaluate("sft", {}, {"loss": _diverged()})
    assert of_rule(found, "sft.loss_not_falling") == []
    (jump,) = of_rule(found, "loss.stepped_up")  # the jump is told, by the rule for it
    assert jump.severity == "warning"


def test_a_flat_loss_still_does_not_fall() -> None:
    # near miss: a loss flat from its start is still "not falling"
    (flat,) = of_rule(evaluate("sft", {}, {"loss": _noisy([2.0] * 100, 0.01)}),
                      "sft.loss_not_falling")
    assert flat.severity == "warning" and "Raise learning_rate" not in flat.advice
    assert "raise learning_rate" in flat.advice


def test_a_loss_rising_from_its_start_is_rising_not_flat() -> None:
    rise = [1.0 + 0.3 * i / 99 for i in range(100)]  # 30% up over 100 steps
    found = evaluate("sft", {}, {"loss": _noisy(rise, 0.01)})
    assert of_rule(found, "loss.above_start"), "the rise is told"
    assert all(f.status == "resolved" for f in of_rule(found, "sft.loss_not_falling")), \
        "not falling gives way once the loss stands 20% above its start"
    dpo_rise = [0.69 + 0.26 * i / 99 for i in range(100)]
    dpo = evaluate("dpo", {}, {"loss": _noisy(dpo_rise, 0.01)})
    assert of_rule(dpo, "loss.above_start")
    assert all(f.status == "resolved" for f in of_rule(dpo, "dpo.loss_not_falling"))


def _masked_zeros() -> list[float]:
    """A falling SFT loss with three masked steps (an exact 0) at steps 50-52."""
    loss = _noisy([2.0 * 0.98 ** i + 0.6 for i in range(60)], 0.005)
    loss[50:53] = [0.0, 0.0, 0.0]
    return loss


def test_masked_steps_logged_as_zero_are_no_jump_of_the_loss() -> None:
    found = evaluate("sft", {}, {"loss": _masked_zeros()})
    (zero,) = of_rule(found, "loss.zero")
    assert zero.first_step == 50
    # before: loss.stepped_up (warning), loss.spike and loss.upturn on the way back
    for rule in ("loss.stepped_up", "loss.spike", "loss.upturn", "loss.spike_isolated",
                 "loss.above_max"):
        assert of_rule(found, rule) == [], rule


def test_a_loss_below_zero_is_not_exactly_zero() -> None:
    negative = _noisy([-0.01] * 40, 0.002)
    assert of_rule(evaluate("sft", {}, {"loss": negative}), "loss.zero") == []
    # near miss: a loss the HF Trainer rounds to -0.0001 from just below 0 is 0 there
    rounded = [0.3] * 10 + [0.0, -0.0001, 0.0, -0.0001] + [0.3] * 10
    assert of_rule(evaluate("sft", {}, {"loss": rounded}), "loss.zero")


def test_a_completion_budget_under_other_trainers_names_is_read() -> None:
    rng = random.Random(0)
    length = [(300 if i < 30 else 950) + rng.gauss(0, 5) for i in range(60)]
    reward = [0.2 + 0.4 * i / 60 + rng.gauss(0, 0.03) for i in range(60)]
    series = {"mean_sampled_response_length": length, "reward_mean": reward}
    for name in ("max_sample_tokens", "max_completion_length", "max_response_length",
                 "generate_max_len"):
        assert of_rule(evaluate("grpo", {name: 1024.0}, series), "grpo.length_at_budget"), name
    # near miss: a budget far above the lengths
    assert of_rule(evaluate("grpo", {"max_completion_length": 4096.0}, series),
                   "grpo.length_at_budget") == []


def test_a_trend_message_names_the_steps_it_measured_not_its_window() -> None:
    loss = [1.0, 1.8, 2.3, 2.5, 2.9, 3.1, 3.3, 3.45, 3.5, 3.6]
    (rising,) = of_rule(evaluate("sft", {}, {"loss": loss}), "loss.rising")
    assert "16 logged points" not in rising.message
    assert "from step" in rising.message


def test_a_kl_that_steps_up_and_stays_is_told_as_a_step_not_as_many_spikes() -> None:
    # before: "40 spikes from step 60, each within 5 points of the one before"
    rng = random.Random(2)
    kl = [(0.04 if i < 60 else 1.2) + rng.gauss(0, 0.004) for i in range(100)]
    reward = [0.2 + 0.4 * i / 100 + rng.gauss(0, 0.04) for i in range(100)]
    (spike,) = of_rule(evaluate("grpo", {}, {"kl": kl, "reward": reward}), "grpo.kl_ref_spike")
    assert "logged points in a row from step 60: a step up" in spike.message
    assert "spikes from step" not in spike.message
    # near miss: spikes that come back are counted as spikes
    kl = [0.05 + rng.gauss(0, 0.004) for _ in range(100)]
    for at in (60, 62):
        kl[at] = 2.0
    (spike,) = of_rule(evaluate("grpo", {}, {"kl": kl, "reward": reward}), "grpo.kl_ref_spike")
    assert "2 spikes from step 60" in spike.message
