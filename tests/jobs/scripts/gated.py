"""Train until a gate opens: log `loss` every 50 ms until the file `GATE` exists, then
finish. A test opens the gate once it has seen what it waits for (two jobs running at
once), so the job runs exactly as long as the test needs. A gate that never opens ends
the job FAILED after `--deadline` seconds, so a broken test leaves nothing running.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import runwatch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("gate", type=Path)
    ap.add_argument("--deadline", type=float, default=300.0)
    args = ap.parse_args()
    with runwatch.init(project="ray") as run:
        end = time.monotonic() + args.deadline
        step = 0
        while not args.gate.exists():
            if time.monotonic() > end:
                raise TimeoutError(f"{args.gate} did not appear in {args.deadline:g} s")
            run.log({"loss": 1.0 / (step + 1)}, step=step)
            step += 1
            time.sleep(0.05)
        run.log({"loss": 0.0}, step=step)


if __name__ == "__main__":
    main()
