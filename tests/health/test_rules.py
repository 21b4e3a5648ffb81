"""Every rule fires on its trigger series and stays silent on a near miss."""

from __future__ import annotations

from pathlib import Path

import pytest

from runwatch.health.docs import render
from runwatch.health.engine import Engine
from runwatch.health.rules import CATALOGUE, SEVERITIES
from runwatch.store.points import PointColumns

from .cases import CASES
from .helpers import STEP_S, T0, at_end, evaluate, rule_ids, to_batch

DOCS = Path(__file__).resolve().parents[2] / "docs" / "health.md"


def test_every_rule_has_cases() -> None:
    # run.stalled is wall-clock based and has its own tests below.
    missing = {r.id for r in CATALOGUE} - set(CASES) - {"run.stalled"}
    assert not missing, f"rules without trigger/near-miss cases: {sorted(missing)}"


def test_docs_page_is_current() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert all(f"`{r.id}`" in text for r in CATALOGUE)
    assert text == render(), "docs/health.md is stale: run python -m runwatch.health.docs"


def test_rules_are_well_formed() -> None:
    ids = [r.id for r in CATALOGUE]
    assert len(ids) == len(set(ids))
    for r in CATALOGUE:
        assert r.severity in SEVERITIES
        assert r.variants and r.title and r.condition and r.message and r.advice
        assert r.advice.endswith(".")


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_trigger(rule_id: str) -> None:
    (method, settings, series), _ = CASES[rule_id]
    found = [f for f in evaluate(method, settings, series, at_end(rule_id))
             if f.rule_id == rule_id]
    assert found, f"{rule_id} did not fire on its trigger series"
    f = found[0]
    assert f.first_step <= f.last_step
    assert f.message and "?" not in f.message, f.message
    assert f.evidence["metric"]


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_near_miss(rule_id: str) -> None:
    _, (method, settings, series) = CASES[rule_id]
    assert rule_id not in rule_ids(evaluate(method, settings, series, at_end(rule_id)))


def test_rules_apply_only_to_their_methods() -> None:
    series = {"loss": [2.0] * 60}
    assert "sft.loss_not_falling" in rule_ids(evaluate("sft", {}, series))
    assert "sft.loss_not_falling" not in rule_ids(evaluate("grpo", {}, series))


def test_budget_rule_is_silent_without_the_setting() -> None:
    series = {"mean_sampled_response_length": [500.0] * 30}
    assert "grpo.length_at_budget" not in rule_ids(evaluate("grpo", {}, series))


def test_stall_opens_while_running_and_silent() -> None:
    engine = Engine("sft")
    engine.feed(to_batch({"loss": [1.0] * 20}))
    last_ts = T0 + STEP_S * 19
    (f,) = engine.check_stall(last_ts + 3600, running=True)
    assert f.rule_id == "run.stalled" and f.status == "open" and f.last_step == 19
    assert f.evidence["silent_s"] == pytest.approx(3600)


def test_stall_near_misses() -> None:
    engine = Engine("sft")
    engine.feed(to_batch({"loss": [1.0] * 20}))
    last_ts = T0 + STEP_S * 19
    assert engine.check_stall(last_ts + 300, running=True) == []  # under min_seconds
    assert engine.check_stall(last_ts + 3600, running=False) == []  # the run has ended


def test_stall_is_recorded_when_points_resume() -> None:
    engine = Engine("sft")
    engine.feed(to_batch({"loss": [1.0] * 20}))
    later = {"loss": PointColumns([20], [20], [T0 + STEP_S * 19 + 5000], [1.0])}
    (f,) = [f for f in engine.feed(later) if f.rule_id == "run.stalled"]
    assert f.status == "resolved" and f.first_step == 19
