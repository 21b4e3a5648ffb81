"""Session 29: `sft.plateau` on a log that starts mid-run.

The loss-flat verdicts (`loss.stuck`, `sft.loss_not_falling`, `dpo.loss_not_falling`,
`loss.flat_finished_run`) say "a log that starts mid-run" and are info there: a loss flat
over a window cut from a longer run may have fallen before it. `sft.plateau` judged the
same thing from the training and validation losses together and warned "the model is not
learning" on such a window. It now reads where the log starts as they do.
"""

from __future__ import annotations

import math

from runwatch.health.trends import FlatSince

from .helpers import evaluate
from .helpers import of_rule as _of

LOSS = [3.30 - 0.001 * i + 0.02 * math.sin(1.9 * i) for i in range(10)]
VAL = [3.28 - 0.006 * i for i in range(10)]


def _plateau(first: int, stride: int = 5) -> dict[str, tuple[list[int], list[float]]]:
    """cases.py's trigger (a LoRA that barely moves the model), its first log at `first`
    plus one stride."""
    steps = [first + stride * (k + 1) for k in range(len(LOSS))]
    return {"loss": (steps, LOSS), "val/loss": (steps, VAL)}


def test_a_plateau_over_a_window_cut_from_a_run_is_an_info() -> None:
    (f,) = _of(evaluate("sft", {}, _plateau(0)), "sft.plateau")
    assert f.severity == "warning" and "mid_run" not in f.evidence
    assert f.message.endswith("validations): the model is not learning.")
    (f,) = _of(evaluate("sft", {}, _plateau(5000)), "sft.plateau")
    assert f.severity == "info" and f.evidence["mid_run"] == 1.0
    assert f.message.endswith("validations): the log starts mid-run (not at the run's "
                              "start), so the model may have learned before it.")


def test_a_log_a_stride_or_two_after_step_0_holds_the_run_s_start() -> None:
    # first logs at steps 10 and 15 with a stride of 5: within three strides of step 0
    for first in (5, 10):
        (f,) = _of(evaluate("sft", {}, _plateau(first)), "sft.plateau")
        assert f.severity == "warning", first
    (f,) = _of(evaluate("sft", {}, _plateau(15)), "sft.plateau")  # its first log at 20
    assert f.severity == "info"


def test_the_epochs_tell_a_window_whose_steps_start_at_one() -> None:
    series = _plateau(0)
    steps = series["loss"][0]
    # numbered from 5, but its first epoch is 0.48, logged every 0.03 epochs
    series["epoch"] = (steps, [round(0.48 + 0.03 * k, 2) for k in range(len(steps))])
    (f,) = _of(evaluate("sft", {}, series), "sft.plateau")
    assert f.severity == "info" and f.evidence["mid_run"] == 1.0
    # an epoch counter that starts at the run's start says nothing of the kind
    series["epoch"] = (steps, [round(0.03 * (k + 1), 2) for k in range(len(steps))])
    (f,) = _of(evaluate("sft", {}, series), "sft.plateau")
    assert f.severity == "warning"


def test_the_detector_in_batches_of_any_size() -> None:
    """Fed whole, and a step at a time through its saved state (as the store does): the
    same verdicts and the same evidence."""
    for first in (0, 5000):
        steps = _plateau(first)["loss"][0]
        whole = FlatSince(min_change=0.04, min_points=3, noise_z=1.0)
        whole.feed_a(steps, LOSS)
        verdicts = whole.feed(steps, VAL)
        one = FlatSince(min_change=0.04, min_points=3, noise_z=1.0)
        live: list[bool] = []
        for s, loss, val in zip(steps, LOSS, VAL, strict=True):
            one = FlatSince(min_change=0.04, min_points=3, noise_z=1.0, state=one.state())
            one.feed_a([s], [loss])
            live += one.feed([s], [val])
        assert live == verdicts and any(verdicts)
        assert one.held == whole.held
        assert bool(whole.held.get("mid_run")) == (first == 5000)


def test_every_loss_flat_verdict_takes_the_stride_the_same_way() -> None:
    """One stride estimate for "starts mid-run" (`starts_mid_run`): the span of the points
    logged so far over the gaps between them. A log whose first step is 30, logged every
    10 steps but for one gap of 200, is a window for none of the verdicts and for all of
    them once its first step is 400."""
    from runwatch.health.finished import WholeWindow
    from runwatch.health.progress import EpochStart, NoProgress, starts_mid_run

    assert not starts_mid_run(30, 30 + 10 * 39, 40, EpochStart())
    assert starts_mid_run(400, 400 + 10 * 39, 40, EpochStart())
    values = [2.0 + 0.01 * ((i * 7) % 5) for i in range(40)]
    for first, window in ((30, False), (400, True)):
        steps = [first + 10 * i + (200 if i >= 20 else 0) for i in range(40)]
        whole = NoProgress(min_change=0.05, warmup=30, bucket=5, window_info=True)
        whole.feed(steps, values)
        one = NoProgress(min_change=0.05, warmup=30, bucket=5, window_info=True)
        for s, v in zip(steps, values, strict=True):
            one = NoProgress(min_change=0.05, warmup=30, bucket=5, window_info=True,
                             state=one.state())
            one.feed([s], [v])
        assert whole.held["mid_run"] == one.held["mid_run"] == float(window)
        finished = WholeWindow()
        finished.feed(steps, values)
        held = finished.judge(0.05, 8, 0.0)
        assert held is not None and held["mid_run"] == float(window)
        flat = FlatSince(min_change=0.04, min_points=3)
        flat.feed_a(steps, values)
        flat.feed(steps[::5], [3.0] * 8)
        assert flat.held and bool(flat.held.get("mid_run")) == window


def test_the_plateau_s_stride_is_that_of_the_points_up_to_its_validation() -> None:
    # A log from step 110 every 10 steps, then one training point at step 5000: read
    # whole, each validation is judged with the training points logged up to it, as a
    # live run judges it, not with the later point that widens the stride.
    steps = [110 + 10 * k for k in range(10)]
    whole = FlatSince(min_change=0.04, min_points=3, noise_z=1.0)
    whole.feed_a([*steps, 5000], [*LOSS, LOSS[-1]])
    whole.feed(steps, VAL)
    one = FlatSince(min_change=0.04, min_points=3, noise_z=1.0)
    for s, loss, val in zip(steps, LOSS, VAL, strict=True):
        one = FlatSince(min_change=0.04, min_points=3, noise_z=1.0, state=one.state())
        one.feed_a([s], [loss])
        one.feed([s], [val])
    one = FlatSince(min_change=0.04, min_points=3, noise_z=1.0, state=one.state())
    one.feed_a([5000], [LOSS[-1]])
    assert whole.held == one.held and whole.held["mid_run"] == 1.0
    assert whole.train_span == [110.0, 5000.0, 11.0]  # and the live one, once judged on
    assert one.train_span == [110.0, 200.0, 10.0]  # its step 5000 waits in `waiting`
    assert one.waiting.points == [[5000.0, LOSS[-1]]]
