"""Shared fixtures: real folders, real SQLite files, the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    d.mkdir()
    return d


@pytest.fixture(autouse=True)
def _no_inherited_runwatch_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ("RUNWATCH_DIR", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    yield


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `runwatch ARGS` as a real subprocess."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "runwatch", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"runwatch {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc
