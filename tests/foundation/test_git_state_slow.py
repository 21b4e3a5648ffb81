"""A manifest keeps its git sha when `git status` is slower than its timeout.

`git rev-parse HEAD` answers at once; `git status` walks the tree and, in a large
repository on a loaded machine, can outrun the SDK's timeout. The whole git state used
to be dropped then (null); now the sha stays and only `dirty` is unknown (null).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runwatch.sdk.environment import git_state


def test_a_git_status_slower_than_its_timeout_keeps_the_sha(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.which("git")
    assert real is not None
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "one"]):
        subprocess.run([real, *args], cwd=repo, env=env, check=True)
    sha = subprocess.run([real, "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                         text=True, check=True).stdout.strip()
    shim = tmp_path / "bin" / "git"  # a git whose status hangs, as on a huge tree
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nif [ "$1" = status ]; then exec sleep 60; fi\n'
                    f'exec {real} "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    assert git_state(repo, timeout_s=2.0) == {"sha": sha, "dirty": None}
