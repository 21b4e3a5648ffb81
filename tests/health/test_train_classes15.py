"""Session 19 (E23): a log that starts in the middle of its run by its own `epoch`.

The verdicts that need the run's start in the log (`loss.flat_finished_run`, judged on a
finished run's whole log, and `rl.no_progress`'s warning) hold back on a log whose first
step lies far past step 0. A log whose steps were numbered from where it was cut (a console
table pasted into an issue, a CSV whose rows are its only steps) shows its place in the run
only by its epochs: on train, `sft_crystal_llama2_7b_nan_gradnorm_issue` is six lines pasted
from epoch 1.95-1.97 of a run, numbered 1-6. `EpochStart` reads it: a first epoch that is a
fraction, past 0.05 of an epoch and past 3 of the log's epoch strides. On such a log, and on
one that starts far from step 0, `loss.flat_finished_run` is an info that says the log
starts mid-run (it was silent on the latter before): the window is flat, but the run may
have learned before it.
"""

from __future__ import annotations

import math
from typing import Any

from runwatch.health.progress import EpochStart

from .helpers import evaluate

RULE = "loss.flat_finished_run"
FLAT = [2.31, 2.30, 2.32, 2.29, 2.30, 2.28]  # never 1.3% below its start


def _finished(series: dict[str, Any]) -> list[tuple[str, float]]:
    return [(f.severity, f.evidence["mid_run"])
            for f in evaluate("sft", {}, series, finished=True) if f.rule_id == RULE]


def _epochs(first: float, step: float, n: int = 6) -> list[float]:
    return [round(first + step * i, 2) for i in range(n)]


def test_a_flat_loss_in_a_log_cut_mid_run_by_its_epochs_is_an_info() -> None:
    # Trigger: steps 0-5, epochs 0.48-0.63 (a README's console window of a LLaMA-Factory
    # run, its lines numbered as they were pasted). On the engine before, a warning.
    assert _finished({"loss": FLAT, "epoch": _epochs(0.48, 0.03)}) == [("info", 1.0)]
    # Epochs a trainer rounded to 2 decimals, the same at every line: a stride of 0.
    assert _finished({"loss": FLAT, "epoch": [0.16] * 6}) == [("info", 1.0)]


def test_a_flat_loss_logged_from_the_runs_first_epoch_still_warns() -> None:
    # Near misses: epochs from 0.03 (every 10 steps of a 300-step epoch); six epochs
    # logged once each; a hand-written loop's epoch counter that starts at 1.
    for epochs in (_epochs(0.03, 0.03), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [1.0] * 6):
        assert _finished({"loss": FLAT, "epoch": epochs}) == [("warning", 0.0)], epochs


def _flat(n: int) -> list[float]:
    """A reward flat at 0.5 with a wobble of ±0.1 a step."""
    return [0.5 + 0.1 * math.sin(1.7 * i) for i in range(n)]


def _no_progress(series: dict[str, Any]) -> list[str]:
    return [f.severity for f in evaluate("grpo", {}, series) if f.rule_id == "rl.no_progress"]


def test_a_flat_reward_in_a_log_cut_mid_run_by_its_epochs_is_info() -> None:
    # Trigger: 60 steps numbered from 1, epochs from 0.5 by 0.01.
    epochs = [0.5 + 0.01 * i for i in range(60)]
    assert _no_progress({"reward_mean": _flat(60), "epoch": epochs}) == ["info"]
    # Near miss: the same reward from epoch 0.01.
    epochs = [0.01 * (i + 1) for i in range(60)]
    assert _no_progress({"reward_mean": _flat(60), "epoch": epochs}) == ["warning"]


def test_epoch_start_reads_each_step_once_and_keeps_its_state() -> None:
    # An evaluation's row repeats its step's epoch: read once, the stride stays 0.03.
    start = EpochStart()
    start.feed([0, 1, 1, 2], [0.03, 0.06, 0.06, 0.09])
    assert (start.count, start.window()) == (3, False)
    again = EpochStart(start.state())
    again.feed([3], [0.12])
    assert (again.first, again.last, again.count) == (0.03, 0.12, 4)
    assert not EpochStart().window()  # no epoch logged: nothing to say
