"""What a run's manifest records about where it ran: git state, host, Python and packages."""

from __future__ import annotations

import functools
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
# How long each git command may take (a huge repository, a loaded machine).
GIT_TIMEOUT_S = 5.0


def git_state(cwd: Path | None = None, timeout_s: float = GIT_TIMEOUT_S) -> dict[str, Any] | None:
    """{"sha", "dirty"} of the repository around `cwd`, or None outside one. `dirty` is
    None when git could not say within `timeout_s` (a large tree, a loaded machine): the
    sha, which git reads at once, is kept."""
    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=timeout_s)

    try:
        sha = git("rev-parse", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return None
    if sha.returncode != 0:
        return None
    try:
        status = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return {"sha": sha.stdout.strip(), "dirty": None}
    dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    return {"sha": sha.stdout.strip(), "dirty": dirty}


def package_versions() -> dict[str, str]:
    """The installed versions of TRACKED_PACKAGES (a copy; looked up once a process: each
    lookup scans the import path and parses a package's metadata, 0.1-0.3 s for the seven
    under load, on every runwatch.init; a process runs the packages it loaded first)."""
    return dict(_package_versions())


@functools.cache
def _package_versions() -> dict[str, str]:
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
