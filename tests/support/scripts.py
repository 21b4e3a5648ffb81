"""A test's Python script run as a process of its own (the SDK's process-wide hooks: fork,
threads, exit), and a run's records read back from its folder."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

CHILD_TIMEOUT_S = 120


def run_script(code: str, runs_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run `code` (dedented) with `runs_dir` as its argument; it must exit 0."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), str(runs_dir)],
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def records(runs_dir: Path, name: str, file: str) -> list[dict[str, Any]]:
    """The records of run `name`'s `file`, in file order ([] when it has none)."""
    path = runs_dir / name / file
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]
