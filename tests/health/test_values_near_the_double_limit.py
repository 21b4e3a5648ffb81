"""Finite values near the double's limit (1e308 next to 2, a jump to 1.8e308) are judged
or skipped by every rule, never a traceback: their spreads, medians and effects overflow
to infinity, which once crashed `runs health` (OverflowError in median_points) and left
the run without findings after `runwatch index` printed a traceback (a detector's state,
kept as JSON, came back null)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from runwatch.health.trendstats import MOST_MEDIAN, median_points
from runwatch.metrics.catalogue import METRICS
from runwatch.sdk import init
from tests.support.cli import run_cli

BIG = 1.7976931348623157e308  # the largest finite double
PATTERNS: dict[str, Callable[[int], float]] = {
    "alternating": lambda i: 1e308 if i % 2 else 2.0 - i * 0.01,
    "largest": lambda i: BIG,
    "ramp": lambda i: BIG * i / 200,
    "jump-up": lambda i: 1.0 if i < 120 else BIG,
    "jump-down": lambda i: 1.0 if i < 120 else -BIG,
}


@pytest.mark.parametrize("method", ["sft", "grpo"])
def test_runs_of_values_near_the_limit_are_indexed_and_judged_without_a_traceback(
        tmp_path: Path, method: str) -> None:
    runs = tmp_path / "runs"
    for name, value in PATTERNS.items():
        with init(project="p", name=name, dir=runs, method=method) as run:
            for step in range(200):
                run.log({m.name: value(step) for m in METRICS}, step=step)
    indexed = run_cli("index", str(runs))
    assert "Traceback" not in indexed.stderr, indexed.stderr
    assert "health evaluation" not in indexed.stderr, indexed.stderr
    for name in PATTERNS:
        health = run_cli("runs", "health", name, "--dir", str(runs), "-o", "json",
                         check=False)
        assert health.returncode == 0, (name, health.stderr)
        assert "Traceback" not in health.stderr, (name, health.stderr)
        orjson.loads(health.stdout)  # the findings, as JSON
    # the alternating loss rose past every bound: a finding, not a silence
    said = orjson.loads(run_cli("runs", "health", "alternating", "--dir", str(runs),
                                "-o", "json").stdout)
    assert said, "the run that swings to 1e308 has findings"


def test_a_noise_or_change_that_overflowed_is_too_noisy_to_judge() -> None:
    assert median_points(float("inf"), 1.0, 2.0, 3) is None
    assert median_points(float("nan"), 1.0, 2.0, 3) is None
    assert median_points(BIG, 1e-300, 2.0, 3) is None
    assert median_points(1.0, float("nan"), 2.0, 3) is None
    assert median_points(0.1, 1.0, 2.0, 3) == 3  # an ordinary case is judged as before
    assert median_points(1.0, 0.01, 2.0, 3) is None  # too noisy, as before
    assert MOST_MEDIAN >= 3
