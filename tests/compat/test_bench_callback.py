"""bench/bench_callback.py still runs against the callback it measures (a few steps; no
timing is judged here: `make bench` is where the figures come from)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_bench_callback_runs_both_callbacks(tmp_path: Path) -> None:
    pytest.importorskip("wandb")
    out = tmp_path / "callback.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "bench_callback.py"),
                           "--steps", "3", "--repeat", "1", "--out", str(out)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    figures = json.loads(out.read_text())
    assert figures["median"]["runwatch"]["per_step_us"] > 0
    assert figures["median"]["wandb"]["per_step_us"] > 0
    assert "runwatch / W&B" in proc.stdout
