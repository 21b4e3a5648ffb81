"""Session 35: `loss.doubled` reads where the loss stands from a median of 5 once the log
has 5 points past its first 3, so two bad batches in a row are no divergence.

A new-user trial (session 34) logged a supervised loss that falls smoothly from 2.8 to
0.8, with two batches in a row at 20 times the loss, and got a warning that the run had
diverged ("rose 698% over 61 steps"), beside the right info findings of the spike.
Buckets of 3 points are medians of 3: when both bad batches fall in one bucket (two
chances in three) they carry its median.
"""

from __future__ import annotations

import random

import pytest

from .helpers import evaluate, of_rule
from .test_engine import OneStep, split_feed, summary


def _falling(n: int = 100, seed: int = 1) -> list[float]:
    """A supervised loss falling from about 2.8 to 0.8, with a little batch noise."""
    rng = random.Random(seed)
    return [2.0 * 0.97 ** i + 0.8 + rng.uniform(-0.03, 0.03) for i in range(n)]


def _bad_batches(at: int, count: int, factor: float = 20.0) -> list[float]:
    loss = _falling()
    for i in range(at, at + count):
        loss[i] *= factor
    return loss


@pytest.mark.parametrize("at", [60, 61, 62])
def test_two_bad_batches_in_a_row_are_no_divergence(at: int) -> None:
    # On the engine before, a warning at step 62 for at=60 and 61 ("rose 698.3% over 61
    # steps ... the run diverged"): both batches fell in the bucket of points 60-62.
    found = evaluate("sft", {}, {"loss": _bad_batches(at, 2)})
    assert of_rule(found, "loss.doubled") == []
    # the spike itself is still told, as an info
    assert {f.severity for f in of_rule(found, "loss.above_max")} == {"info"}


def test_a_loss_that_jumps_and_stays_is_still_found_in_a_few_points() -> None:
    # Three bad batches in a row carry a median of 5: the loss stands there.
    loss = _falling()[:60] + [20.0] * 40
    (f,) = of_rule(evaluate("sft", {}, {"loss": loss}), "loss.doubled")
    assert f.severity == "warning"
    # the bucket of points 60-62 is where three of the latest five stand at 20
    assert f.first_step == 62
    assert f.message.endswith("to 20).")


def test_a_short_log_still_reads_the_latest_bucket() -> None:
    # Eight points: five never follow the first bucket, so the latest 3 are judged, as
    # the logs of a few points that loss.doubled exists for need (1.59 -> 5.48).
    loss = ([25, 50, 75, 100, 125, 150, 175, 200],
            [1.593, 1.406, 3.316, 6.437, 5.478, 4.857, 4.874, 4.604])
    (f,) = of_rule(evaluate("sft", {}, {"loss": loss}), "loss.doubled")
    assert f.first_step == 150 and "1.593 to 5.478" in f.message


@pytest.mark.parametrize("series", ["two", "stays"])
def test_the_latest_points_carry_across_batches(series: str) -> None:
    # The latest points are kept in the detector's state: a run fed a step at a time
    # reads as the same run fed whole.
    loss = _bad_batches(61, 2) if series == "two" else _falling()[:60] + [20.0] * 40
    whole = summary(evaluate("sft", {}, {"loss": loss}))
    live = summary(split_feed("sft", {}, {"loss": loss}, OneStep()))
    assert live == whole
    assert any(k[0] == "loss.doubled" for k in whole) == (series == "stays")
