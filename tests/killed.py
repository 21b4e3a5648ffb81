"""A run whose training process died: started by a real subprocess that exits without
finishing it, so its manifest names a process that no longer exists; and a live one, to
kill or let finish."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def killed_run(runs_dir: Path, name: str) -> None:
    """Start run `name` in a child process that logs `loss` at step 0 and dies (exit 9) once
    that record is on disk."""
    code = ("import runwatch, os\nfrom tests.support import wait_for\n"
            f"run = runwatch.init(name={name!r}, dir={str(runs_dir)!r}, method='sft')\n"
            "run.log({'loss': 1.0}, step=0)\n"
            "metrics = run.dir / 'metrics.jsonl'\n"
            "wait_for(lambda: metrics.exists() and metrics.stat().st_size > 0, what='a record')\n"
            "os._exit(9)\n")
    done = subprocess.run([sys.executable, "-c", code], check=False, timeout=60, cwd=REPO)
    assert done.returncode == 9, "the child should die without finishing the run"


def live_process(runs_dir: Path, name: str, phase: str = "RUNNING", then: str = "",
                 log: bool = False) -> subprocess.Popen[str]:
    """A training process that starts run `name` in `phase` (and logs `loss` at step 0
    with `log`), prints `started`, and runs the code `then` (with `run` in scope) once a
    line comes on its stdin; with `then` empty it waits there until killed."""
    return subprocess.Popen([sys.executable, "-c", (
        "import sys, runwatch\n"
        f"run = runwatch.init(name={name!r}, dir=sys.argv[1], phase={phase!r})\n"
        + ("run.log({'loss': 1.0}, step=0)\n" if log else "")
        + "print('started', flush=True)\n"
        "sys.stdin.readline()\n" + then), str(runs_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
