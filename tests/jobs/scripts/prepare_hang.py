"""Start preparing (one tokenize progress event) and then hang, reporting nothing more, as
a job stuck reading its data does; the worker's startup timeout has to end it."""

from __future__ import annotations

import time

import runwatch

HANG_S = 600.0  # far past any startup timeout a test sets; the process then ends itself


def main() -> None:
    run = runwatch.init(project="e2e", phase="PREPARING")
    run.set_phase("PREPARING", stage="tokenize", done=0, total=100)
    time.sleep(HANG_S)
    run.finish()


if __name__ == "__main__":
    main()
