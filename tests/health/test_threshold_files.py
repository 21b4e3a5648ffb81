"""Threshold files: every wrong shape is refused with where and what shape is expected, a
setting no rule reads is refused naming the ones they read, and a severity the file sets
is the one the rule reports."""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import pytest
from sqlalchemy import Engine, insert

from runwatch.health import store as health_store
from runwatch.health.engine import Engine as HealthEngine
from runwatch.health.thresholds import ThresholdError, parse, setting_names
from runwatch.store import schema as s
from tests.support.cli import cli_here

from .helpers import to_batch
from .test_store import index, write_run


@pytest.mark.parametrize(("data", "said"), [
    (["grpo.clip_high"], "must be a mapping with 'rules' and 'settings', not a list"),
    ({"rules": ["grpo.clip_high"]}, "the 'rules' section must be a mapping of rule ids"),
    ({"rules": "grpo.clip_high"}, "the 'rules' section must be a mapping of rule ids"),
    ({"rules": {"grpo.clip_high": [0.2]}}, "rules: grpo.clip_high must be a mapping of its "
                                           "parameters"),
    ({"rules": {"grpo.clip_high": None}}, "rules: grpo.clip_high must be a mapping"),
    ({"rules": {"grpo.clip_hi": {"above": 0.2}}}, "did you mean 'grpo.clip_high'?"),
    ({"settings": [{"max_sample_tokens": 1000}]},
     "the 'settings' section must be a mapping of setting names to numbers"),
    ({"settings": {"max_sampl_tokens": 1000}},
     "unknown setting 'max_sampl_tokens' (did you mean 'max_sample_tokens'?)"),
    ({"settings": {"learning_rate": 1e-5}}, "the rules read batch_size, "),
    ({"settings": {"max_sample_tokens": "1k"}}, "must be a number"),
])
def test_a_wrong_shape_is_refused_saying_what_is_expected(data: object, said: str) -> None:
    with pytest.raises(ThresholdError) as err:
        parse(data)
    assert said in str(err.value)


def test_the_settings_the_rules_read_are_accepted() -> None:
    known = setting_names()
    assert {"max_sample_tokens", "batch_size", "max_sampling_attempts"} <= set(known)
    assert parse({"settings": dict.fromkeys(known, 8)}).settings == dict.fromkeys(known, 8.0)
    # a rule told to infer the limit unless another setting is given reads that one
    renamed = {"rules": {"grpo.length_at_ceiling": {"unless_setting": "max_new_tokens"}},
               "settings": {"max_new_tokens": 512}}
    assert parse(renamed).settings == {"max_new_tokens": 512.0}


def test_stored_overrides_with_a_setting_no_rule_reads_still_load(engine: Engine) -> None:
    # stored before settings were checked: left out, so the project's runs are still judged
    with engine.begin() as conn:
        conn.execute(insert(s.health_thresholds).values(
            project="p", updated_ts=0.0, overrides=orjson.dumps(
                {"rules": {}, "settings": {"max_sampl_tokens": 1000,
                                           "batch_size": 64}}).decode()))
        assert health_store.get_thresholds(conn, "p").settings == {"batch_size": 64.0}


@pytest.mark.parametrize("text", ["rules: [grpo.clip_high]\n",
                                  "settings:\n  - max_sample_tokens: 1000\n",
                                  "settings:\n  max_sampl_tokens: 1000\n"])
def test_both_commands_refuse_a_wrong_file_without_a_traceback(
        engine: Engine, db_url: str, tmp_path: Path, text: str) -> None:
    runs = tmp_path / "runs"
    write_run(runs, "r", "grpo", [{"step": i, "reward_mean": 0.5} for i in range(5)])
    index(engine, runs)
    path = tmp_path / "overrides.yaml"
    path.write_text(text, encoding="utf-8")
    for args in (("thresholds", "p", str(path)), ("runs", "health", "r", "--thresholds",
                                                   str(path))):
        done = cli_here(*args, "--dir", str(runs), "--db", db_url, check=False)
        assert done.returncode != 0 and "Traceback" not in done.stdout + done.stderr
        assert "must be a mapping" in done.stderr or "unknown setting" in done.stderr


def test_a_budget_given_in_settings_is_judged(engine: Engine, db_url: str,
                                              tmp_path: Path) -> None:
    """`max_sampl_tokens: 1000` was accepted and grpo.length_at_budget never judged; the
    right name judges it (the near miss of the refusal above)."""
    runs = tmp_path / "runs"
    write_run(runs, "r", "grpo", [{"step": i, "mean_sampled_response_length":
                                   950.0 if i >= 60 else 300.0} for i in range(100)])
    index(engine, runs)
    path = tmp_path / "budget.yaml"
    path.write_text("settings:\n  max_sample_tokens: 1000\n", encoding="utf-8")
    said = cli_here("runs", "health", "r", "--dir", str(runs), "--db", db_url,
                    "--thresholds", str(path), "-o", "json")
    assert "grpo.length_at_budget" in said.stdout


def _learning_run_without_spread() -> dict[str, list[float]]:
    """A GRPO run whose reward rises (the run learns) while most groups have no spread."""
    rng = random.Random(1)
    n = 100
    return {"reward_mean": [0.2 + 0.4 * i / n + rng.gauss(0, 0.04) for i in range(n)],
            "zero_variance_skip_ratio": [0.55 if i >= 60 else 0.15 for i in range(n)]}


@pytest.mark.parametrize(("overrides", "severity"), [
    ({}, "info"),  # the run learns: the rule says info
    ({"rules": {"grpo.zero_variance": {"severity": "critical"}}}, "critical"),
    ({"rules": {"grpo.zero_variance": {"severity": "warning"}}}, "warning"),
])
def test_a_severity_the_project_sets_is_the_one_reported(
        overrides: dict[str, object], severity: str) -> None:
    """`grpo.zero_variance: {severity: critical}` was reported as info while the reward
    rose: the "run is learning" downgrade overrode the severity the project chose."""
    found = HealthEngine("grpo", {}, parse(overrides)).feed(
        to_batch(_learning_run_without_spread()))
    assert {f.severity for f in found if f.rule_id == "grpo.zero_variance"} == {severity}
