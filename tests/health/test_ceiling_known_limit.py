"""`grpo.length_at_ceiling` reads the token limit from the log only where the run's
settings do not give it: the demo's GRPO (max_sample_tokens=6 on addition, every answer
4 tokens long) got a warning that its completions were cut at the limit."""

from __future__ import annotations

from tests.health.helpers import evaluate, rule_ids

# the demo's mean completion length: exactly 4 at every logged step
FIXED = [4.0] * 60


def test_one_length_under_a_known_limit_is_not_the_limit() -> None:
    found = evaluate("grpo", {"max_sample_tokens": 6.0},
                     {"mean_sampled_response_length": FIXED})
    assert not {"grpo.length_at_ceiling", "grpo.length_at_budget"} & rule_ids(found)


def test_without_the_setting_the_limit_is_read_from_the_log() -> None:
    # Near miss of the above: the same log with no settings, where a mean pinned at its
    # highest is all there is to tell the limit by.
    found = evaluate("grpo", {}, {"mean_sampled_response_length": FIXED})
    assert "grpo.length_at_ceiling" in rule_ids(found)


def test_a_known_limit_the_lengths_reach_is_judged_by_the_budget_rule() -> None:
    found = evaluate("grpo", {"max_sample_tokens": 6.0},
                     {"mean_sampled_response_length": [6.0] * 60})
    ids = rule_ids(found)
    assert "grpo.length_at_budget" in ids and "grpo.length_at_ceiling" not in ids
