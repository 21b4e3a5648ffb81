"""A trend's message states the change between its window's first and last levels, and
names metrics as the run logs them.

The rule decides on the Theil-Sen change over the window's median level; messages said
that number as a percentage, so an entropy from 0.6 to 0.058 "fell 107.2%", one that
halved "fell 62.7%", and a loss that climbed 45% "rose 33.1%". A validation loss that fell
10% and came back (a V) "stayed flat". A TRL run's proxy-hacking finding named
`reward_mean`, a key the run never logged. Only the words changed: which findings fire,
and when, is the same.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest

from runwatch.health.engine import Engine
from runwatch.health.findings import Finding, level_words, range_words, render
from runwatch.health.rules import BY_ID
from runwatch.health.wording import message_words

from .helpers import evaluate, to_batch


def wobble(i: int, size: float) -> float:
    """Small deterministic noise."""
    return size * math.sin(1.7 * i) * math.cos(0.3 * i)


def collapsing_entropy(end: float) -> list[float]:
    """0.6 for 40 steps, then falling in a straight line to `end` at step 99."""
    return [(0.6 if i < 40 else 0.6 - (0.6 - end) * (i - 40) / 59) + wobble(i, 0.005)
            for i in range(100)]


def climbing_loss() -> list[float]:
    """An SFT loss flat at 1.0 for 40 points, then climbing 45% over its last 32."""
    return [(1.0 if i < 40 else 1.0 + 0.45 * (i - 40) / 31) + wobble(i, 0.005)
            for i in range(72)]


def live(method: str, series: dict[str, list[float]]) -> list[Finding]:
    """Every finding reported while the series is fed one point a batch."""
    engine, found = Engine(method), []
    for step in range(len(next(iter(series.values())))):
        found += engine.feed(to_batch({k: ([step], [v[step]]) for k, v in series.items()}))
    return found


def last_of(found: list[Finding], rule_id: str) -> Finding:
    mine = [f for f in found if f.rule_id == rule_id]
    assert mine, [f.rule_id for f in found]
    return mine[-1]


def steps(message: str) -> tuple[int, int]:
    m = re.search(r"from step (\d+) to (\d+)", message)
    assert m, message
    return int(m[1]), int(m[2])


def percent(message: str, way: str) -> float:
    m = re.search(rf"\b{way} ([0-9.]+)%", message)
    assert m, message
    return float(m[1])


@pytest.mark.parametrize("reading", ["whole", "live"])
@pytest.mark.parametrize(("end", "rule_id"), [(0.06, "grpo.entropy_collapse"),
                                              (0.3, "grpo.entropy_falling")])
def test_a_falling_entropy_falls_no_more_than_all_of_it(reading: str, end: float,
                                                         rule_id: str) -> None:
    series = {"entropy": collapsing_entropy(end)}
    found = evaluate("grpo", {}, series) if reading == "whole" else live("grpo", series)
    f = last_of(found, rule_id)
    fell, (a, b) = percent(f.message, "fell"), steps(f.message)
    # a share of where the window started, which the series shows at the steps named
    assert fell <= 100.0, f.message
    ent = series["entropy"]
    assert fell == pytest.approx(100 * (1 - ent[b] / ent[a]), abs=3.0), f.message
    levels = f.evidence["levels"]
    assert (levels["from_step"], levels["to_step"]) == (a, b)
    assert fell == pytest.approx(100 * (1 - levels["to"] / levels["from"]), abs=0.06)


def test_a_climbing_loss_rises_by_its_own_numbers() -> None:
    series = {"loss": climbing_loss()}
    f = last_of(evaluate("sft", {}, series), "loss.climbing")
    rose, (a, b) = percent(f.message, "rose"), steps(f.message)
    # the window spans the climb: the loss at its steps says the same
    loss = series["loss"]
    assert rose == pytest.approx(100 * (loss[b] / loss[a] - 1), abs=1.5), f.message
    assert rose > 35, f.message
    levels = f.evidence["levels"]
    assert rose == pytest.approx(100 * (levels["to"] / levels["from"] - 1), abs=0.06)


def test_a_trend_keeps_firing_as_before() -> None:
    # message-only: the rule's decision still reads the change over the median level
    f = last_of(evaluate("grpo", {}, {"entropy": collapsing_entropy(0.06)}),
                "grpo.entropy_collapse")
    assert f.evidence["effect"] < -1.0  # the decision's number, a share of the median
    assert (f.severity, f.status) == ("warning", "open")


def test_a_negative_series_states_its_change_as_a_difference() -> None:
    # a share of a level at or below 0 says nothing ("fell 60%" of a log-probability)
    assert level_words({"from": -0.5, "to": -0.8}, True) == "fell 0.3"
    assert level_words({"from": -0.01, "to": 0.3}, True) == "rose 0.31"
    assert level_words({"from": 0.6, "to": 0.0}, True) == "fell 100.0%"
    assert level_words({"from": 0.5, "to": 0.6}, False) == "rose 0.1"
    assert level_words(None, True) is None


def v_shaped_validation() -> dict[str, tuple[list[int], list[float]]]:
    """A training loss that falls throughout; a validation loss every 20 steps that falls
    10%, rises back and falls again."""
    steps = list(range(400))
    train = [1.0 * math.exp(-s / 80) + 0.7 + wobble(s, 0.005) for s in steps]
    val_steps = list(range(19, 400, 20))
    val = [(1.0 - 0.02 * k if k < 6 else 0.9 + 0.015 * (k - 6) if k < 13
            else 0.995 - 0.01 * (k - 13)) + wobble(k, 0.0005) for k in range(len(val_steps))]
    return {"loss": (steps, train), "val/loss": (val_steps, val)}


def jumped_validation() -> dict[str, tuple[list[int], list[float]]]:
    """A validation loss level at 1.0 for 8 validations, then 2.5 at its last 2."""
    val_steps = list(range(19, 200, 20))
    val = [1.0] * 8 + [2.5, 2.5]
    return {"val/loss": (val_steps, val)}


# What val.plateau's message will say (rules/general.py holds the rule's own).
PLATEAU = "{metric} {change} {span}{between} (now {last:.3g})."


def first_plateau(series: dict[str, tuple[list[int], list[float]]]) -> Finding:
    (f, *_) = [f for f in evaluate("sft", {}, series) if f.rule_id == "val.plateau"]
    return f


def plateau_words(series: dict[str, tuple[list[int], list[float]]]) -> tuple[str, str]:
    f = first_plateau(series)
    rule = BY_ID["val.plateau"]
    words = message_words(rule, rule.params, f.evidence, f.first_step)
    fields = {**f.evidence, **words, "metric": "val/loss"}
    return (words["change"] + words.get("between", ""),
            render(replace(rule, message=PLATEAU).message, fields))


def test_a_plateau_that_fell_and_came_back_says_how_far_it_moved() -> None:
    series = v_shaped_validation()
    change, message = plateau_words(series)
    # the V: 0.96, down to 0.90, back to 0.944
    assert change == "fell 1.6%, moving between 0.9 and 0.96", change
    assert message == ("val/loss fell 1.6% from step 59 to 199, moving between 0.9 and "
                       "0.96 (now 0.96)."), message


def test_a_plateau_that_jumped_at_its_end_says_it_rose() -> None:
    # the Theil-Sen slope of 8 equal validations and 2 jumped ones is 0: "stayed flat"
    change, _ = plateau_words(jumped_validation())
    assert change == "rose 150.0%", change


def test_a_flat_window_adds_no_range_it_did_not_leave() -> None:
    # near miss: a series that only rose names no range beyond its ends
    assert range_words({"from": 1.0, "to": 2.5, "low": 1.0, "high": 2.5}) == ""
    assert range_words({"from": 1.0, "to": 1.0, "low": 0.9996, "high": 1.0004}) == ""
    assert range_words({"from": 1.0, "to": 1.01, "low": 0.9, "high": 1.01}) == (
        ", moving between 0.9 and 1.01")


def trl_proxy_run() -> dict[str, list[float]]:
    """A TRL GRPO run: its reward (`reward`) climbs, its correctness reward function's
    mean (`rewards/accuracy_reward/mean`) stays flat."""
    n = 80
    return {"rewards/accuracy_reward/mean": [0.3 + wobble(i, 0.02) for i in range(n)],
            "reward": [(0.3 if i < 40 else 0.3 + 0.012 * (i - 40)) + wobble(i + 5, 0.02)
                       for i in range(n)]}


def test_a_reference_metric_is_named_as_the_run_logs_it() -> None:
    f = last_of(evaluate("grpo", {}, trl_proxy_run()), "grpo.proxy_hacking")
    assert f.message.startswith("reward rose "), f.message
    assert "while rewards/accuracy_reward/mean " in f.message, f.message
    # the evidence keeps the canonical names, as `metric` does
    assert f.evidence["reference"] == "reward_mean" and f.metric == "accuracy"


def test_verl_reward_hacking_names_its_own_keys() -> None:
    n = 200
    acc = [0.3 + 0.4 * i / n + wobble(i, 0.02) for i in range(n)]
    series: dict[str, tuple[list[int], list[float]]] = {
        "critic/score/mean": (list(range(n)), acc),
        "critic/rewards/mean": (list(range(n)), [a + wobble(i + 3, 0.005)
                                                 for i, a in enumerate(acc)]),
        "val-core/gsm8k/acc/mean@1": (
            list(range(9, n, 10)),
            [0.5 if s < 100 else 0.5 - 0.004 * (s - 100) + wobble(s, 0.003)
             for s in range(9, n, 10)])}
    found = [f for f in evaluate("grpo", {}, series) if f.rule_id == "grpo.reward_hacking"]
    assert found
    for f in found:
        assert f.message.startswith("val-core/gsm8k/acc/mean@1 fell "), f.message
        assert re.search(r"while critic/(score|rewards)/mean rose ", f.message), f.message
