"""Runs that log sparsely are judged on their own points (issue 14: an isolated spike in a
loss logged every 10 steps raised nothing; overfitting with eval every 100 steps showed
only after 6 evaluations, not after the 3 that already rose 50%, when the training
loss was too sparse for its buckets)."""

from __future__ import annotations

import orjson

from runwatch.health.engine import Engine

from .helpers import evaluate, to_batch


def test_an_isolated_spike_in_a_loss_logged_every_10_steps_is_reported() -> None:
    steps = list(range(0, 400, 10))
    loss = [2.0 - 0.02 * i for i in range(40)]
    loss[30] += 0.5
    (f,) = [f for f in evaluate("sft", {}, {"loss": (steps, loss)}) if f.rule_id == "loss.spike"]
    assert f.first_step == 300 and f.severity == "info"
    assert f.message.startswith("loss jumped from 1.42 to 1.9 (up 34%); its step-to-step")


def test_overfitting_shows_at_the_third_evaluation_of_a_sparse_log() -> None:
    # Training loss logged every 50 steps, evaluation every 200 (as a TRL run logs).
    steps = list(range(50, 650, 50))
    loss = [2.0 - 0.1 * i for i in range(12)]
    val = ([200, 400, 600], [1.0, 1.2, 1.5])
    (f,) = [f for f in evaluate("sft", {}, {"loss": (steps, loss), "val/loss": val})
            if f.rule_id == "sft.overfitting"]
    assert f.first_step == 200 and f.last_step == 600
    assert f.message.startswith("val/loss rose ") and "training loss fell" in f.message


def _entropy_every_10_steps(fall: float) -> tuple[list[int], list[float]]:
    """Entropy logged every 10 steps for 12 logs, falling by `fall` of its start."""
    steps = list(range(10, 130, 10))
    return steps, [1.0 - fall * i / 11 for i in range(12)]


def test_entropy_collapse_logged_every_10_steps_is_judged_on_a_window_in_steps() -> None:
    # 12 logged points: a window of 32 points would never fill; 32 steps are 8 points.
    (f,) = [f for f in evaluate("grpo", {}, {"entropy": _entropy_every_10_steps(0.9)})
            if f.rule_id == "grpo.entropy_collapse"]
    assert f.severity == "warning" and f.last_step <= 120
    assert f.message.startswith("entropy fell ")


def test_entropy_falling_a_third_every_10_steps_is_a_near_miss() -> None:
    found = evaluate("grpo", {}, {"entropy": _entropy_every_10_steps(0.3)})
    assert "grpo.entropy_collapse" not in {f.rule_id for f in found}


def test_a_strided_run_fed_a_step_at_a_time_matches_one_batch() -> None:
    # The stride is known only at the third logged step; the rules that wait for it
    # still see the first two points.
    steps, values = _entropy_every_10_steps(0.9)
    state = None
    found = {}
    for step, value in zip(steps, values, strict=True):
        engine = Engine("grpo", {}, state=state)
        for f in engine.feed(to_batch({"entropy": ([step], [value])})):
            found[f.rule_id] = (f.first_step, f.status)
        state = orjson.loads(orjson.dumps(engine.state()))
    whole = {f.rule_id: (f.first_step, f.status)
             for f in evaluate("grpo", {}, {"entropy": (steps, values)})}
    assert found == whole and "grpo.entropy_collapse" in whole
