"""`runwatch ui` answers at once on a folder it has not indexed yet; the runs come in as
its first pass reads them, and its embedded worker starts after that pass.

Found in a trial (session 36): on a folder of 6 million points `runwatch ui` listened
after 1.4 s but answered its first request after 55 s, and printed that it was serving
only then: the first index pass ran before the server started. A test or a script that
wants the folder read first still gets that from `Runner` (`index_first`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from runwatch.rundir.jsonl import dumps_line
from runwatch.server.runner import free_port
from tests.support import first_line
from tests.support.rundirs import write_manifest

RUNS = 30
STEPS = 8000


def _folder(runs_dir: Path) -> None:
    """RUNS finished runs of STEPS steps × 3 metrics: several seconds of a first pass."""
    for n in range(RUNS):
        run = write_manifest(runs_dir / f"big-{n:02d}")
        lines = b"".join(dumps_line({"seq": i, "step": i, "ts": 1e9 + i, "loss": 1.0 / (i + 1),
                                     "learning_rate": 1e-4, "grad_norm": 1.0})
                         for i in range(STEPS))
        (run / "metrics.jsonl").write_bytes(lines)


def test_ui_answers_before_its_first_pass_has_read_the_folder(runs_dir: Path,
                                                               tmp_path: Path) -> None:
    _folder(runs_dir)
    port = free_port()
    ui = subprocess.Popen([sys.executable, "-m", "runwatch", "ui", str(runs_dir), "--port",
                           str(port), "--db", str(tmp_path / "ui.db")],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert "runwatch is serving" in first_line(ui, what="runwatch ui to start")
        first = httpx.get(f"http://127.0.0.1:{port}/api/runs", params={"limit": 100},
                          timeout=30)
        assert first.status_code == 200
        # answered while its first pass still reads the folder (before: once every run
        # was read, 30 of 30)
        assert len(first.json()["runs"]) < RUNS, "the first answer waited for the first pass"
    finally:
        ui.terminate()
        ui.wait(timeout=60)
