"""The TensorBoard that `runwatch runs tensorboard` starts ends with the command, even when
the command is SIGKILLed and cannot stop it (Linux: PR_SET_PDEATHSIG)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import httpx
import pytest

import runwatch
from tests.interop.test_tensorboard import DEADLINE_S, _start
from tests.support import http, wait_for


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state, ppid, …), None once gone."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = [pid]
    while todo:
        parent = str(todo.pop())
        for entry in Path("/proc").iterdir():
            fields = _stat(int(entry.name)) if entry.name.isdigit() else None
            if fields is not None and fields[1] == parent:
                found.add(int(entry.name))
                todo.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")  # a zombie has ended


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_tensorboard_ends_when_the_command_is_killed(runs_dir: Path, tmp_path: Path) -> None:
    with runwatch.init(name="rl", dir=runs_dir, method="grpo") as run:
        run.log({"loss": 1.0}, step=0)
    command, url = _start(runs_dir, "rl", tmp_path / "tb")
    board = _descendants(command.pid)  # TensorBoard and its data server
    try:
        assert board and http.get(url, timeout=10).status_code == 200
        command.kill()
        command.communicate(timeout=DEADLINE_S)
        wait_for(lambda: not any(map(_alive, board)), what="TensorBoard to end with the "
                 "command that started it", deadline=DEADLINE_S)
        with pytest.raises(httpx.HTTPError):
            http.get(url, timeout=5)
    finally:
        for pid in board:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
