"""Runs that log sparsely are judged on their own points (issue 14: an isolated spike in a
loss logged every 10 steps raised nothing; overfitting with eval every 100 steps showed
only after 6 evaluations, not after the 3 that already rose 50%, when the training
loss was too sparse for its buckets)."""

from __future__ import annotations

from .helpers import evaluate


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
