"""A multi-turn run's `truncated_ratio` counts episodes cut short by the turn limit or the
context (the spec's multi-turn metrics), so the completion budget rules, whose advice is
to raise `max_sample_tokens`, do not judge it: `multiturn.unfinished_episodes` does, with
advice about `max_turns` and `max_model_length`.

Found in a spec audit: a multi-turn run (terminated 0.2, truncated 0.78, `max_turns` set)
got `multiturn.unfinished_episodes` and, beside it, a second warning for the same cause,
"most completions hit the length budget … raise max_sample_tokens".
"""

from __future__ import annotations

import pytest

from runwatch.health.engine import Engine
from tests.health.cases import const
from tests.health.helpers import rule_ids, to_batch

BUDGET_RULES = {"grpo.truncation", "grpo.truncation_extreme", "grpo.truncation_rising"}


def _open(engine: Engine, series: dict[str, object]) -> dict[str, str]:
    return {f.rule_id: f.status for f in engine.feed(to_batch(series))}


@pytest.mark.parametrize("marker", ["terminated_ratio", "num_turns_mean"])
def test_a_multi_turn_runs_truncation_gets_the_multi_turn_finding_only(marker: str) -> None:
    series = {"truncated_ratio": const(0.85), "terminated_ratio": const(0.15),
              "num_turns_mean": const(4.0)}
    if marker == "num_turns_mean":  # a run that logs its turns, not its terminations
        del series["terminated_ratio"]
    found = rule_ids(Engine("grpo", {"max_sample_tokens": 512}).feed(to_batch(series)))
    assert not found & BUDGET_RULES, found
    if marker == "terminated_ratio":
        assert "multiturn.unfinished_episodes" in found


def test_a_single_turn_run_keeps_the_budget_rules() -> None:
    found = rule_ids(Engine("grpo", {"max_sample_tokens": 512}).feed(
        to_batch({"truncated_ratio": const(0.85)})))
    assert {"grpo.truncation", "grpo.truncation_extreme"} <= found


def test_a_budget_finding_resolves_once_the_run_shows_it_is_multi_turn() -> None:
    """A run whose first lines log only truncated_ratio, its turn metrics from later on:
    the budget finding opened on the first lines resolves when they appear."""
    engine = Engine("grpo", {"max_sample_tokens": 512})
    first = _open(engine, {"truncated_ratio": const(0.85, 12)})
    assert first.get("grpo.truncation_extreme") == "open"
    steps = list(range(12, 30))
    later = _open(engine, {"truncated_ratio": (steps, [0.85] * len(steps)),
                           "terminated_ratio": (steps, [0.15] * len(steps))})
    assert later.get("grpo.truncation_extreme") == "resolved", later
    assert not {r for r, status in later.items() if status == "open"} & BUDGET_RULES
    assert later.get("multiturn.unfinished_episodes") == "open"
