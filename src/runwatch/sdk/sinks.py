"""Where the writer's bytes wait until the disk takes them: one sink per file.

A `LineSink` appends whole lines to a JSONL file. It opens the file by
`runwatch.rundir.torn.open_append`, which ends a torn last line (one a process that died
mid-line left: a resumed or attached run's) before the first line is written. When the
disk refuses a write part way through a line, the fragment is cut off again (the file
ends at the last complete line) and the line is kept to retry from its beginning, so no
record is torn or glued to another. `WholeFiles` holds whole-file writes (sample files,
and a manifest or engine config that could not be written at the call) until one
succeeds. Both remember what is still unwritten, so a run that ends on a full disk can
say how much it lost.

Nothing waits here long on a disk that takes writes: the writer writes whenever
`FLUSH_BYTES` wait. Only while the disk refuses writes does it trim a sink (`trim`) to
`MAX_PENDING_BYTES`, dropping the oldest. A sample file never grows past what its readers
read (`SAMPLES_CAP`): samples that would pass it are left out of it and counted.
"""

from __future__ import annotations

import collections
import contextlib
import os
from pathlib import Path
from typing import Any

from runwatch.rundir.atomic import write_atomic
from runwatch.rundir.jsonl import dumps_line, loads_line
from runwatch.rundir.safeio import CAPS, SAMPLES_CAP
from runwatch.rundir.torn import open_append
from runwatch.sdk.encode import warn

# Bytes kept for retry while the disk refuses writes; past this the oldest are dropped.
MAX_PENDING_BYTES = 64 * 1024 * 1024
# Encoded bytes the writer lets wait before it writes them, even within one batch: a burst
# of large records (sample files, long log lines) is written as it comes, so a disk that
# takes writes never makes MAX_PENDING_BYTES wait.
FLUSH_BYTES = 8 * 1024 * 1024


