"""Job control's writes to a run folder, under the folder's lock (the one-writer rule).

Submit, the workers, cancel, retry and the reaper write to a run folder only while they
hold its RunLock (runwatch.sdk.lock), which the run's own process holds while it
records: so they write before the process starts and after it exits, never beside it.
`locked` waits for the lock up to a deadline; `append_events` takes it and appends.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import dumps_line
from runwatch.rundir.reader import read_new
from runwatch.rundir.torn import open_append, torn_seq
from runwatch.sdk.lock import RunLock

# How long job control waits for a run's process to let go of its folder by default.
WAIT_S = 10.0


class RunBusy(fmt.RunDirError):
    """A run folder's lock was not free within the wait: a process still records it."""


@contextlib.contextmanager
def locked(run_dir: Path, wait_s: float = WAIT_S) -> Iterator[None]:
    """Hold `run_dir`'s lock for the block, waiting up to `wait_s` seconds for it.

    Raises RunBusy when a process still holds it after the wait.
    """
    try:
        lock = RunLock(run_dir, wait_s)
    except fmt.RunDirError as exc:
        raise RunBusy(str(exc)) from None
    try:
        yield
    finally:
        lock.release()


def records(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete record of record file `path` in file order (none when it is
    missing), read in pieces."""
    offset, line_no = 0, 0
    while True:
        res = read_new(path, offset, line_no)
        yield from res.records
        if res.offset == offset:
            return
        offset, line_no = res.offset, res.line_no


def next_seq(path: Path) -> int:
    """The seq the next record of record file `path` takes: one past the highest there
    (0 for a missing or empty file): of every line a reader reads, up to MAX_LINE_BYTES
    long, and of a torn last line when it is a record whole but for its newline (the next
    writer ends it, runwatch.rundir.torn, and it is read)."""
    return scan(path)[0]


def scan(path: Path) -> tuple[int, float | None]:
    """Of record file `path`, read once: the seq its next record takes (`next_seq`), and
    the latest time (`ts`) of its complete records (None when none has one)."""
    top, offset, line_no = -1, 0, 0
    latest: float | None = None
    while True:
        res = read_new(path, offset, line_no, max_line=fmt.MAX_LINE_BYTES)
        for rec in res.records:
            top = max(top, rec["seq"])
            ts = rec.get("ts")
            if isinstance(ts, int | float) and not isinstance(ts, bool) \
                    and (latest is None or ts > latest):
                latest = float(ts)
        if res.offset == offset:
            break
        offset, line_no = res.offset, res.line_no
    torn = torn_seq(path, offset)
    return max(top, -1 if torn is None else torn) + 1, latest


def write_records(run_dir: Path, name: str, records: Sequence[dict[str, Any]]) -> None:
    """Append `records` to record file `name` (one of format.FILES) with the next seqs
    (and `ts` now where absent), and fsync. The caller holds the folder's lock (see
    `locked`)."""
    if name not in fmt.FILES:
        raise ValueError(f"{name!r} is not a record file ({', '.join(fmt.FILES)})")
    path = run_dir / name
    seq = next_seq(path)
    lines = [dumps_line({"ts": time.time(), **rec, "seq": seq + i})
             for i, rec in enumerate(records)]
    fd = open_append(path, os.O_NOFOLLOW)  # a torn last line is ended first
    try:
        os.write(fd, b"".join(lines))
        os.fsync(fd)
    finally:
        os.close(fd)


def write_events(run_dir: Path, records: Sequence[dict[str, Any]]) -> None:
    """Append event `records` to events.jsonl (see write_records); the caller holds the
    folder's lock."""
    write_records(run_dir, fmt.EVENTS, records)


def append_events(run_dir: Path, records: Sequence[dict[str, Any]], *,
                  wait_s: float = WAIT_S) -> None:
    """Append event `records` to a run folder under its lock, waiting up to `wait_s`
    seconds for the lock (RunBusy when it stays held)."""
    with locked(run_dir, wait_s):
        write_events(run_dir, records)
