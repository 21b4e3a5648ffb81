"""Trend findings say what happened in plain words, and the noisy start of a run raises
nothing (issue 14: a healthy DPO run got "loss has not fallen: -45.7% since the start")."""

from __future__ import annotations

import math
import re

import pytest

from runwatch.health.engine import Engine

from .cases import CASES
from .helpers import at_end, evaluate, to_batch


def noisy_dpo_loss() -> list[float]:
    """From log 2 to 0.37 over 300 steps, with noise that hides the fall in the first 20."""
    return [0.35 + 0.343 * math.exp(-i / 120) + 0.03 * math.sin(1.7 * i) for i in range(300)]


def step_by_step(method: str, series: dict[str, list[float]]) -> list[str]:
    """Rule ids of every finding, feeding one point at a time as a live run does."""
    engine, seen = Engine(method), []
    for step in range(len(next(iter(series.values())))):
        batch = {k: ([step], [v[step]]) for k, v in series.items()}
        seen += [f.rule_id for f in engine.feed(to_batch(batch))]
    return seen


def test_noisy_start_of_a_healthy_dpo_run_raises_nothing() -> None:
    series = {"loss": noisy_dpo_loss()}
    assert "dpo.loss_not_falling" not in step_by_step("dpo", series)
    assert [f.rule_id for f in evaluate("dpo", {}, series)] == []


def test_a_loss_that_barely_falls_says_how_little() -> None:
    series = {"loss": [0.69 - 0.014 * i / 899 for i in range(900)]}
    (f,) = [f for f in evaluate("dpo", {}, series) if f.rule_id == "dpo.loss_not_falling"]
    assert f.status == "open"
    assert f.message == "loss fell only 2.0% over 897 steps (0.69 to 0.676)."


def test_a_rising_loss_says_it_rose() -> None:
    series = {"loss": [2.0 + 0.001 * i for i in range(100)]}
    (f,) = [f for f in evaluate("sft", {}, series) if f.rule_id == "sft.loss_not_falling"]
    assert f.message == "loss rose 4.7% over 97 steps (2.002 to 2.097)."


def test_a_resolved_finding_reports_what_held_not_what_ended_it() -> None:
    # Flat for 80 points, then the loss halves: the finding resolves, and its message
    # still describes the flat stretch it was raised for.
    series = {"loss": [1.0] * 80 + [1.0 - 0.5 * min(1.0, i / 10) for i in range(40)]}
    (f,) = [f for f in evaluate("sft", {}, series) if f.rule_id == "sft.loss_not_falling"]
    assert f.status == "resolved"
    assert f.message.startswith("loss did not change over "), f.message


SIGNED = re.compile(r"\b(moved|rose|fell|changed|fallen)( only)?:? [+\-−]\d|has not fallen")


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_messages_state_changes_in_words(rule_id: str) -> None:
    (method, settings, series), _ = CASES[rule_id]
    for f in evaluate(method, settings, series, at_end(rule_id)):
        assert "?" not in f.message and not SIGNED.search(f.message), f.message


def test_a_flat_reward_is_info_until_it_has_held_over_30_points() -> None:
    reward = [0.5 + 0.1 * math.sin(1.3 * i) for i in range(40)]
    short = [f for f in evaluate("grpo", {}, {"reward_mean": reward[:20]})
             if f.rule_id == "rl.no_progress"]
    assert [f.severity for f in short] == ["info"]
    (f,) = [f for f in evaluate("grpo", {}, {"reward_mean": reward})
            if f.rule_id == "rl.no_progress"]
    assert f.severity == "warning" and f.evidence["points"] >= 30
    assert re.fullmatch(r"reward_mean (rose only [\d.]+|fell|did not rise) over 40 logged "
                        r"points \(steps 0 to 39\): the median of its latest 20 points is "
                        r"[\d.]+, against [\d.]+ for its first 20, within its noise "
                        r"\(sd [\d.]+ per point\)\.", f.message), f.message


def test_a_stuck_loss_message_states_its_spread_as_the_condition_does() -> None:
    # loss.stuck's spread is 0.5%: the message said "never moving more than 0%" beside
    # "fell only 0.3%", contradicting itself.
    steps = list(range(100, 1201, 100))
    found = evaluate("sft", {}, {"loss": (steps, [2.30 - 0.001 * k for k in range(12)])})
    msgs = [f.message for f in found if f.rule_id == "loss.stuck"]
    assert msgs and all("more than 0.5% from" in m for m in msgs), msgs


def test_a_high_kl_message_counts_the_hits_of_its_window() -> None:
    # grpo.kl_ref_high said "above 1.0 on 96 of the last 8 logged steps": the count of
    # every hit since it opened, not its window's.
    found = evaluate("grpo", {}, {"kl": [2.0 + 0.01 * i for i in range(100)]})
    msgs = [f.message for f in found if f.rule_id == "grpo.kl_ref_high"]
    assert msgs and all("on 8 of the last 8" in m for m in msgs), msgs


