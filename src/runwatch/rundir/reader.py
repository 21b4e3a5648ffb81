"""Incremental, offset-based reading of a run's append-only JSONL files.

A reader resumes from a saved byte offset and returns only complete lines: a torn
last line (the writer crashed, or is mid-write) is left for the next read. A line that
is not a JSON object with an integer `seq` is skipped and reported with its line
number; the lines after it are still read. Files are opened by `runwatch.rundir.safeio`
(no symbolic links, regular files only).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from runwatch.rundir.jsonl import NUL_ESCAPE, loads_line
from runwatch.rundir.safeio import open_run_file

# Read big files in slices so one huge file never needs to sit in memory at once.
READ_CHUNK = 8 * 1024 * 1024


@dataclass
class BadLine:
    """A line that was skipped, with where it is and why."""

    file: str
    line_no: int
    error: str


@dataclass
class ReadResult:
    """What one incremental read of a file produced."""

    records: list[dict[str, Any]]
    offset: int
    line_no: int
    bad: list[BadLine] = field(default_factory=list)
    torn: bool = False
    # each record's line as the file holds it (no newline), when asked for (`keep_lines`)
    lines: list[bytes] = field(default_factory=list)
    # the read ended before records it was asked to hold (`hold`)
    held: bool = False


def read_new(path: Path, offset: int = 0, line_no: int = 0, limit: int = READ_CHUNK,
             max_line: int | None = None, keep_lines: bool = False,
             hold: Callable[[dict[str, Any]], bool] | None = None) -> ReadResult:
    """Read complete lines of `path` from byte `offset` (the file's `line_no` lines precede it).

    At most about `limit` bytes are consumed, or one line longer than that, alone, up to
    `max_line` (by default `limit`; a longer line is reported as broken and skipped), so
    what one read holds is bounded by the larger of the two: call again with the returned
    offset until the offset stops moving. A file that
    shrank below `offset` (it was replaced) is an error the caller decides about: it is
    reported as a bad line and nothing is read. A file that is a symbolic link or not a
    regular file raises `runwatch.rundir.safeio.UnsafeFile`. With `keep_lines`, `lines`
    holds each record's line as read (to send on without encoding it again). With `hold`,
    the records at the end of the read for which `hold(record)` is true are left unread:
    the read ends at the start of the first one's line, and says so (`held`).
    """
    limit = max(limit, 1)
    max_line = max(max_line or limit, limit)
    name = path.name
    try:
        f = open_run_file(path)
    except FileNotFoundError:
        return ReadResult([], offset, line_no)
    with f:
        size = os.fstat(f.fileno()).st_size
        if size < offset:
            shrank = BadLine(name, line_no, f"the file shrank from {offset} to {size} bytes")
            return ReadResult([], offset, line_no, [shrank])
        if size == offset:
            return ReadResult([], offset, line_no)
        f.seek(offset)
        data = f.read(min(size - offset, limit))
        if b"\n" not in data and len(data) < size - offset and max_line > limit:
            data += f.read(min(size - offset, max_line) - len(data))
            # a line longer than `limit` is read alone, not with the lines after it: a
            # sender sends it in a request of its own (runwatch.sdk.upload)
            data = data[:data.find(b"\n") + 1] or data
        if b"\n" not in data and len(data) >= max_line:
            # One line longer than max_line: skip it whole, as one bad line, once its
            # end is written (until then it is a torn line like any other).
            end_of_line = _find_newline(f, offset + len(data))
            if end_of_line < 0:
                return ReadResult([], offset, line_no, torn=True)
            too_long = BadLine(name, line_no + 1,
                               f"the line is longer than {max_line} bytes; skipped")
            return ReadResult([], end_of_line + 1, line_no + 1, [too_long])
    end = data.rfind(b"\n")
    if end < 0:
        return ReadResult([], offset, line_no, torn=True)
    chunk = data[: end + 1]
    first_line = line_no
    records: list[dict[str, Any]] = []
    bad: list[BadLine] = []
    lines: list[bytes] = []
    # one look at the chunk, not one per line; most chunks (metrics) hold no backslash at
    # all, which is found 50 times faster than the escape itself
    nul_free = b"\\" not in chunk or NUL_ESCAPE not in chunk
    for line in chunk.splitlines():
        line_no += 1
        if not line.strip():
            continue
        try:
            obj = loads_line(line, nul_free)
        except ValueError as exc:
            bad.append(BadLine(name, line_no, f"not JSON ({str(exc).splitlines()[0][:120]})"))
            continue
        if not isinstance(obj, dict):
            bad.append(BadLine(name, line_no, "not a JSON object"))
            continue
        seq = obj.get("seq")
        if type(seq) is not int:
            bad.append(BadLine(name, line_no, "no integer 'seq' field"))
            continue
        obj["_line"] = line_no
        records.append(obj)
        if keep_lines:
            lines.append(line)
    kept = len(records)
    while hold is not None and kept and hold(records[kept - 1]):
        kept -= 1
    if kept < len(records):
        at = records[kept]["_line"] - 1  # the lines before the first record held
        cut = sum(map(len, chunk.splitlines(keepends=True)[:at - first_line]))
        return ReadResult(records[:kept], offset + cut, at, [b for b in bad if b.line_no <= at],
                          lines=lines[:kept], held=True)
    return ReadResult(records, offset + len(chunk), line_no, bad, torn=end + 1 < len(data),
                      lines=lines)


def _find_newline(f: BinaryIO, start: int) -> int:
    """The offset of the first newline at or after `start` in `f`, or -1."""
    f.seek(start)
    pos = start
    while chunk := f.read(READ_CHUNK):
        i = chunk.find(b"\n")
        if i >= 0:
            return pos + i
        pos += len(chunk)
    return -1
