"""log() from several threads: each call's step check and its record's place in the queue
are one step, so the steps in metrics.jsonl never go backwards (run-format.md), whichever
thread's call comes first."""

from __future__ import annotations

import itertools
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import runwatch
from runwatch.rundir import format as fmt

STEPS = 50_000


@pytest.fixture
def switch_often() -> Iterator[None]:
    """Threads switch as often as the interpreter lets them, so a window between the check
    and the queue is met within the test's steps."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_threads_logging_the_same_steps_never_write_a_step_backwards(
        runs_dir: Path, switch_often: None) -> None:
    run = runwatch.init(name="race", dir=runs_dir)
    assert isinstance(run, runwatch.Run)
    refused = [0, 0, 0]
    together = threading.Barrier(3)

    def loop(i: int) -> None:
        together.wait()
        for step in range(STEPS):
            try:
                run.log({f"thread_{i}": float(step)}, step=step)
            except ValueError:  # the other thread logged a later step first: a bug it shows
                refused[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run.finish()
    steps = [json.loads(line)["step"]
             for line in (runs_dir / "race" / fmt.METRICS).read_bytes().splitlines()]
    assert len(steps) == len(threads) * STEPS - sum(refused)
    backwards = [(a, b) for a, b in itertools.pairwise(steps) if b < a]
    assert backwards == []
