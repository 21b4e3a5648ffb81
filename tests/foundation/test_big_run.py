"""A 50,000-step × 20-metric run (1,000,000 points: a metrics file of more than one of the
indexer's slices, so indexed in several transactions, from more calls than the SDK's
backlog holds) comes back whole through the CLI; reindexing adds nothing. The 100,000-step
figures are bench/bench_ingest.py's (`make bench`)."""

from __future__ import annotations

import json
from pathlib import Path

import runwatch
from runwatch.ingest.indexer import SLICE_BYTES
from runwatch.rundir import format as fmt
from tests.support import run_cli

STEPS = 50_000
KEYS = 20


def test_a_run_of_several_index_slices_round_trips_whole(runs_dir: Path) -> None:
    with runwatch.init(name="big", dir=runs_dir) as run:
        for step in range(STEPS):
            run.log({f"m/k{i:02d}": step * 0.5 + i for i in range(KEYS)}, step=step)
    [metrics] = runs_dir.glob(f"*/{fmt.METRICS}")
    assert metrics.stat().st_size > SLICE_BYTES
    out = run_cli("runs", "metrics", "big", "--dir", str(runs_dir), "-o", "json").stdout
    steps = json.loads(out)["steps"]
    assert len(steps) == STEPS
    assert sum(len(s["measured"]) for s in steps) == STEPS * KEYS
    assert steps[-1]["measured"]["m/k19"] == (STEPS - 1) * 0.5 + 19
    assert all(s["step"] == i for i, s in enumerate(steps))
    again = run_cli("index", str(runs_dir)).stdout
    assert "0 new rows" in again
