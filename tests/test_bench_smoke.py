"""The benchmark scripts still run against the code they measure (small sizes, no timing
judged here: `make bench` is where figures come from). They call internal APIs, so a
change there must not silently break `make bench`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args", [
    ["bench_ingest.py", "--steps", "2000", "--metrics", "5", "--repeat", "1",
     "--json", "{tmp}/i.json"],
    # a timed target is make bench's to judge, not a smoke run's on a loaded machine
    ["bench_server.py", "--points", "20000", "--requests", "3", "--target", "1e9",
     "--out", "{tmp}/s.json"],
    ["bench_health.py", "--steps", "2000", "--repeat", "1"],
    ["bench_jobs.py", "--jobs", "1", "--claims", "10", "--claimers", "2", "--out", "{tmp}/j.json"],
    ["bench_cold.py", "--steps", "300", "--runs", "2", "--repeat", "1", "--out", "{tmp}/c.json"],
    # exits 1 when a point is lost
    ["bench_team.py", "--runs", "5", "--seconds", "3", "--metrics", "3", "--list-runs", "300",
     "--list-requests", "3", "--stores", "sqlite", "--out", "{tmp}/team.json"],
    ["bench_sender.py", "--steps", "300", "--paced-steps", "30", "--repeat", "1",
     "--out", "{tmp}/snd.json"],
], ids=["ingest", "server", "health", "jobs", "cold", "team", "sender"])
def test_bench_script_runs(args: list[str], tmp_path: Path) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = subprocess.run([sys.executable, str(REPO / "bench" / argv[0]), *argv[1:]],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
