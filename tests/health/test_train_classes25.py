"""Session 25: what round 19's runs and their siblings, spent to the train split, showed.

- A GPT-2 XL fine-tuned on a small text, evaluated twice: its validation loss rises from
  3.75 to 3.90 while standing at 4-11 times its training loss
  (other_nanogpt_gpt2xl_shakespeare_finetune_overfit_issue). `val.gap_rising` reads two
  validations beside the training loss, where sft.overfitting needs six.
- A model card's eval loss of exactly 4.4097 at every one of five epochs
  (sft_distilgpt2_tamil_card_eval_loss_frozen): `val.loss_frozen`.
- An instruction SFT whose loss sits at 0.0001-0.001 from its first epoch on
  (sft_scratch959m_alpaca_loss_collapse_zero): `loss.near_zero`.
- A validation loss converged near 0.03 that wanders by a tenth of itself
  (sft_serverlog_trl_sft_eval_plateau_ckpt2000, healthy): sft.overfitting asks the rise
  to pass 1.5 standard errors of the validation loss's own noise.
"""

from __future__ import annotations

import json

from runwatch.health.against import GapRising

from .helpers import corpus_columns as _columns
from .helpers import evaluate
from .helpers import of_rule as _of


def test_two_validations_rising_far_above_the_training_loss_are_overfitting() -> None:
    run = "other_nanogpt_gpt2xl_shakespeare_finetune_overfit_issue"
    val = _columns(run, "val_loss")
    assert len(val[0]) == 2  # too few for a trend over validations
    found = evaluate("sft", {}, {"loss": _columns(run, "loss"), "val/loss": val})
    (f,) = _of(found, "val.gap_rising")
    assert (f.first_step, f.severity) == (1000, "warning")
    # against the median of the three training points since the validation before
    assert "3.899" in f.message and "(0.339)" in f.message
    assert not _of(found, "sft.overfitting")


def test_a_validation_loss_that_falls_is_no_gap_however_wide() -> None:
    # The same run with its second validation lower than the first: a wide gap alone is
    # the data's (a held-out set of another kind), not a model moving away from it.
    run = "other_nanogpt_gpt2xl_shakespeare_finetune_overfit_issue"
    found = evaluate("sft", {}, {"loss": _columns(run, "loss"),
                                 "val/loss": ([800, 1000], [3.8986, 3.7535])})
    assert not _of(found, "val.gap_rising")
    # and a rise under 1% of the validation before it is no rise
    found = evaluate("sft", {}, {"loss": _columns(run, "loss"),
                                 "val/loss": ([800, 1000], [3.7535, 3.79])})
    assert not _of(found, "val.gap_rising")


def test_the_gap_reads_the_training_loss_logged_before_each_validation() -> None:
    # Validations that come before the training points they are set against: the first
    # validation has no training loss yet, and a training loss logged after a
    # validation does not count for it.
    det = GapRising(ratio=3.0, min_rel=0.01)
    det.feed([100], [4.0])
    det.feed_a([150], [1.0])
    assert det.feed([200], [3.9]) == [False]  # fell
    det.feed_a([250], [2.0])
    assert det.feed([300], [4.2]) == [False]  # 2.1 times the training loss at 250
    det.feed_a([350], [1.0])
    assert det.feed([400], [4.5]) == [True]
    assert det.held == {"from": 4.2, "to": 4.5, "train": 1.0, "times": 4.5}


def test_a_diverging_run_is_no_gap() -> None:
    # A LoRA at lr 2e-4 whose training loss climbs 2.15 -> 10.97 as its validation loss
    # goes 1.86 -> 10.82 (sft_llama32_3b_mlx_lora_lr2e4_loss_blowup): the training
    # points' median, 2.6, is not where the training loss stands; loss.diverged says it.
    found = evaluate("sft", {}, {"loss": ([5, 10, 15, 20], [2.148, 2.609, 4.104, 10.965]),
                                 "val/loss": ([1, 20], [1.858, 10.821])})
    assert not _of(found, "val.gap_rising") and _of(found, "loss.diverged")


def test_a_training_loss_logged_after_a_validation_waits_for_the_next() -> None:
    # Both series in one batch: the 0.5 at step 350 comes after the validation at 300.
    det = GapRising(ratio=3.0, min_rel=0.01)
    det.feed([100], [4.0])
    det.feed_a([250, 350], [2.0, 0.5])
    assert det.feed([300], [4.2]) == [False]  # 2.1 times the 2.0 of step 250
    assert det.feed([400], [4.5]) == [True]  # 9 times the 0.5 since


