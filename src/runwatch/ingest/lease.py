"""Which process indexes a runs folder now: a server's indexer (`runwatch ui`, `runwatch
server --runs-dir`) holds the folder's lease for its life, and says in it how many
passes it has made, so a read command (`runwatch runs list`) waits for a pass begun after
it asked instead of indexing the folder itself beside it.

Two indexers of one folder index the same files in turns (`ingest.offsets.lock_offsets`):
a read command that indexed beside a server's first pass over a new run of a million
points waited 20-40 s on the index's lock and did half the server's work, and printed
"database is locked" tracebacks where SQLite's wait ran out.

The lease is a `flock` on a lock file (let go by the kernel when the process dies) beside
an info file: the holder's pid, the runs folder, the index it writes (its URL without a
password) and its passes so far, written after each pass. Both lie with the index, never
in the runs folder, which a server may only read (a shared folder, one mounted read-only)
and whose `.runwatch/` it need not have: beside a SQLite index file (`index.indexer.lock`
beside `index.db`), and for an index in a database server (PostgreSQL) in this user's
runtime folder (`$XDG_RUNTIME_DIR/runwatch`, else `<tmp>/runwatch-<uid>`), named for the
runs folder and the index, where the user's read commands on this machine find it. Where
there is no such place, nobody holds the lease, and read commands index as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from runwatch.rundir.atomic import write_atomic

LOCK = "indexer.lock"
INFO = "indexer.json"
# How long a read command waits for the holder's next pass before it shows what the
# index holds (a first pass over a big folder takes minutes)
WAIT_S = 10.0
POLL_S = 0.05


class Lease:
    """The lease of a runs folder, held by one server's indexer (`take`)."""

    def __init__(self, runs_dir: Path, index: str) -> None:
        self.runs_dir = Path(runs_dir)
        self.index = index
        self.passes = 0
        self._fd: int | None = None
        self._files: tuple[Path, Path] | None = None

    def take(self) -> bool:
        """Hold the lease if no other process does; whether this one holds it now."""
        self._files = lease_files(self.runs_dir, self.index, make=True)
        if self._files is None:
            return False  # nowhere to keep it: read commands index the folder themselves
        try:
            fd = os.open(self._files[0],
                         os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        except OSError:
            return False  # a place this process cannot write: read commands index it
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
        assert self._files is not None
        with contextlib.suppress(OSError):  # a read command then waits, and then reads
            write_atomic(self._files[1], orjson.dumps(
                {"pid": os.getpid(), "runs": _folder_name(self.runs_dir), "index": self.index,
                 "passes": self.passes}))

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
    `index`, or None (no such process, or it indexes another folder or writes another
    index)."""
    files = lease_files(runs_dir, index, make=False)
    if files is None:
        return None
    try:
        fd = os.open(files[0], os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return _info(files[1], _folder_name(runs_dir), index)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None  # nobody holds it
    finally:
        os.close(fd)


def _info(path: Path, runs: str, index: str) -> Holder | None:
    """The holder the info file `path` names, if it indexes folder `runs` into `index`."""
    try:
        data = orjson.loads(path.read_bytes())
        if data["runs"] != runs or data["index"] != index:
            return None
        return Holder(int(data["pid"]), str(data["index"]), int(data["passes"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def lease_files(runs_dir: Path, index: str, make: bool = False) -> tuple[Path, Path] | None:
    """The lock file and the info file of the lease of folder `runs_dir` indexed into
    `index` (an index's name, `index_name`): beside a SQLite index file, else in this
    user's runtime folder (made when `make`); None where there is no such place (an index
    in memory, a runtime folder that is missing or not this user's alone)."""
    try:
        url = make_url(index)
    except ArgumentError:
        return None
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:":
            return None  # no other process can read it
        db = Path(url.database)
        return (db.parent / f"{db.stem}.{LOCK}", db.parent / f"{db.stem}.{INFO}")
    folder = _runtime_folder(make)
    if folder is None:
        return None
    key = hashlib.sha256(f"{_folder_name(runs_dir)}\n{index}".encode()).hexdigest()[:32]
    return folder / f"{key}.{LOCK}", folder / f"{key}.{INFO}"


def _runtime_folder(make: bool) -> Path | None:
    """This user's folder for the leases of indexes in a database server:
    $XDG_RUNTIME_DIR/runwatch, else <tmp>/runwatch-<uid>; None when it is not there (and
    cannot be made, with `make`) or is not a real folder only this user may enter (a
    shared tmp folder lets anyone make a name first)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    folder = (Path(base) / "runwatch" if base
              else Path(tempfile.gettempdir()) / f"runwatch-{os.getuid()}")
    if make:
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError:
            return None
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return folder


def _folder_name(runs_dir: Path) -> str:
    """How a lease names a runs folder: its real path."""
    return os.path.realpath(runs_dir)


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
