"""Whether the kernel's OOM killer ended a job: evidence, never a guess from SIGKILL alone.

Two sources, each used where it can be read: the kernel log (`/dev/kmsg`, which names
the pid it killed: "Killed process N" / "oom-kill:…pid=N"), and the OOM-kill counter of
each memory cgroup the job's processes were seen in (cgroup v2 `memory.events`
`oom_kill`; cgroup v1 `memory.oom_control` `oom_kill`, or `memory.failcnt` on kernels
without it), read when first seen and again when the job ended. The kernel log is
specific to the job's pids, so it decides when it can be read; a counter is shared by
everything in its cgroup, so it is the fallback. Nothing here raises: a source that
cannot be read is no evidence.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
from pathlib import Path

from runwatch.jobs.process import group_members

CGROUP_ROOT = Path("/sys/fs/cgroup")
KMSG = "/dev/kmsg"
# At most this much of the kernel log is read at a job's end (a busy log is not replayed).
KMSG_MAX_RECORDS = 20_000
_KILLED = re.compile(rb"(?:Killed process |oom-kill:.*?\bpid=)(\d+)")


class OomWatch:
    """Watches one job (its process group `pgid`) for the kernel OOM killer.

    Create it right after the job starts; call `observe()` now and then while it runs
    (it notes the cgroups and pids of the job's processes), and `killed(sig)` once it
    has ended.
    """

    def __init__(self, pgid: int) -> None:
        self.pgid = pgid
        self.pids: set[int] = {pgid}
        self._counters: dict[Path, int] = {}  # counter file -> its value when first seen
        self._kmsg: int | None = _open_kmsg()
        self.observe()

    def observe(self) -> None:
        """Note the job's current processes and the memory cgroups they are in."""
        for pid in {*group_members(self.pgid), self.pgid}:
            self.pids.add(pid)
            for counter in _counter_files(pid):
                if counter not in self._counters:
                    value = _read_counter(counter)
                    if value is not None:
                        self._counters[counter] = value

    def killed(self, sig: int | None) -> bool:
        """Whether the OOM killer ended the job, whose main process `sig` ended (None:
        it exited; a shell reports a killed child as exit 128 + 9, so pass that as 9)."""
        try:
            if sig != signal.SIGKILL:
                return False
            if self._kmsg is not None:
                return bool(self._killed_in_kmsg())
            return any((_read_counter(path) or 0) > before
                       for path, before in self._counters.items())
        finally:
            self.close()

    def close(self) -> None:
        if self._kmsg is not None:
            with contextlib.suppress(OSError):
                os.close(self._kmsg)
            self._kmsg = None

    def _killed_in_kmsg(self) -> set[int]:
        assert self._kmsg is not None
        found: set[int] = set()
        for _ in range(KMSG_MAX_RECORDS):
            try:
                record = os.read(self._kmsg, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records were overwritten; read on
                    continue
                break
            if not record:
                break
            m = _KILLED.search(record)
            if m and int(m.group(1)) in self.pids:
                found.add(int(m.group(1)))
        return found


def _open_kmsg() -> int | None:
    """/dev/kmsg opened at its end, so only what the kernel logs from now on is read."""
    try:
        fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        os.lseek(fd, 0, os.SEEK_END)
        os.read(fd, 8192)  # proves the log is readable (EAGAIN: nothing new yet)
    except BlockingIOError:
        return fd
    except OSError:
        os.close(fd)
        return None
    return fd


def _counter_files(pid: int) -> list[Path]:
    """The OOM-kill counter files of the memory cgroups `pid` is in."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return []
    files: list[Path] = []
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        rel = path.lstrip("/")
        if hierarchy == "0" and controllers == "":
            for base in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
                files.append(base / rel / "memory.events")
        elif "memory" in controllers.split(","):
            base = CGROUP_ROOT / "memory"
            files.append(base / rel / "memory.oom_control")
            files.append(base / rel / "memory.failcnt")
    existing = [f for f in files if f.is_file()]
    # With an oom_kill count at hand, failcnt (limit hits, often reclaimed) is not needed.
    if any(f.name == "memory.oom_control" and _read_counter(f) is not None for f in existing):
        existing = [f for f in existing if f.name != "memory.failcnt"]
    return existing


def _read_counter(path: Path) -> int | None:
    """The OOM-kill count in `path` (memory.events, memory.oom_control or memory.failcnt)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    if path.name == "memory.failcnt":
        return int(text.strip()) if text.strip().isdigit() else None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value.strip())
    return None
