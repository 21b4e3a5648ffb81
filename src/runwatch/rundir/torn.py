"""A record file's torn end, the part after its last newline that a writer left when it
died mid-line, and how every writer that appends to the file ends it first.

Readers never read a torn line (runwatch.rundir.reader waits for its newline), so a
writer that appended its first line after one would glue it onto the fragment and lose
it with it. Every writer that appends to a record file of a run (the SDK's sinks on a new
run, a resume or an attach; job control's runwatch.rundir.append) opens it with
`open_append`, which ends a torn line with a newline: the fragment becomes one malformed
line that readers skip and report once, or, when it is a whole record short of only its
newline, that record (`torn_seq` says its seq, so the next record's seq comes after it).

The fragment is ended, not cut off: the file stays append-only, so a reader that has read
into the fragment (read_new reads a long line in two reads) never meets new bytes where
the fragment's were, a copy that grows by appending (`tail -f`, a sync) stays a prefix of
the file, and no record short only of its newline is lost.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from runwatch.rundir.format import MAX_LINE_BYTES
from runwatch.rundir.jsonl import loads_line
from runwatch.rundir.safeio import open_run_file


def open_append(path: Path, flags: int = 0) -> int:
    """A descriptor that appends to record file `path` (made, mode 0644, when missing),
    opened `O_WRONLY | O_APPEND | O_CREAT | flags`, once its torn last line, if any, is
    ended: the next line written starts a line of its own. Opened for writing only, as
    before: an open that blocks (a hung network filesystem) blocks the writer's thread,
    whose stall finish() waits out, not the training loop. Raises OSError (nothing left
    open) when the file cannot be opened or the newline cannot be written."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | flags, 0o644)
    try:
        end_torn(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def end_torn(fd: int, path: Path) -> bool:
    """End the torn last line of the record file `path`, open for appending as `fd`, with
    a newline; True when it had one. Its last byte is read through a descriptor of its
    own, of the same file (a regular one: anything else has no last line). The caller is
    the file's only writer (it holds the run folder's lock), so the fragment is no other
    writer's line in progress."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
        return False
    try:
        rfd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False  # cannot be read: nothing to judge (it is written as before)
    try:
        seen = os.fstat(rfd)
        if (seen.st_dev, seen.st_ino) != (st.st_dev, st.st_ino):
            return False  # replaced since: the file written is the one open as `fd`
        last = os.pread(rfd, 1, st.st_size - 1)
    finally:
        os.close(rfd)
    if last != b"\n":
        os.write(fd, b"\n")  # one byte with O_APPEND: written whole or not at all
        return True
    return False


def torn_seq(path: Path, offset: int) -> int | None:
    """The seq of the torn last line of record file `path`, which starts at byte `offset`
    (where its last complete line ends), when it is a record whole but for its newline
    (once a writer ends it, readers read it as one); None otherwise."""
    try:
        f = open_run_file(path)
    except FileNotFoundError:
        return None
    with f:
        size = os.fstat(f.fileno()).st_size
        if not 0 < size - offset < MAX_LINE_BYTES:  # none, or one readers skip once ended
            return None
        f.seek(offset)
        fragment = f.read(size - offset)
    if b"\n" in fragment:
        return None  # the file grew since `offset` was found: not a torn line
    try:
        rec = loads_line(fragment)
    except ValueError:
        return None
    seq = rec.get("seq") if isinstance(rec, dict) else None
    return seq if type(seq) is int else None
