"""Runs that log huge step numbers (any int up to 2**63-1 is a valid step) are indexed and
judged with work bounded by their points, not by their step numbers: a run that logged step
10**12 or 2**62 after a few ordinary steps once held the index's write lock while the
engine walked the gap 1024 steps at a time (minutes for 10**12, for ever for 2**62), and
every command on the folder hung behind it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from runwatch.health.engine import CHUNK_STEPS, _chunks
from runwatch.health.evaluators import StepValues
from runwatch.rundir.format import MAX_STEP
from runwatch.sdk import init
from runwatch.server.runner import Runner, free_port
from tests.support.cli import CLI_DEADLINE_S, run_cli


def _log_run(runs: Path, name: str, huge: list[int]) -> None:
    """An SFT run: a falling loss at steps 0-9, then `huge` steps, the first one NaN."""
    run = init(name=name, dir=runs, method="sft")
    for step in range(10):
        run.log({"loss": 2.0 - 0.1 * step, "learning_rate": 1e-3}, step=step)
    for i, step in enumerate(huge):
        run.log({"loss": math.nan if i == 0 else 1.0, "learning_rate": 1e-3}, step=step)
    run.finish()


def test_runs_with_huge_steps_are_indexed_and_judged_beside_an_ordinary_one(
        db_url: str, runs_dir: Path) -> None:
    _log_run(runs_dir, "trillion", [10**12, 10**12 + 1])
    _log_run(runs_dir, "huge", [2**62, 2**62 + 10**6, MAX_STEP])
    _log_run(runs_dir, "plain", [10, 11])
    where = ["--dir", str(runs_dir), "--db", db_url]
    # the subprocess's deadline (run_cli) ends the test if indexing hangs on the gap
    listed = json.loads(run_cli("runs", "list", *where, "-o", "json").stdout)
    last = {r["name"]: r["observed_step"] for r in listed}
    assert last == {"trillion": 10**12 + 1, "huge": MAX_STEP, "plain": 11}
    for name, first in (("trillion", 10**12), ("huge", 2**62)):
        health = json.loads(run_cli("runs", "health", name, *where, "-o", "json").stdout)
        nan = [f for f in health["findings"] if f["rule_id"] == "metric.non_finite"]
        assert [(f["first_step"], f["status"]) for f in nan] == [(first, "resolved")], health


def test_a_point_at_the_largest_step_ends_its_series(engine: Engine, runs_dir: Path) -> None:
    """The series the server reads keeps a last point at step 2**63-1 (a sentinel of int64's
    largest once dropped it as superseded)."""
    run = init(name="edge", dir=runs_dir, method="sft")
    for step in range(MAX_STEP - 11, MAX_STEP + 1):
        run.log({"loss": 1.0 + (MAX_STEP - step) / 10}, step=step)
    run.finish()
    with Runner(engine, runs_dir=runs_dir, port=free_port(), warm=False) as srv:
        got = httpx.get(f"{srv.url}/api/series", params={"run": "edge", "key": "loss"},
                        timeout=60).json()
    (series,) = got["series"]
    assert series["full"] and series["count"] == 12
    assert series["step"][-1] == MAX_STEP and series["value"][-1] == 1.0


def _walk_every_edge(cols: dict[str, StepValues]) -> Iterator[dict[str, StepValues]]:
    """The chunks as the engine cut them before: every edge from the first step to the
    last, CHUNK_STEPS apart, visited (its reference, for ordinary step numbers)."""
    lo = min((c[0][0] for c in cols.values()), default=0)
    hi = max((c[0][-1] for c in cols.values()), default=0)
    if hi - lo <= CHUNK_STEPS:
        yield cols
        return
    cuts = dict.fromkeys(cols, 0)
    for edge in range(lo + CHUNK_STEPS, hi + CHUNK_STEPS + 1, CHUNK_STEPS):
        chunk: dict[str, StepValues] = {}
        for k, (steps, values) in cols.items():
            start = cuts[k]
            end = len(steps) if edge > hi else bisect_right(steps, edge - 1, start)
            if end > start:
                chunk[k] = (steps[start:end], values[start:end])
                cuts[k] = end
        if chunk:
            yield chunk


# series of up to 40 steps within 20 chunks, sorted or (a resumed run) not
_series = st.lists(st.integers(0, 20 * CHUNK_STEPS), min_size=1, max_size=40)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(["loss", "val/loss", "reward", "kl"]),
                       st.tuples(_series, st.booleans()), min_size=1))
def test_chunks_are_those_of_the_walk_over_every_edge(
        drawn: dict[str, tuple[list[int], bool]]) -> None:
    """Skipping the ranges that hold no point changes no chunk, so no finding, for steps
    in order and for steps that go backwards."""
    cols: dict[str, StepValues] = {
        k: (sorted(steps) if ordered else steps, [float(i) for i in range(len(steps))])
        for k, (steps, ordered) in drawn.items()}
    assert list(_chunks(cols)) == list(_walk_every_edge(cols))


# The engine's chunks of a batch with huge gaps, printed as JSON by a subprocess (one that
# walked the gaps would never end: the deadline fails the test instead).
CHUNKS_OF_HUGE_GAPS = """
import json
from runwatch.health.engine import _chunks
steps = [0, 1, 2, 10**12, 10**12 + 5, 2**62, 2**63 - 1]
cols = {"loss": (steps, [1.0] * len(steps)), "val/loss": ([2, 2**62 + 1], [1.0, 1.0])}
print(json.dumps([{k: v[0] for k, v in chunk.items()} for chunk in _chunks(cols)]))
"""


def test_chunks_of_huge_gaps_are_one_per_range_that_holds_points() -> None:
    proc = subprocess.run([sys.executable, "-c", CHUNKS_OF_HUGE_GAPS], capture_output=True,
                          text=True, timeout=CLI_DEADLINE_S, check=True)
    assert json.loads(proc.stdout) == [
        {"loss": [0, 1, 2], "val/loss": [2]}, {"loss": [10**12, 10**12 + 5]},
        {"loss": [2**62], "val/loss": [2**62 + 1]}, {"loss": [MAX_STEP]}]
