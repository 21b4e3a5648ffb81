"""The real `runwatch` command line, run as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Only stops a hung command from hanging the suite.
CLI_DEADLINE_S = 300


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `runwatch ARGS` as a real subprocess."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "runwatch", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=CLI_DEADLINE_S)
    if check and proc.returncode != 0:
        raise AssertionError(f"runwatch {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc
