"""The benchmark scripts still run against the code they measure (small sizes, no timing
judged here: `make bench` is where figures come from). They call internal APIs, so a
change there must not silently break `make bench`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args", [
    ["bench_ingest.py", "--steps", "2000", "--metrics", "5", "--repeat", "1",
     "--json", "{tmp}/i.json"],
    # bench_server.py: run (three times) by the test below, whose plain run must pass
    ["bench_health.py", "--steps", "2000", "--repeat", "1"],
    ["bench_jobs.py", "--jobs", "1", "--claims", "10", "--claimers", "2", "--out", "{tmp}/j.json"],
    ["bench_cold.py", "--steps", "300", "--runs", "2", "--repeat", "1", "--out", "{tmp}/c.json"],
    # exits 1 when a point is lost
    ["bench_team.py", "--runs", "5", "--seconds", "3", "--metrics", "3", "--list-runs", "300",
     "--list-requests", "3", "--stores", "sqlite", "--out", "{tmp}/team.json"],
    ["bench_sender.py", "--steps", "300", "--paced-steps", "30", "--repeat", "1",
     "--out", "{tmp}/snd.json"],
    # exits 1 when the gauge is not what the listings hold
    ["bench_prom.py", "--runs", "20", "--findings", "30", "--scrapes", "3", "--stores",
     "sqlite", "--out", "{tmp}/p.json"],
], ids=["ingest", "health", "jobs", "cold", "team", "sender", "prom"])
def test_bench_script_runs(args: list[str], tmp_path: Path) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = subprocess.run([sys.executable, str(REPO / "bench" / argv[0]), *argv[1:]],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]


def test_a_missed_timing_target_is_printed_and_fails_the_bench_only_when_strict(
        tmp_path: Path) -> None:
    """No machine meets a target of a billionth of a millisecond: each run misses it and
    says so; only the strict one (--strict, or run_all.py --strict's environment) fails."""
    script = [sys.executable, str(REPO / "bench" / "bench_server.py"), "--points", "20000",
              "--requests", "3", "--target", "1e-9", "--out", str(tmp_path / "s.json")]
    env = {k: v for k, v in os.environ.items() if k != "RUNWATCH_BENCH_STRICT"}
    runs = {name: subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True,
                                 timeout=600, env=env | extra)
            for name, argv, extra in (("plain", script, {}),
                                      ("--strict", [*script, "--strict"], {}),
                                      ("run_all --strict", script,
                                       {"RUNWATCH_BENCH_STRICT": "1"}))}
    codes = {name: proc.returncode for name, proc in runs.items()}
    assert codes == {"plain": 0, "--strict": 1, "run_all --strict": 1}, \
        {name: proc.stdout[-1500:] + proc.stderr[-1500:] for name, proc in runs.items()}
    for proc in runs.values():
        assert "target missed: full-range median" in proc.stdout, proc.stdout[-1500:]
