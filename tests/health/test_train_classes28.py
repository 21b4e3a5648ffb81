"""Session 28: what round 25's runs, spent to the train split, showed.

- A 14-step warm-up window whose loss falls at every step, 1.5% in all
  (other_llm_from_scratch_aaron_14steps, healthy): `loss.flat_finished_run` warned. A loss
  that fell at each of its latest five points or more is still falling: info.
- A flat window of a long pretraining run, from step 7,400, logged to two decimals
  (other_transformerxl_wt103_attn2_flat_ppl1670_issue, healthy): `loss.stuck` warned. A
  loss-flat verdict on a log that starts mid-run is info, as `loss.flat_finished_run`'s is.
- A per-epoch loss that spikes to 4.7 times its neighbours and comes back
  (other_diffusion_lm_sigmoid05_loss_spikes): `loss.spike_isolated`.
- A loss logged as `cross-entropy-loss` (other_pithtrain_moe_15step_lr1e6_issue) was read
  by no rule.
- Two LSTM language models whose per-epoch loss turns up 0.9% and 1.7% from its low over
  their last epochs (other_bilstm_cn_lm_run1_100ep_upturn, other_bilstm_cn_lm_run2_ep71_270):
  `loss.upturn`, an info.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine as SqlEngine

from runwatch.health.engine import Engine
from runwatch.health.excursions import Isolated, Upturn
from runwatch.metrics.aliases import health_name

from .cases import settled
from .helpers import corpus_columns as _columns
from .helpers import evaluate, to_batch
from .helpers import of_rule as _of
from .test_store import index, listing, write_run


def _finished(series: dict[str, object], method: str = "sft") -> list:
    return Engine(method, finished=True).feed(to_batch(series))


def test_a_loss_still_falling_at_its_end_is_an_info() -> None:
    run = "other_llm_from_scratch_aaron_14steps"
    (f,) = _of(_finished({"loss": _columns(run, "loss")}), "loss.flat_finished_run")
    assert f.severity == "info" and f.evidence["still_falling"] == 13
    assert f.message == ("Over its whole log of 14 points, loss never fell more than 1.5% "
                         "below where it started (10.87 → lowest 10.71, last 10.71). It is "
                         "still falling: it fell at each of its latest 13 points.")
    # The same loss with its last point back up: the verdict warns, as before.
    steps, values = _columns(run, "loss")
    (f,) = _of(_finished({"loss": (steps, [*values[:-1], values[-3]])}),
               "loss.flat_finished_run")
    assert f.severity == "warning" and not f.evidence["still_falling"]
    assert "still falling" not in f.message


def test_four_falls_in_a_row_are_not_enough() -> None:
    flat = [2.31, 2.30, 2.32, 2.29, 2.30, 2.33, 2.31, 2.34, 2.32, 2.31, 2.30, 2.29]
    (f,) = _of(_finished({"loss": flat}), "loss.flat_finished_run")
    assert f.severity == "warning" and f.evidence["still_falling"] == 0
    (f,) = _of(_finished({"loss": [*flat, 2.27]}), "loss.flat_finished_run")
    assert f.severity == "info" and f.evidence["still_falling"] == 5


def test_a_flat_window_that_starts_mid_run_is_an_info() -> None:
    run = "other_transformerxl_wt103_attn2_flat_ppl1670_issue"
    loss = _columns(run, "loss")
    assert loss[0][0] == 7400
    (f,) = _of(evaluate("sft", {}, {"loss": loss}), "loss.stuck")
    assert f.severity == "info" and f.evidence["mid_run"] == 1.0
    assert "in a log that starts mid-run" in f.message
    # The same values from step 0: a loss that never moved from where the run started.
    from_zero = ([s - 7400 for s in loss[0]], loss[1])
    (f,) = _of(evaluate("sft", {}, {"loss": from_zero}), "loss.stuck")
    assert f.severity == "warning" and not f.evidence["mid_run"]
    assert "mid-run" not in f.message


@pytest.mark.parametrize("rule", ["sft.loss_not_falling", "dpo.loss_not_falling"])
def test_the_other_loss_flat_rules_say_a_window_too(rule: str) -> None:
    method = rule.split(".")[0]
    values = [2.0 + 0.01 * ((i * 7) % 5) for i in range(40)]
    found = evaluate(method, {}, {"loss": ([1000 + 10 * i for i in range(40)], values)})
    assert {f.severity for f in _of(found, rule)} == {"info"}
    found = evaluate(method, {}, {"loss": ([10 * i for i in range(40)], values)})
    assert "warning" in {f.severity for f in _of(found, rule)}


def test_an_isolated_spike_is_found_where_it_comes_back() -> None:
    run = "other_diffusion_lm_sigmoid05_loss_spikes"
    (f,) = _of(evaluate("sft", {}, {"loss": _columns(run, "loss")}), "loss.spike_isolated")
    assert (f.severity, f.first_step) == ("info", 10)
    assert f.evidence["ratio"] == pytest.approx(17.7679 / 3.8431)
    assert f.message == ("loss jumped to 17.77 at step 10, 4.6× the median of the points "
                         "before it (3.843), and came back to 5.024 at the next point.")


def _whole_and_live(kind: type[Isolated] | type[Upturn], values: list[float],
                    ) -> tuple[Any, list[bool], Any, list[bool]]:
    """A detector fed `values` whole, and one fed them a point at a time through its saved
    state (as the store does), with their verdicts."""
    steps = list(range(len(values)))
    whole = kind()
    verdicts = whole.feed(values, steps)
    one = kind()
    live: list[bool] = []
    for s, v in zip(steps, values, strict=True):
        one = kind(state=one.state())
        live += one.feed([v], [s])
    return whole, verdicts, one, live


def test_the_isolated_spike_detector_in_batches_of_any_size() -> None:
    values = [4.0, 3.9, 3.8, 3.9, 12.0, 3.7, 3.6, 3.5, 11.0, 9.0, 3.4, 3.3]
    whole, hits_whole, _, hits_one = _whole_and_live(Isolated, values)
    assert hits_whole == hits_one
    assert whole.spike == [4.0, 12.0, 3.9, 3.7]  # the second jump stayed up: no spike
    # no hit before three points of history, nor a rise under 1% of the first value
    assert not any(Isolated().feed([1.0, 5.0, 1.0], [0, 1, 2]))
    assert not any(Isolated().feed([1.0, 0.001, 0.001, 0.001, 0.004, 0.001],
                                   list(range(6))))


@pytest.mark.parametrize(("key", "role"), [
    ("cross-entropy-loss", "loss"), ("ce_loss", "loss"), ("train/xent_loss", "loss"),
    ("nll_loss", "loss"), ("cross_entropy", "loss"), ("val_cross_entropy_loss", "val/loss"),
    ("eval/ce_loss", "val/loss"),
    # an entropy's own loss term, and a router's, stay unread as the model's loss
    ("entropy_loss", "entropy_loss"), ("load-balance-loss", "load-balance-loss"),
])
def test_a_cross_entropy_under_its_own_name_is_the_loss(key: str, role: str) -> None:
    assert health_name(key)[0] == role


def test_the_spike_is_one_incident_with_the_other_spike_rules(engine: SqlEngine,
                                                              tmp_path: Path) -> None:
    # Found at the point after it, the finding still starts at the spike's step, so the
    # listing merges it with loss.spike's and loss.above_max's findings of that step.
    runs = tmp_path / "runs"
    values = [2.0 - 0.01 * i + 0.02 * math.sin(i) for i in range(30)]
    values[20] = 8.0
    write_run(runs, "r", "sft", [{"step": i, "loss": v} for i, v in enumerate(values)])
    index(engine, runs)
    (item,) = [x for x in listing(engine, "r") if x["first_step"] == 20]
    merged = {m["rule_id"] for m in item["evidence"]["incident"]}
    assert {"loss.spike", "loss.spike_isolated", "loss.above_max"} <= merged


@pytest.mark.parametrize(("run", "low_step", "points"), [
    ("other_bilstm_cn_lm_run1_100ep_upturn", 85, 16),
    ("other_bilstm_cn_lm_run2_ep71_270", 261, 10),
])
def test_a_loss_that_turns_up_by_a_percent_is_an_info(run: str, low_step: int,
                                                      points: int) -> None:
    found = _of(evaluate("sft", {}, {"loss": _columns(run, "loss")}), "loss.upturn")
    assert found and {f.severity for f in found} == {"info"}
    f = found[-1]
    assert (f.evidence["low_step"], f.evidence["points"]) == (low_step, points)
    assert f.message.startswith("loss turned back up from its lowest, ")
    assert "higher" in f.message
    # The same run up to its low: settled, nothing to say.
    steps, values = _columns(run, "loss")
    cut = steps.index(low_step) + 1
    assert not _of(evaluate("sft", {}, {"loss": (steps[:cut], values[:cut])}), "loss.upturn")


def test_the_upturn_detector_in_batches_of_any_size() -> None:
    values = settled() + [1.0 + 0.001 * i + 0.0004 * (-1) ** i for i in range(1, 17)]
    whole, verdicts, one, live = _whole_and_live(Upturn, values)
    assert verdicts == live and verdicts[-1]
    assert whole.held == one.held


def test_two_high_points_in_a_row_are_no_isolated_spike() -> None:
    # A stretch of high values is not a spike that came back: neither its first point
    # (the next is not back) nor its second (the point before it was as high).
    assert not any(Isolated().feed([1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 1.0, 1.0], list(range(8))))
    assert not any(Isolated().feed([1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 1.0], list(range(8))))
    whole, hits, _, live = _whole_and_live(Isolated, [1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 1.0,
                                                      1.0, 6.0, 1.0])
    assert hits == live and whole.spike == [8.0, 6.0, 1.0, 1.0]


def test_a_loss_at_the_logger_s_last_digit_does_not_turn_up() -> None:
    fall = [2.0 * 0.8 ** i for i in range(20)]
    # a memorised set's loss logged to 4 decimals, one step of the last digit up
    memorised = [round(v, 4) for v in fall] + [0.001] * 5 + [0.0011] * 20
    # a plateau logged to 2 decimals, one step up
    plateau = [round(0.5 + v, 2) for v in fall] + [0.5] * 20 + [0.51] * 20
    for values in (memorised, plateau):
        assert not _of(evaluate("sft", {}, {"loss": values}), "loss.upturn")


def test_a_drift_of_hundredths_of_a_percent_is_not_still_falling() -> None:
    # A learning rate too small to move the model: the loss falls at every step, by
    # 0.04% in all, which stays a warning (the run trained without learning).
    (f,) = _of(_finished({"loss": [2.3026 - 0.00005 * i for i in range(20)]}),
               "loss.flat_finished_run")
    assert f.severity == "warning" and not f.evidence["still_falling"]


def test_a_log_that_starts_a_stride_or_two_after_step_0_is_no_window() -> None:
    # Logged every 10 steps from step 30: three strides, the run's own start.
    values = [2.0 + 0.01 * ((i * 7) % 5) for i in range(40)]
    found = evaluate("sft", {}, {"loss": ([30 + 10 * i for i in range(40)], values)})
    assert "warning" in {f.severity for f in _of(found, "sft.loss_not_falling")}
    assert not any(f.evidence.get("mid_run") for f in _of(found, "sft.loss_not_falling"))
