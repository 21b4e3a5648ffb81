"""End the process after recording RUNNING and a metric, without finishing the run and
without a traceback: the SDK gets no chance to record how it ended.

`exit_early.py [CODE [preparing]]`: exit with CODE (3 by default); with `preparing`, after
recording only a stage of PREPARING, no RUNNING and no metric."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import runwatch
from runwatch.rundir.format import EVENTS, METRICS

FLUSH_DEADLINE_S = 30.0


def main() -> None:
    code = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    preparing = sys.argv[2:] == ["preparing"]
    run = runwatch.init(project="e2e", phase="PREPARING" if preparing else "RUNNING")
    assert run.dir is not None
    if preparing:
        run.set_phase("PREPARING", stage="tokenizing", done=0, total=1)
    else:
        run.log({"loss": 1.0}, step=0)
    end = time.monotonic() + FLUSH_DEADLINE_S
    while not written(run.dir, preparing) and time.monotonic() < end:
        time.sleep(0.05)  # the SDK's writer has put it on disk
    os._exit(code)


def written(run_dir: Path, preparing: bool) -> bool:
    """Whether what the script records is on disk: its stage, or its metric."""
    if preparing:
        events = run_dir / EVENTS
        return events.exists() and b"tokenizing" in events.read_bytes()
    return (run_dir / METRICS).exists()


if __name__ == "__main__":
    main()
