"""End the process after recording RUNNING and a metric, without finishing the run and
without a traceback: the SDK gets no chance to record how it ended."""

from __future__ import annotations

import os
import time

import runwatch
from runwatch.rundir.format import METRICS

FLUSH_DEADLINE_S = 30.0


def main() -> None:
    run = runwatch.init(project="e2e")
    run.log({"loss": 1.0}, step=0)
    assert run.dir is not None
    end = time.monotonic() + FLUSH_DEADLINE_S
    while not (run.dir / METRICS).exists() and time.monotonic() < end:
        time.sleep(0.05)  # the SDK's writer has put the metric on disk
    os._exit(3)


if __name__ == "__main__":
    main()
