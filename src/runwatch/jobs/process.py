"""A job's process: started in a session (and so a process group) of its own, its
output in a file, stopped as a whole group, SIGTERM first and SIGKILL after a grace.

Nothing here blocks: a worker polls each of its jobs once a tick (`JobProcess.poll`), so
one worker loop runs and stops several jobs at once. Whatever a job leaves behind in
its group when its main process exits is killed then (`JobProcess.poll`), so a job's
devices are free once the worker has seen it end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# How much of the end of the output file feeds the failure classifier.
TAIL_BYTES = 16 * 1024


@dataclass
class JobProcess:
    """One started job: its main process, whose pid is its process group's id."""

    popen: subprocess.Popen[bytes]
    output: Path
    returncode: int | None = None
    # When the stop began (monotonic) and when SIGKILL follows if the group is not gone.
    stop_started: float | None = None
    kill_at: float | None = None
    killed: bool = False  # SIGKILL went to the group
    _done: bool = field(default=False, repr=False)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stop(self, grace_s: float) -> None:
        """Ask the whole group to stop (SIGTERM) and SIGKILL it `grace_s` seconds later
        (see `poll`). Asking again changes nothing."""
        if self.stop_started is not None:
            return
        self.stop_started = time.monotonic()
        self.kill_at = self.stop_started + grace_s
        signal_group(self.pid, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the whole group now, with no SIGTERM first: for a job that made no
        progress, so it has nothing to flush and must not record an end of its own."""
        self.stop_started = self.kill_at = time.monotonic()
        self.killed = signal_group(self.pid, signal.SIGKILL) or self.killed

    def poll(self) -> int | None:
        """The main process's returncode once it has ended and nothing of its group is
        left, else None. Sends the SIGKILL a stop's grace has run out for, and kills what
        the main process leaves in its group when it exits."""
        if self._done:
            return self.returncode
        if self.returncode is None:
            self.returncode = self.popen.poll()
        now = time.monotonic()
        if self.kill_at is not None and now >= self.kill_at and group_alive(self.pid):
            self.killed = signal_group(self.pid, signal.SIGKILL) or self.killed
        if self.returncode is None:
            return None
        if group_alive(self.pid):
            signal_group(self.pid, signal.SIGKILL)  # the main process ended; so does the job
            return None
        self._done = True
        return self.returncode

    def output_tail(self, limit: int = TAIL_BYTES) -> str:
        return tail(self.output, limit)


def start(argv: Sequence[str], cwd: Path, env: Mapping[str, str], output: Path) -> JobProcess:
    """Start `argv` in `cwd` in a new session, with the worker's environment plus `env`,
    stdin empty and stdout and stderr appended to `output` (its folder is made).

    Raises OSError when the program cannot be started (not found, not executable, or
    `cwd` missing); nothing is left running then.
    """
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "ab") as out:
        popen = subprocess.Popen(list(argv), cwd=cwd, env={**os.environ, **env},
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True, close_fds=True)
    return JobProcess(popen, output)


def signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to every process of group `pgid`; False when none is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed its user; the rest got the signal
        return True
    return True


def group_alive(pgid: int) -> bool:
    """Whether any process of group `pgid` still runs (its zombies aside once reaped)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _only_zombies(pgid)


def _only_zombies(pgid: int) -> bool:
    """True when every process of group `pgid` has exited and waits to be reaped by a
    parent that is not this process (a zombie holds nothing and cannot be killed)."""
    states = group_members(pgid).values()
    return bool(states) and all(state == "Z" for state in states)


def group_members(pgid: int, *, session: bool = False) -> dict[int, str]:
    """The processes of group `pgid` now (with `session`: of the session `pgid` leads,
    every group of it), each with its state letter (R, S, Z, ...)."""
    at = 3 if session else 2  # the field that holds the pgrp, or the session
    members: dict[int, str] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid pgrp session ...: comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > at and fields[at] == str(pgid).encode():
            members[int(entry)] = fields[0].decode()
    return members


def group_carries(pgid: int, env: Mapping[str, str]) -> bool:
    """Whether a live process of group `pgid` has every variable of `env` in its
    environment: proof that the group is the one a worker started with them (a group id
    is only given again once no process of the old group is left)."""
    want = {f"{k}={v}".encode() for k, v in env.items()}
    for pid, state in group_members(pgid).items():
        if state == "Z":
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                have = set(f.read().split(b"\0"))
        except OSError:  # gone meanwhile, or another user's
            continue
        if want <= have:
            return True
    return False


def tail(path: Path, limit: int = TAIL_BYTES) -> str:
    """The last `limit` bytes of `path` as text (from its first whole line), or '' when
    it cannot be read."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - limit))
            data = f.read(limit)
    except OSError:
        return ""
    if size > limit and b"\n" in data:
        data = data[data.index(b"\n") + 1:]
    return data.decode("utf-8", errors="replace")
