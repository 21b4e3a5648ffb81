"""A stand-in for a notebook's kernel (IPython is not installed here): one long-lived
process that runs cell after cell in one namespace; a cell's uncaught exception, Ctrl-C's
KeyboardInterrupt included, is shown and kept in sys.last_* (sys.excepthook is not
called, as IPython does not call it), and the next cell runs. Its process exiting is a
kernel restart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

KERNEL = r'''
import sys
namespace = {"__name__": "__main__"}
cell = []
for line in sys.stdin:
    if line.rstrip("\n") != "#%% end of cell":
        cell.append(line)
        continue
    try:
        exec(compile("".join(cell), "<cell>", "exec"), namespace)
    except BaseException as exc:
        sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, exc.__traceback__
        print(f"cell error: {type(exc).__name__}: {exc}", flush=True)
    cell = []
'''


def run_cells(cwd: Path, cells: list[str], timeout: float = 120.0) -> str:
    """Run `cells` one after another in a kernel started in `cwd`, then end it as a
    kernel restart does (its process exits); its output."""
    kernel = cwd / "kernel.py"
    kernel.write_text(KERNEL)
    done = subprocess.run([sys.executable, str(kernel)], cwd=cwd, text=True,
                          input="".join(f"{c}\n#%% end of cell\n" for c in cells),
                          capture_output=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def events(run_dir: Path) -> list[dict[str, object]]:
    """The run's events.jsonl records."""
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