def test_a_finding_of_k_in_a_row_counts_the_points_that_opened_it() -> None:
    # Fed one point a batch, as a live run logs: loss.zero opens on the 3rd zero in a row
    # and starts at the first; its count holds all three ("on 1 logged steps" before).
    engine, messages = Engine("sft"), []
    for step, value in enumerate([2.1, 1.7, 0.0, 0.0, 0.0, 0.0]):
        for f in engine.feed(to_batch({"loss": ([step], [value])})):
            if f.rule_id == "loss.zero":
                messages.append(f.message)
    assert messages == ["loss was exactly 0 on 3 logged steps from step 2.",
                        "loss was exactly 0 on 4 logged steps from step 2."]
    # Read at once, the same.
    (f,) = [f for f in evaluate("sft", {}, {"loss": [2.1, 1.7, 0.0, 0.0, 0.0, 0.0]})
            if f.rule_id == "loss.zero"]
    assert f.message == "loss was exactly 0 on 4 logged steps from step 2."


def test_a_finding_that_reopens_within_its_window_counts_only_its_own_hits() -> None:
    # grpo.no_signal (4 of 10) opens at step 3 and holds through step 12 (the hit at step 8
    # keeps it); it reopens at step 16 with the hit at 8 still in its window. That hit was
    # the first finding's: the second started at step 8, inside the first one's span, and
    # counted it again (R1's suspicion, session 11). Live (a point a batch) and at once.
    values = [1.0] * 4 + [0.5] * 4 + [1.0] + [0.5] * 5 + [1.0] * 3 + [0.5] * 12
    engine, live = Engine("grpo"), []
    for step, value in enumerate(values):
        live += [f for f in engine.feed(to_batch({"zero_variance_skip_ratio": ([step], [value])}))
                 if f.rule_id == "grpo.no_signal" and f.status == "resolved"]
    whole = [f for f in evaluate("grpo", {}, {"zero_variance_skip_ratio": values})
             if f.rule_id == "grpo.no_signal"]
    for found in (live, whole):
        assert [(f.first_step, f.last_step, f.evidence["count"]) for f in found] == [
            (0, 12, 5), (14, 24, 3)]


def test_a_spike_over_a_median_of_zero_names_no_multiple() -> None:
    # A gradient norm logged as exactly 0 on most steps, then 0.73: the spike stands
    # against a median of 0, of which it is no multiple. The message read "?× its
    # median of 0" (the ratio has no value) on the engine before.
    grad = [0.0] * 30 + [0.727] + [0.0] * 10
    (f,) = [f for f in evaluate("sft", {}, {"grad_norm": grad})
            if f.rule_id == "optim.grad_norm_spike"]
    assert f.message == "grad_norm spiked to 0.727, against a median of 0."


def test_a_spike_over_a_median_says_how_many_times_it() -> None:
    grad = [1.0 + 0.01 * math.sin(i) for i in range(30)] + [15.0] + [1.0] * 10
    (f,) = [f for f in evaluate("sft", {}, {"grad_norm": grad})
            if f.rule_id == "optim.grad_norm_spike"]
    assert re.fullmatch(r"grad_norm spiked to 15, 1[45]\.\d× its median of 1(\.\d+)?\.",
                        f.message), f.message


@pytest.mark.parametrize("live", [False, True])
def test_a_trend_names_the_steps_its_change_was_measured_over(live: bool) -> None:
    # A KL rising 0.01 a step for 300 steps read "kl rose 0.56 from step 4 to 299": the
    # change of the trend's 64-step window beside the steps since the finding opened (a
    # trial, session 35). Each trend finding now names its window's steps, and its change
    # is the KL's between them.
    kl = [0.01 * s for s in range(300)]
    if live:
        engine, found = Engine("grpo"), []
        for step, value in enumerate(kl):
            found += engine.feed(to_batch({"kl": ([step], [value])}))
        latest = {f.rule_id: f for f in found}  # each rule's last word
    else:
        latest = {f.rule_id: f for f in evaluate("grpo", {}, {"kl": kl})}
    trends = [f for f in latest.values()
              if f.rule_id in ("grpo.kl_ref_growing", "grpo.kl_ref_drift")]
    assert len(trends) == 2
    for f in trends:
        m = re.search(r"kl rose ([0-9.]+) from step (\d+) to (\d+)", f.message)
        assert m, f.message
        change, a, b = float(m[1]), int(m[2]), int(m[3])
        assert a < b and change == pytest.approx(kl[b] - kl[a], abs=0.01), f.message
