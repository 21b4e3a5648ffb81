"""A run whose config names its completion token limit as its trainer does (TRL's
`max_completion_length`, verl's `data.max_response_length` or `rollout.response_length`)
has that limit known: `grpo.length_at_budget` judges it against the limit, and
`grpo.length_at_ceiling`, which infers the limit from the log where a run's settings do
not give it, stays silent. Its `unless_setting` read runwatch's `max_sample_tokens` alone,
so a TRL run was judged as if its limit were unknown (session 38)."""

from __future__ import annotations

import pytest

from runwatch.health.store import settings_from_config

from .helpers import evaluate, rule_ids

# TRL's GRPOConfig as a run saves it (a few of its fields)
TRL = """\
output_dir: out
learning_rate: 1.0e-06
num_generations: 8
max_prompt_length: 512
max_completion_length: 200
temperature: 1.0
"""
VERL = """\
data:
  max_prompt_length: 512
  max_response_length: 200
actor_rollout_ref:
  rollout:
    n: 8
"""
VERL_ROLLOUT = """\
actor_rollout_ref:
  rollout:
    n: 8
    response_length: 200
"""
RUNWATCH = "max_sample_tokens: 200\ngroup_size: 8\n"
# Every completion cut at the limit of 200 on most steps, from the 4th on
LENGTHS = [120.0, 150.0, 180.0] + [200.0 if i % 7 else 196.5 for i in range(27)]


@pytest.mark.parametrize("config", [RUNWATCH, TRL, VERL, VERL_ROLLOUT],
                         ids=["runwatch", "trl", "verl", "verl-rollout"])
def test_a_known_limit_is_judged_by_the_budget_rule_whatever_its_trainer_calls_it(
        config: str) -> None:
    settings = settings_from_config(config)
    found = rule_ids(evaluate("grpo", settings, {"mean_sampled_response_length": LENGTHS}))
    assert "grpo.length_at_budget" in found, found
    assert "grpo.length_at_ceiling" not in found, found


def test_a_run_without_its_limit_in_its_config_has_it_read_from_its_log() -> None:
    settings = settings_from_config("learning_rate: 1.0e-06\nnum_generations: 8\n")
    found = rule_ids(evaluate("grpo", settings, {"mean_sampled_response_length": LENGTHS}))
    assert "grpo.length_at_ceiling" in found, found
    assert "grpo.length_at_budget" not in found, found
