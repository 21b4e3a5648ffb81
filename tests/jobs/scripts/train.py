"""Train for a while: log `loss` and the attempt number (what job control tells the
process in RUNWATCH_ATTEMPT) every 50 ms until `--seconds` pass, then finish.

Something outside stops it (SIGKILL, cancel), or it succeeds. `--fail-if FILE` fails the
run (after its metrics) while FILE exists, so a test can fix the cause and retry.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import runwatch
from runwatch.rundir.format import ENV_ATTEMPT


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--steps", type=int, default=None, help="stop after this many steps")
    ap.add_argument("--fail-if", type=Path, default=None)
    args = ap.parse_args()
    attempt = int(os.environ.get(ENV_ATTEMPT, "1"))
    with runwatch.init(project="e2e") as run:
        end = time.monotonic() + args.seconds
        step = 0
        while time.monotonic() < end and (args.steps is None or step < args.steps):
            run.log({"loss": 1.0 / (step + 1), "attempt": attempt}, step=step)
            step += 1
            time.sleep(0.05)
        if args.fail_if is not None and args.fail_if.exists():
            raise RuntimeError(f"runwatch_e2e_secret: {args.fail_if} says the data is broken")


if __name__ == "__main__":
    main()
