"""Live streams under load: bench/bench_streams.py at a size CI can run. `runwatch ui`
indexes 20 runs that an SDK writer process logs for 6 s (60 steps a run, some 30 index
passes of 0.2 s) while 60 clients follow the runs' streams and 5 follow the run list. Every
client gets every point of its run exactly once and in order, nothing answers 5xx, and the
run list keeps answering. (It logged for 15 s; the clients, runs and pace are what load
the server, and 6 s of them already spans many index passes and stream pushes.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_streams.py"
SECONDS = 6  # the bench writes 10 steps a second


@pytest.mark.slow
def test_streams_under_load_lose_nothing(tmp_path: Path) -> None:
    out = tmp_path / "streams.json"
    # the timeout only stops a broken run from hanging; no figure is judged by time
    proc = subprocess.run([sys.executable, str(BENCH), "--runs", "20", "--clients", "60",
                           "--list-clients", "5", "--seconds", str(SECONDS), "--out", str(out)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.is_file(), proc.stdout[-2000:] + proc.stderr[-4000:]
    got = json.loads(out.read_text())
    assert got["run_clients"] == 60 and got["points_expected"] == 60 * SECONDS * 10
    assert got["points_lost"] == 0 and got["points_repeated"] == 0
    assert got["clients_out_of_order"] == 0 and got["clients_gave_up"] == 0
    assert got["list_clients_saw_all_finish"] == 5
    assert got["server_5xx"] == 0 and got["other_errors"] == 0
    assert got["api_runs"]["n"] > 0 and got["api_runs"]["failed"] == 0
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