class LineSink:
    """Appends whole lines to one file with O_APPEND, remembering exactly what is unwritten."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.pending: collections.deque[bytes] = collections.deque()
        self.pending_bytes = 0
        self.dropped = 0

    def add(self, line: bytes) -> None:
        self.pending.append(line)
        self.pending_bytes += len(line)

    def trim(self) -> None:
        """Drop the oldest lines past MAX_PENDING_BYTES, counted in `dropped` (the writer
        calls this only while the disk refuses writes: keep the newest)."""
        if self.pending_bytes <= MAX_PENDING_BYTES:
            return
        before = self.dropped
        while self.pending_bytes > MAX_PENDING_BYTES and len(self.pending) > 1:
            oldest = self.pending.popleft()
            self.pending_bytes -= len(oldest)
            self.dropped += oldest.count(b"\n")
        if before == 0 < self.dropped:
            _warn_dropping(f"{self.path}", "lines")

    @property
    def unwritten(self) -> int:
        """Lines not yet on disk."""
        return sum(chunk.count(b"\n") for chunk in self.pending)

    def flush(self) -> bool:
        """Write everything pending; True when the file had vanished and was made anew.

        Raises OSError with the rest still pending.
        """
        if not self.pending:
            return False
        remade = False
        if self.fd is not None and not self._still_ours():
            # The file was removed or replaced: writes to the old descriptor would vanish.
            self.close()
            remade = True
        if self.fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # A torn last line, left by a process that died mid-line or a fragment _cut
            # could not cut, is ended before the first line: nothing is glued onto it.
            self.fd = open_append(self.path)
        data = b"".join(self.pending)
        self.pending.clear()
        self.pending_bytes = 0
        view = memoryview(data)
        try:
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
        except OSError:
            done = len(data) - len(view)
            # Retry from the beginning of the line being written, and cut its fragment
            # off the file so that the file ends at the last complete line.
            start = data.rfind(b"\n", 0, done) + 1
            if done > start:
                self._cut(done - start)
            self.add(data[start:])
            self.close()  # the next flush opens it again, ending what _cut could not cut
            raise
        return remade

    def _cut(self, fragment: int) -> None:
        """Truncate the `fragment` bytes just written; if that fails, the next open ends
        them (open_append)."""
        assert self.fd is not None
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, os.fstat(self.fd).st_size - fragment)

    def _still_ours(self) -> bool:
        assert self.fd is not None
        try:
            return os.stat(self.path).st_ino == os.fstat(self.fd).st_ino
        except OSError:
            return False

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


class WholeFiles:
    """Whole-file writes of one run folder waiting for the disk, retried on every flush.

    A sample file gathers the samples of its step: new ones are added to those already
    in the file. Other files are replaced whole, the newest content winning.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        # file name -> bytes to write whole, or a samples payload to add to the file
        self.pending: dict[str, bytes | dict[str, Any]] = {}
        self._sizes: dict[str, int] = {}
        self.pending_bytes = 0
        self.dropped = 0

    def replace(self, name: str, data: bytes) -> bool:
        """Queue `data` as the whole file `name`; False (nothing queued) when it is larger
        than its readers read (runwatch.rundir.safeio.CAPS)."""
        cap = CAPS.get(name)
        if cap is not None and len(data) > cap:
            return False
        self._keep(name, data, len(data))
        return True

    def add_samples(self, name: str, payload: dict[str, Any], size: int) -> int:
        """Queue `payload` (JSON values only, `size` bytes encoded) for sample file `name`,
        less the last of its samples when the file would pass SAMPLES_CAP, the most its
        readers read: how many samples were left out."""
        held = self._sizes.get(name, 0) + _size_on_disk(self.run_dir / name)
        given = len(payload["samples"])
        if held + size > SAMPLES_CAP:
            # the sizes add up to a little more than the file they make (one header each)
            payload, size = _fitting(payload, SAMPLES_CAP - held)
        left_out = given - len(payload["samples"])
        if left_out and not payload["samples"]:
            return left_out
        waiting = self.pending.get(name)
        if isinstance(waiting, dict):
            payload = {**payload, "samples": waiting["samples"] + payload["samples"]}
            size += self._sizes[name]
        self._keep(name, payload, size)
        return left_out

    def _keep(self, name: str, content: bytes | dict[str, Any], size: int) -> None:
        self.pending_bytes += size - self._sizes.get(name, 0)
        self.pending[name] = content
        self._sizes[name] = size

    def trim(self) -> None:
        """As LineSink.trim: drop the oldest files past MAX_PENDING_BYTES, counted."""
        if self.pending_bytes <= MAX_PENDING_BYTES:
            return
        before = self.dropped
        while self.pending_bytes > MAX_PENDING_BYTES and len(self.pending) > 1:
            oldest = next(iter(self.pending))
            self.dropped += _records(self.pending.pop(oldest))
            self.pending_bytes -= self._sizes.pop(oldest)
        if before == 0 < self.dropped:
            _warn_dropping(f"files of {self.run_dir}", "files")

    @property
    def unwritten(self) -> int:
        """Records not yet on disk: each sample, and each whole file."""
        return sum(_records(p) for p in self.pending.values())

    def flush(self) -> None:
        """Write every pending file; raises the first OSError, the failed ones kept."""
        error: OSError | None = None
        for name, content in list(self.pending.items()):
            try:
                self._write(name, content)
            except OSError as exc:
                error = error or exc
                continue
            del self.pending[name]
            self.pending_bytes -= self._sizes.pop(name)
        if error is not None:
            raise error

    def _write(self, name: str, content: bytes | dict[str, Any]) -> None:
        path = self.run_dir / name
        if isinstance(content, bytes):
            write_atomic(path, content)
            return
        try:
            old = loads_line(path.read_bytes())
            before = old.get("samples") if isinstance(old, dict) else None
        except FileNotFoundError:
            before = None
        except ValueError:
            before = None  # a damaged file is replaced by the samples we hold
        if isinstance(before, list):
            content = {**content, "samples": before + content["samples"]}
        write_atomic(path, dumps_line(content))


def _size_on_disk(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _fitting(payload: dict[str, Any], room: int) -> tuple[dict[str, Any], int]:
    """`payload` with as many of its first samples as fit in `room` bytes encoded, and its
    size encoded."""
    size = len(dumps_line({**payload, "samples": []}))
    kept = 0
    for sample in payload["samples"]:
        more = len(dumps_line(sample))  # its newline stands for the comma before it
        if size + more > room:
            break
        size += more
        kept += 1
    return {**payload, "samples": payload["samples"][:kept]}, size


def _records(content: bytes | dict[str, Any]) -> int:
    """The records a pending file holds: each of its samples, or the file itself."""
    return len(content["samples"]) if isinstance(content, dict) else 1


def _warn_dropping(what: str, kind: str) -> None:
    warn(f"runwatch: {what} could not be written for so long that more than "
         f"{MAX_PENDING_BYTES >> 20} MiB waited; the oldest {kind} are being dropped "
         "(counted in run.dropped_lines)")