def test_one_easy_batch_does_not_make_a_gap() -> None:
    # The training points since the validation before stand near 2; the latest, 0.1,
    # is one easy batch: the gap is read against their median.
    det = GapRising(ratio=3.0, min_rel=0.01)
    det.feed([0], [4.0])
    det.feed_a([10, 20, 30], [2.0, 2.1, 0.1])
    assert det.feed([30], [4.5]) == [False]
    det.feed_a([40, 50, 60], [1.2, 1.0, 1.1])
    assert det.feed([60], [4.6]) == [True]
    assert det.held["train"] == 1.1


def test_each_finding_of_a_log_read_whole_reports_its_own_rise() -> None:
    # Two rises far above a training loss of 1, the second after the first closed: read
    # in one batch (an imported file), each finding states its own validations.
    val = [2.9, 3.0, 3.5, 3.4, 3.3, 3.2, 3.1, 4.5]
    found = _of(evaluate("sft", {}, {"loss": ([50 * i for i in range(1, 17)], [1.0] * 16),
                                     "val/loss": ([100 * i for i in range(1, 9)], val)}),
                "val.gap_rising")
    assert [f.first_step for f in found] == [200, 800]
    assert "from 3 to 3.5" in found[0].message
    assert "from 3.1 to 4.5" in found[1].message


def test_the_gap_detector_survives_a_state_round_trip() -> None:
    det = GapRising(ratio=3.0, min_rel=0.01)
    det.feed_a([10, 20], [1.2, 0.9])
    det.feed([20], [3.0])
    again = GapRising(ratio=3.0, min_rel=0.01, state=json.loads(json.dumps(det.state())))
    again.feed_a([30], [0.8])
    assert again.feed([40], [3.1]) == [True]


def test_an_eval_loss_repeated_to_the_last_digit_is_frozen() -> None:
    run = "sft_distilgpt2_tamil_card_eval_loss_frozen"
    steps, val = _columns(run, "eval_loss")
    assert len(set(val)) == 1 and len(val) == 5
    found = evaluate("sft", {}, {"loss": _columns(run, "loss"), "val/loss": (steps, val)})
    (f,) = _of(found, "val.loss_frozen")
    assert (f.first_step, f.severity) == (456, "info")
    # the same log with its last validation moved in its fourth decimal: still found at
    # the fourth, three repeats of the same value
    moved = (steps, [*val[:4], 4.4096])
    assert _of(evaluate("sft", {}, {"val/loss": moved}), "val.loss_frozen")
    # two repeats are not enough
    assert not _of(evaluate("sft", {}, {"val/loss": (steps, [4.52, *val[1:4], 4.4096])}),
                   "val.loss_frozen")


def test_a_loss_at_a_ten_thousandth_from_its_first_epoch_is_near_zero() -> None:
    run = "sft_scratch959m_alpaca_loss_collapse_zero"
    steps, loss = _columns(run, "loss")
    assert min(loss) == 0.0 and sum(v == 0.0 for v in loss) == 1  # not loss.zero's
    found = evaluate("sft", {}, {"loss": (steps, loss)})
    assert not _of(found, "loss.zero")
    (f,) = _of(found, "loss.near_zero")
    assert f.severity == "info" and f.first_step <= 180


def test_exact_zeros_are_left_to_loss_zero() -> None:
    found = evaluate("sft", {}, {"loss": [1.2, 0.5, *[0.0] * 12]})
    assert _of(found, "loss.zero") and not _of(found, "loss.near_zero")


def test_a_converged_validation_loss_wandering_in_its_noise_is_no_overfitting() -> None:
    run = "sft_serverlog_trl_sft_eval_plateau_ckpt2000"
    series = {"loss": _columns(run, "loss"), "val/loss": _columns(run, "eval_loss")}
    assert not _of(evaluate("sft", {}, series), "sft.overfitting")
    # A noisy rise of a sixth over the same six validations clears 1.5 standard errors
    # of its noise (not 2): found.
    steps, val = series["val/loss"]
    risen = [*val[:14], 0.0315, 0.0295, 0.0335, 0.0315, 0.0355, 0.0335]
    found = _of(evaluate("sft", {}, {"loss": series["loss"], "val/loss": (steps, risen)}),
                "sft.overfitting")
    assert found and found[0].severity == "warning"
