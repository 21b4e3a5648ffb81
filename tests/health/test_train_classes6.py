"""Session 14, after round 13 joined the train split: a trigger series and a near miss.

- A training loss flat over its first 10 logs of a sparsely logged run is told as info,
  and warns only once it holds over 30 logs: a loss flat over its first few hundred steps
  may yet fall (sft_gpt2_next_word_two_epochs_csv, healthy: flat over steps 50-950, then
  3.65 -> 3.05 over two epochs).
"""

from __future__ import annotations

import math

from .helpers import evaluate

STRIDE = 50  # one log every 50 steps


def _loss(flat_logs: int, n: int) -> tuple[list[int], list[float]]:
    """A batch loss logged every 50 steps: 3.37 at the first log, then 3.65 for
    `flat_logs` logs, then falling 0.6% a log to 3.05; a wobble of ±0.05 throughout."""
    values = [3.37] + [max(3.05, 3.65 * (1 - 0.006 * max(0, i - flat_logs)))
                       + 0.05 * math.sin(1.9 * i) for i in range(1, n)]
    return [STRIDE * (i + 1) for i in range(n)], values


def _severities(loss: tuple[list[int], list[float]]) -> list[str]:
    return [f.severity for f in evaluate("sft", {}, {"loss": loss})
            if f.rule_id == "sft.loss_not_falling"]


def test_a_loss_flat_over_its_first_500_steps_that_falls_later_gives_no_warning() -> None:
    # On the engine before, a warning at step 500 (10 logs, 200 steps: the sparse warm-up).
    assert "warning" not in _severities(_loss(19, 200))


def test_a_loss_flat_over_30_logs_warns() -> None:
    # Near miss: the same loss flat for 40 logs (2,000 steps) before it falls.
    assert "warning" in _severities(_loss(40, 200))
