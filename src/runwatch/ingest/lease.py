"""Which process indexes a runs folder now: a server's indexer (`runwatch ui`, `runwatch
server --runs-dir`) holds the folder's lease for its life, and says in it how many
passes it has made, so a read command (`runwatch runs list`) waits for a pass begun after
it asked instead of indexing the folder itself beside it.

Two indexers of one folder index the same files in turns (`ingest.offsets.lock_offsets`):
a read command that indexed beside a server's first pass over a new run of a million
points waited 20-40 s on the index's lock and did half the server's work, and printed
"database is locked" tracebacks where SQLite's wait ran out.

The lease is a `flock` on `<runs>/.runwatch/indexer.lock` (let go by the kernel when the
process dies) beside `indexer.json`: the holder's pid, the index it writes (its URL
without a password) and its passes so far, written after each pass.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from runwatch.rundir.atomic import write_atomic

FOLDER = ".runwatch"
LOCK = "indexer.lock"
INFO = "indexer.json"
# How long a read command waits for the holder's next pass before it shows what the
# index holds (a first pass over a big folder takes minutes)
WAIT_S = 10.0
POLL_S = 0.05


class Lease:
    """The lease of a runs folder, held by one server's indexer (`take`)."""

    def __init__(self, runs_dir: Path, index: str) -> None:
        self.folder = Path(runs_dir) / FOLDER
        self.index = index
        self.passes = 0
        self._fd: int | None = None

    def take(self) -> bool:
        """Hold the lease if no other process does; whether this one holds it now."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.folder / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            return False  # a folder this process cannot write: read commands index it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        self._write()
        return True

    def passed(self) -> None:
        """One more pass is done (a no-op while the lease is not held)."""
        if self._fd is not None:
            self.passes += 1
            self._write()

    def _write(self) -> None:
        with contextlib.suppress(OSError):  # a read command then waits, and then reads
            write_atomic(self.folder / INFO, orjson.dumps(
                {"pid": os.getpid(), "index": self.index, "passes": self.passes}))

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


@dataclass(frozen=True)
class Holder:
    """The process that indexes a folder, as its lease says."""

    pid: int
    index: str
    passes: int


def holder(runs_dir: Path, index: str) -> Holder | None:
    """The process other than this open file that holds the folder's lease for index
    `index`, or None (no such process, or it writes another index)."""
    folder = Path(runs_dir) / FOLDER
    try:
        fd = os.open(folder / LOCK, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            info = _info(folder)
            if info is not None and info.index == index:
                return info
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None  # nobody holds it
    finally:
        os.close(fd)


def _info(folder: Path) -> Holder | None:
    try:
        data = orjson.loads((folder / INFO).read_bytes())
        return Holder(int(data["pid"]), str(data["index"]), int(data["passes"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def wait_for_pass(runs_dir: Path, index: str,
                  wait_s: float | None = None) -> tuple[bool, Holder | None]:
    """Whether another process indexes the folder into `index` (then the caller need not),
    and, when it does, its lease if it has not finished a pass begun after this call (its
    count up by 2) within `wait_s` (a long first pass: what the index holds is behind the
    folder), else None. (False, None) at once when nobody holds the lease, and when its
    holder stops meanwhile: the caller indexes the folder itself."""
    first = holder(runs_dir, index)
    if first is None:
        return False, None
    deadline = time.monotonic() + (WAIT_S if wait_s is None else wait_s)
    while True:
        now = holder(runs_dir, index)
        if now is None:
            return False, None
        if now.passes >= first.passes + 2:
            return True, None
        if time.monotonic() >= deadline:
            return True, now
        time.sleep(POLL_S)


def index_name(engine: Any) -> str:
    """How a lease names the index an engine writes: its URL without a password."""
    return str(engine.url.render_as_string(hide_password=True))
