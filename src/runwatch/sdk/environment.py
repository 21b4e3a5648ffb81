"""What a run's manifest records about where it ran: git state, host, Python and packages."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

# Packages whose versions explain a training run's behaviour, recorded when installed.
TRACKED_PACKAGES = ("runwatch", "torch", "transformers", "trl", "peft", "numpy", "wandb")


def git_state(cwd: Path | None = None) -> dict[str, Any] | None:
    """{"sha", "dirty"} of the repository around `cwd`, or None outside one."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5
        )
        if sha.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd, capture_output=True, text=True, timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {"sha": sha.stdout.strip(), "dirty": bool(status.stdout.strip())}


def package_versions() -> dict[str, str]:
    versions = {}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def environment() -> dict[str, Any]:
    """The host, process and software a run is recorded from."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "argv": list(sys.argv),
        "packages": package_versions(),
        "git": git_state(),
    }
