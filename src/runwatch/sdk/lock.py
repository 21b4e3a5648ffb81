"""One recording process per run: an exclusive lock on the run folder, held for the run's life.

The lock is `flock` on the folder itself, so the run format gains no file and the
indexer sees nothing new. The kernel drops it when the process ends, however it ends,
so a crashed run can always be resumed. A flock belongs to the open file, which a forked
child shares: `release()` unlocks it explicitly (closing this process's descriptor would
leave it held while a child's copy is open), and a forked child closes its copies at
once without unlocking (`_close_inherited`), so a worker that outlives its parent (a
persistent DataLoader or Pool worker) holds no run. An exec'd child gets no copy (the
descriptor is not inheritable).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
import warnings
import weakref
from pathlib import Path

from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line


class RunLock:
    """The held lock of one run folder; `release()` (or the process ending) lets it go.

    `wait_s` is how long to wait for a lock another holder has (job control holds a
    folder's lock for moments, to append to it) before giving up.
    """

    def __init__(self, run_dir: Path, wait_s: float = 0.0) -> None:
        self.run_dir = run_dir
        self._fd: int | None = None
        self.acquire(wait_s)

    def acquire(self, wait_s: float = 0.0) -> None:
        """Take the lock of the folder now at `run_dir` (again, after it was made anew),
        waiting up to `wait_s` seconds while someone else holds it.

        Raises RunDirError when a live process, this one included, records the run.
        """
        self.release()
        fd = os.open(self.run_dir, os.O_RDONLY | os.O_DIRECTORY)
        deadline = time.monotonic() + wait_s
        try:
            while not _try_lock(fd):
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise fmt.RunDirError(
                        f"{self.run_dir} is being recorded by a live process"
                        f"{_holder(self.run_dir)}: wait for it to finish, stop it, or "
                        "choose another run name")
                time.sleep(0.02)
        except OSError as exc:
            # Some network filesystems lock nothing; recording must still work there.
            warnings.warn(f"runwatch: cannot lock {self.run_dir} ({exc.strerror or exc}); a "
                          "second process recording this run at the same time would not be "
                          "stopped", RuntimeWarning, stacklevel=3)
        self._fd = fd
        _HELD.add(self)

    def release(self) -> None:
        """Let the folder go: unlock it, then close the descriptor (see the module's note)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        _HELD.discard(self)

    def _close_inherited(self) -> None:
        """In a forked child: close this process's copy of the descriptor, never unlocking
        it (that would let go the parent's lock, which the open file shares)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


# The locks this process holds, for a forked child to close its copies of. Process-wide
# because fork is.
_HELD: weakref.WeakSet[RunLock] = weakref.WeakSet()


def _close_inherited() -> None:
    """A forked child's copies of its parent's locks: closed, so that the child, which
    records none of its parent's runs, does not keep them locked should it outlive it."""
    for lock in list(_HELD):
        lock._close_inherited()
    _HELD.clear()


os.register_at_fork(after_in_child=_close_inherited)


class LetGoAfter:
    """Releases a held RunLock once each of the `count` writers of its folder (the run's
    writer, its sender) has said, by calling `done`, that it writes nothing more there;
    whichever thread says so last releases it."""

    def __init__(self, lock: RunLock, count: int) -> None:
        self._lock = lock
        self._left = count
        self._guard = threading.Lock()

    def done(self) -> None:
        with self._guard:
            self._left -= 1
            last = self._left == 0
        if last:
            self._lock.release()


def _try_lock(fd: int) -> bool:
    """Take the exclusive lock on `fd` if no one holds it; False when someone does."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder(run_dir: Path) -> str:
    """' (pid N on host H)' from the run's manifest, or '' when it cannot be read."""
    try:
        manifest = loads_line((run_dir / fmt.MANIFEST).read_bytes())
        return f" (pid {int(manifest['pid'])} on {manifest['host']})"
    except (OSError, ValueError, KeyError, TypeError):
        return ""
