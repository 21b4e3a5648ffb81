"""A record holds its values as they were at the call, though the writer's thread encodes it
later: a tensor or array the loop updates in place, and a dict or list it reuses, are
recorded as they were when logged, not as the writer later finds them.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import runwatch
from runwatch.rundir import format as fmt


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def open_run(runs_dir: Path, name: str) -> runwatch.Run:
    # the writer's first look comes at finish(), after every change the loop makes
    run = runwatch.init(name=name, dir=runs_dir, flush_interval=60)
    assert isinstance(run, runwatch.Run)
    return run


def test_metrics_updated_in_place_are_recorded_as_they_were_at_log(runs_dir: Path) -> None:
    torch = pytest.importorskip("torch")
    run = open_run(runs_dir, "in-place")
    total = torch.zeros(())  # a running sum, as loops keep one
    acc = np.zeros(())
    for step in range(5):
        total += 1.0
        acc += 10.0
        run.log({"total": total, "np_total": acc, "f32": np.float32(step)}, step=step)
    run.finish()
    got = lines(runs_dir / "in-place" / fmt.METRICS)
    assert [r["total"] for r in got] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert [r["np_total"] for r in got] == [10.0, 20.0, 30.0, 40.0, 50.0]
    assert [r["f32"] for r in got] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert run.dropped_values == 0


@pytest.mark.skipif("not __import__('torch').cuda.is_available()")
def test_a_device_tensor_is_taken_at_log_without_waiting_for_the_device(
        runs_dir: Path) -> None:
    """float() of a CUDA tensor waits for the device: log() copies it on the device instead
    (a synchronizing call raises in the sync debug mode), and the writer reads the copy."""
    import torch

    run = open_run(runs_dir, "device")
    total = torch.zeros((), device="cuda")
    torch.cuda.set_sync_debug_mode("error")
    try:
        for step in range(5):
            total += 1.0
            run.log({"total": total}, step=step)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    run.finish()
    got = lines(runs_dir / "device" / fmt.METRICS)
    assert [r["total"] for r in got] == [1.0, 2.0, 3.0, 4.0, 5.0]


@dataclasses.dataclass
class Stats:
    seen: list[int]


def test_data_the_loop_reuses_is_recorded_as_it_was_at_the_call(runs_dir: Path) -> None:
    torch = pytest.importorskip("torch")
    run = open_run(runs_dir, "reused")
    info: dict[str, Any] = {"epoch": 0}
    history: list[int] = []
    meta: dict[str, Any] = {"metrics": {"acc": 0.0}}
    stats = Stats(seen=[])
    logits = torch.zeros(2)
    for step in range(3):
        info["epoch"] = step
        history.append(step)
        meta["metrics"]["acc"] = step / 10
        stats.seen.append(step)
        logits[0] = step
        run.log_text(f"epoch {step} done", data=info)
        run.log_samples(step, [{"prompt": "p", "completion": "c", "history": history,
                                "stats": stats, "logits": logits, "pair": (history, 1)}])
        run.log_checkpoint(step, "training", f"ckpt-{step}", **meta)
    run.finish()
    d = runs_dir / "reused"
    assert [r["data"] for r in lines(d / fmt.LOGS)] == [{"epoch": 0}, {"epoch": 1}, {"epoch": 2}]
    assert [r["metrics"]["acc"] for r in lines(d / fmt.CHECKPOINTS)] == [0.0, 0.1, 0.2]
    for step in range(3):
        sample = json.loads((d / f"step_{step:04d}_completions.json").read_bytes())["samples"][0]
        seen = list(range(step + 1))
        assert sample["history"] == seen
        assert sample["stats"] == {"seen": seen}
        assert sample["logits"] == [float(step), 0.0]
        assert sample["pair"] == [seen, 1]
    assert run.dropped_values == 0
