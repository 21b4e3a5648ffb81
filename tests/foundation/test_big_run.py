"""A 100,000-step × 20-metric run comes back whole through the CLI; reindexing adds nothing."""

from __future__ import annotations

import json
from pathlib import Path

import runwatch
from tests.support import run_cli

STEPS = 100_000
KEYS = 20


def test_two_million_points_round_trip(runs_dir: Path) -> None:
    with runwatch.init(name="big", dir=runs_dir) as run:
        for step in range(STEPS):
            run.log({f"m/k{i:02d}": step * 0.5 + i for i in range(KEYS)}, step=step)
    out = run_cli("runs", "metrics", "big", "--dir", str(runs_dir), "-o", "json").stdout
    steps = json.loads(out)["steps"]
    assert len(steps) == STEPS
    assert sum(len(s["measured"]) for s in steps) == STEPS * KEYS
    assert steps[-1]["measured"]["m/k19"] == (STEPS - 1) * 0.5 + 19
    assert all(s["step"] == i for i, s in enumerate(steps))
    again = run_cli("index", str(runs_dir)).stdout
    assert "0 new rows" in again
