"""docs/health.md says what the rules do: each rule's severity line names the severities it
reports and when, and the engine's text takes its numbers from the rules' parameters."""

from __future__ import annotations

import random
import re

from runwatch.health.docs import PARAM, render
from runwatch.health.rules import BY_ID, CATALOGUE
from runwatch.health.thresholds import setting_names

from .helpers import evaluate, of_rule


def _severity_line(page: str, rule_id: str) -> str:
    section = page[page.index(f"### `{rule_id}`"):]
    return section[section.index("- **Severity:**"):].split("\n", 1)[0]


def test_a_flat_reward_warns_from_the_points_the_doc_names() -> None:
    """rl.no_progress was documented as info and reported warning from 30 points on."""
    rng = random.Random(3)
    warn_after = int(BY_ID["rl.no_progress"].params["warn_after"])
    found = of_rule(evaluate("grpo", {}, {
        "reward_mean": [0.5 + rng.gauss(0, 0.05) for _ in range(100)]}), "rl.no_progress")
    assert {f.severity for f in found} == {"warning"}
    short = of_rule(evaluate("grpo", {}, {
        "reward_mean": [0.5 + rng.gauss(0, 0.05) for _ in range(warn_after - 8)]}),
        "rl.no_progress")
    assert {f.severity for f in short} == {"info"}  # near miss: judged on fewer points
    line = _severity_line(render(), "rl.no_progress")
    assert line.startswith("- **Severity:** info;")
    assert f"a warning once judged on {warn_after} logged points or more" in line


def test_every_rule_raised_to_a_warning_says_so() -> None:
    page = render()
    for rule in CATALOGUE:
        line = _severity_line(page, rule.id)
        raised = rule.severity == "info" and ({"repeat", "warn_after"} & set(rule.params))
        assert ("a warning once" in line) == bool(raised), (rule.id, line)
        if rule.learning:
            assert "(the run is learning)" in line, (rule.id, line)


def test_no_signal_fires_on_the_steps_the_doc_names() -> None:
    """The doc said grpo.no_signal fires on 3 logged steps in a row; it needs 4 of 10."""
    p = BY_ID["grpo.no_signal"].params
    k, n = int(p["k"]), int(p["n"])
    high = [0.97, 0.98, 0.99, 0.97, 0.98]
    for hits in (k - 1, k):
        series = [0.1] * (n - hits) + high[:hits]
        fired = of_rule(evaluate("grpo", {}, {"zero_variance_skip_ratio": series}),
                        "grpo.no_signal")
        assert bool(fired) == (hits >= k), (hits, series)
    page = render()
    assert f"on {k} of the last {n} logged steps" in page
    assert "no group with reward variance on 3" not in page


def test_the_engine_text_takes_its_numbers_from_the_rules() -> None:
    page = render()
    assert not PARAM.search(page) and "{settings}" not in page
    assert ", ".join(f"`{name}`" for name in setting_names()) in page
    assert "or through the API" not in page  # no server route stores overrides
    start = BY_ID["loss.flat_finished_run"].params["warn_after"]
    assert re.search(rf"a warning from\s+{start}\s+logged points on", page)
