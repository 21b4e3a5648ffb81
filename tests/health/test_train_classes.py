"""What made a class of pathology invisible on the corpus's train split (session 11), by
class: a trigger series and a near miss each.

- A preference never learned: a DPO or ORPO run whose training margin stays at or below 0
  has a loss that never left ln 2, however its loss (ORPO's adds an NLL term) moves.
- A loss spike in a run of a few points: loss.spike measures a jump against the noise of
  10 points of history; a loss past twice its highest earlier value needs none.
"""

from __future__ import annotations

import random

from .cases import every
from .helpers import evaluate
from .helpers import of_rule as _of


def _margins(level: float, n: int = 20, noise: float = 0.01, seed: int = 2) -> list[float]:
    rng = random.Random(seed)
    return [level + noise * 2 * (rng.random() - 0.5) for _ in range(n)]


def test_a_dpo_margin_at_or_below_zero_on_most_logs_warns() -> None:
    # An ORPO run logged every 10 steps: its margin -0.02 to -0.015, its loss (with the
    # NLL term) falling 7%.
    margin = [-0.021 + 0.0006 * i for i in range(10)]
    loss = [0.866 - 0.006 * i for i in range(10)]
    (f,) = _of(evaluate("dpo", {}, {"rewards/margins": every(10, margin),
                                    "loss": every(10, loss)}),
               "dpo.train_margin_not_positive")
    assert f.severity == "warning" and f.first_step <= 80
    assert "10 of the last 10 logged steps" in f.message
    # A margin pinned at exactly 0 (the policy never left the reference) too.
    assert _of(evaluate("dpo", {}, {"rewards/margins": [0.0] * 12}),
               "dpo.train_margin_not_positive")


def test_the_margin_from_chosen_and_rejected_rewards_is_read_too() -> None:
    chosen = _margins(-0.5, seed=4)
    rejected = [c + 0.05 for c in chosen]  # the rejected reply scored higher every step
    assert _of(evaluate("dpo", {}, {"rewards/chosen": chosen, "rewards/rejected": rejected}),
               "dpo.train_margin_not_positive")


def test_a_noisy_margin_under_zero_on_half_its_logs_is_no_finding() -> None:
    # Near miss: a small learning margin under batch noise dips under 0 on about half
    # of its logs (a healthy loop's margin 0.06 under noise of 0.07 does less).
    margin = [0.0] + [0.01 if i % 2 else -0.01 for i in range(1, 40)]
    assert _of(evaluate("dpo", {}, {"rewards/margins": margin}),
               "dpo.train_margin_not_positive") == []
    # and an SFT run's logged margin is not read (the rule is DPO's)
    assert _of(evaluate("sft", {}, {"rewards/margins": [0.0] * 20}),
               "dpo.train_margin_not_positive") == []


def test_loss_spikes_in_a_ten_point_run_are_found_and_repeated_ones_warn() -> None:
    # A batch-of-one DPO run logged 10 times: swings to 0 and back, then 4.9 and 16.4.
    loss = [0.69, 0.79, 1.27, 0.0, 0.03, 1.34, 4.89, 0.001, 0.0, 16.4]
    found = _of(evaluate("dpo", {}, {"loss": loss}), "loss.above_max")
    assert [f.first_step for f in found] == [6]
    assert found[0].severity == "warning"
    assert "2 jumps from step 6, each within 5 points of the one before" in found[0].message
    assert "16.4, 3.4× the highest value it had logged before (4.89)" in found[0].message
    # loss.spike has too little history in such a run to judge a jump against the noise.
    assert _of(evaluate("dpo", {}, {"loss": loss}), "loss.spike") == []


def test_one_jump_in_a_sparse_run_is_info_and_a_healthy_wobble_none() -> None:
    # Logged every 25 steps: a loss falling 4.0 -> 2.2 jumps to 9.1 once.
    (f,) = _of(evaluate("sft", {}, {"loss": every(25, [4.0, 3.1, 2.6, 2.4, 9.1, 2.2])}),
               "loss.above_max")
    assert f.severity == "info" and f.first_step == 125
    # Near miss: a noisy start whose loss comes back to 1.13× its highest earlier value,
    # the most any healthy run of the corpus does.
    wobble = [2.0, 1.9, 2.1, 2.37, 1.8, 1.7]
    assert _of(evaluate("sft", {}, {"loss": wobble}), "loss.above_max") == []
    # A loss that starts at 0 (nothing supervised) and then moves is no spike of it.
    assert _of(evaluate("sft", {}, {"loss": [0.0, 0.0, 0.0, 0.0, 0.5]}), "loss.above_max") == []
