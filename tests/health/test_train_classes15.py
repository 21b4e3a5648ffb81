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

import orjson

from runwatch.health.engine import Engine as HealthEngine
from runwatch.health.progress import EpochStart

from .helpers import evaluate, to_batch

RULE = "loss.flat_finished_run"
# never 1.3% below its start; eight points, the fewest on which the rule warns
FLAT = [2.31, 2.30, 2.32, 2.29, 2.30, 2.28, 2.31, 2.29]


def _finished(series: dict[str, Any]) -> list[tuple[str, float]]:
    return [(f.severity, f.evidence["mid_run"])
            for f in evaluate("sft", {}, series, finished=True) if f.rule_id == RULE]


def _epochs(first: float, step: float, n: int = 8) -> list[float]:
    return [round(first + step * i, 2) for i in range(n)]


def test_a_flat_loss_in_a_log_cut_mid_run_by_its_epochs_is_an_info() -> None:
    # Trigger: steps 0-7, epochs 0.48-0.69 (a README's console window of a LLaMA-Factory
    # run, its lines numbered as they were pasted). On the engine before, a warning.
    assert _finished({"loss": FLAT, "epoch": _epochs(0.48, 0.03)}) == [("info", 1.0)]
    # Epochs a trainer rounded to 2 decimals, the same at every line: a stride of 0.
    assert _finished({"loss": FLAT, "epoch": [0.16] * 8}) == [("info", 1.0)]


def test_a_flat_loss_logged_from_the_runs_first_epoch_still_warns() -> None:
    # Near misses: epochs from 0.03 (every 10 steps of a 300-step epoch); from 0.1 by 0.1
    # (past 0.05, but within 3 strides); from 0.04 by 0.01 (past 3 strides, but within
    # 0.05 of an epoch); eight epochs logged once each; a hand-written loop's epoch counter
    # that starts at 1.
    for epochs in (_epochs(0.03, 0.03), _epochs(0.1, 0.1), _epochs(0.04, 0.01),
                   [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0] * 8):
        assert _finished({"loss": FLAT, "epoch": epochs}) == [("warning", 0.0)], epochs
    # Trigger beside them: from 0.06 by 0.01, past both.
    assert _finished({"loss": FLAT, "epoch": _epochs(0.06, 0.01)}) == [("info", 1.0)]


def _batches(parts: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """The finished run's flat-loss verdicts when its points come in several batches, the
    engine's state saved and read back between them, as the store does."""
    state: dict[str, Any] | None = None
    found = []
    for i, part in enumerate(parts):
        engine = HealthEngine("sft", state=state, finished=i == len(parts) - 1)
        found += [f for f in engine.feed(to_batch(part)) if f.rule_id == RULE]
        state = orjson.loads(orjson.dumps(engine.state()))
    return [(f.severity, f.evidence["mid_run"]) for f in found[-1:]]


def test_where_the_log_starts_is_kept_across_batches_and_read_from_any_of_them() -> None:
    steps, epochs = list(range(8)), _epochs(0.48, 0.03)
    # the window in two batches, the engine rebuilt from its saved state between them
    assert _batches([{"loss": (steps[:3], FLAT[:3]), "epoch": (steps[:3], epochs[:3])},
                     {"loss": (steps[3:], FLAT[3:]), "epoch": (steps[3:], epochs[3:])}]
                    ) == [("info", 1.0)]
    # the epochs logged in a batch of their own, before the losses
    assert _batches([{"epoch": (steps, epochs)}, {"loss": (steps, FLAT)}]) == [("info", 1.0)]
    # a run logged from its start whose epochs start over later (a second stage, a
    # resumed attempt): its start is what counts
    later = list(range(8, 16))
    assert _batches([{"loss": (steps, FLAT), "epoch": (steps, _epochs(0.03, 0.03))},
                     {"loss": (later, FLAT), "epoch": (later, _epochs(0.5, 0.1))}]
                    ) == [("warning", 0.0)]


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


def test_epoch_start_reads_the_first_epochs_once_each() -> None:
    # An evaluation's row repeats its step's epoch, and a later epoch below an earlier one
    # (a restart) is no part of the start: the stride of 0.03 stands.
    start = EpochStart()
    start.feed([0, 1, 1, 2], [0.03, 0.06, 0.06, 0.09])
    start.feed([3, 4], [0.01, 0.12])
    assert (start.first, start.window()) == ([0.03, 0.06, 0.09, 0.12], False)
    again = EpochStart(start.state())
    again.feed([5], [0.9])  # past its first PROBE epochs: nothing changes
    assert again.first == [0.03, 0.06, 0.09, 0.12]
    # an evaluation's row in the batch after its step's own row: read once
    split = EpochStart()
    split.feed([0, 1], [0.03, 0.06])
    split = EpochStart(split.state())
    split.feed([1, 2], [0.06, 0.09])
    assert split.first == [0.03, 0.06, 0.09]
    assert not EpochStart().window()  # no epoch logged: nothing to say
