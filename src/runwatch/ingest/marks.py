"""Where the indexer stopped in a record file and how it recognises what it read there:
the offset and a hash of the bytes before it (its tail), kept with the offset
(ingest/offsets.py), and whether a file no longer holds them (replaced: shorter, or other
bytes before the offset). No database here: the read commands' unchanged check
(ingest/unchanged.py), which must not load SQLAlchemy, reads them too."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import NamedTuple

from runwatch.rundir.safeio import open_run_file


class Stopped(NamedTuple):
    """Where the indexer stopped in a record file: its offset, the tail of the bytes
    before it (None: none read yet, or read by a runwatch that kept no tail) and the
    file's mtime as it was read (None: not known)."""

    offset: int
    tail: str | None
    mtime: float | None = None


NOT_READ = Stopped(0, None)


TAIL_BYTES = 64


def tail_of(path: Path, offset: int) -> str | None:
    """The tail of a record file at `offset`: a hash of the up to TAIL_BYTES bytes before
    it; None at offset 0 or when the file is gone. Raises UnsafeFile (rundir/safeio)."""
    return stop_mark(path, offset)[0]


def stop_mark(path: Path, offset: int) -> tuple[str | None, float | None]:
    """The tail of a record file at `offset` and the file's mtime as it was read: kept with
    the offset, the mtime spares ingest/unchanged.py reading the tail of a file that has
    not been written since (None, None when the file is gone)."""
    try:
        with open_run_file(path) as f:
            mtime = os.fstat(f.fileno()).st_mtime
            if offset <= 0:
                return None, mtime
            start = max(0, offset - TAIL_BYTES)
            f.seek(start)
            data = f.read(offset - start)
    except FileNotFoundError:
        return None, None
    return hashlib.blake2b(data, digest_size=8).hexdigest(), mtime


def replaced(path: Path, at: Stopped, size: int | None = None,
             mtime: float | None = None) -> bool:
    """Whether a record file (of `size` bytes; by default its size now) no longer holds what
    the indexer read of it up to `at`. A tail of None (an index a runwatch that kept none
    wrote) trusts the bytes before the offset; a file that is gone is not replaced (what
    was read of it stays indexed)."""
    if at.offset <= 0:
        return False
    if size is None:
        try:
            size = path.lstat().st_size
        except FileNotFoundError:
            return False
    if size < at.offset:
        return True
    if at.tail is None:
        return False
    if size == at.offset and mtime is not None and mtime == at.mtime:
        return False  # not written since it was read: its tail is the one read
    now = tail_of(path, at.offset)
    return now is not None and now != at.tail


def holds_unread(path: Path, size: int, at: Stopped, mtime: float | None = None) -> bool:
    """Whether a record file of `size` bytes holds records the index lacks: bytes past
    where the indexer stopped (`at`), or other bytes before it."""
    return size > at.offset or replaced(path, at, size, mtime)


def replaced_message(path: Path) -> str:
    return (f"{path.name} of {path.parent.name} was replaced (it is shorter than what was "
            "read, or its start changed): read again")
