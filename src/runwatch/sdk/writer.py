"""The background writer: one thread that appends a run's records to its files in batches.

`Run.log()` only appends to an in-memory deque. This thread drains it at most every
`interval` seconds (sooner when the backlog passes `max_backlog`, which also makes the
producer wait, so memory stays bounded when the loop outruns the disk). An I/O error
becomes one warning; the unwritten bytes are kept and retried, so logging resumes when
the disk is writable again.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runwatch.rundir import format as fmt
from runwatch.rundir.atomic import write_atomic
from runwatch.rundir.jsonl import dumps_line, loads_line

# Bytes kept for retry while the disk refuses writes; past this the oldest are dropped.
MAX_PENDING_BYTES = 64 * 1024 * 1024

# Metric records whose values are all of these types need no per-value check.
_PLAIN_NUMBERS = frozenset({float, int})

# A queued item: (file name, record) for JSONL files, or (sample file name, payload).
Item = tuple[str, dict[str, Any]]


class _FileSink:
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
        if self.pending_bytes <= MAX_PENDING_BYTES:
            return
        # Only a disk that refuses writes for long lets this much wait: keep the newest.
        before = self.dropped
        while self.pending_bytes > MAX_PENDING_BYTES and len(self.pending) > 1:
            self.pending_bytes -= len(self.pending.popleft())
            self.dropped += 1
        if before == 0:
            _warn(f"runwatch: {self.path} could not be written for so long that more than "
                  f"{MAX_PENDING_BYTES >> 20} MiB waited; the oldest lines are being dropped")

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
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        data = b"".join(self.pending)
        self.pending.clear()
        self.pending_bytes = 0
        view = memoryview(data)
        try:
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
        except OSError:
            rest = bytes(view)
            # Restart a half-written line from its beginning so no fragment is glued
            # to the next line; the reader dedups the repeated seq.
            start = data.rfind(b"\n", 0, len(data) - len(rest)) + 1
            self.add(data[start:])
            self.close()
            raise
        return remade

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


class BackgroundWriter:
    """Owns the files of one run directory and the thread that writes them."""

    def __init__(
        self,
        run_dir: Path,
        interval: float = 0.5,
        max_backlog: int = 10_000,
        restore: Callable[[], None] | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.interval = interval
        self.max_backlog = max_backlog
        self._restore = restore
        self.queue: collections.deque[Item] = collections.deque()
        self._sinks: dict[str, _FileSink] = {}
        self._seq: dict[str, int] = {}
        self._wake = threading.Event()
        self._drained = threading.Condition()
        self._stop = False
        self._io_failing = False
        self.io_warnings = 0
        self.dropped_values = 0
        self._warned_keys: set[str] = set()
        self._thread = threading.Thread(target=self._loop, name="runwatch-writer", daemon=True)

    def start(self, next_seq: dict[str, int]) -> None:
        self._seq = dict(next_seq)
        self._thread.start()

    def put(self, item: Item) -> None:
        """Queue one item; waits while the backlog is full (bounded memory)."""
        self.queue.append(item)
        if len(self.queue) > self.max_backlog:
            with self._drained:
                self._wake.set()
                while len(self.queue) > self.max_backlog and self._thread.is_alive():
                    self._drained.wait(0.1)

    def close(self, timeout: float = 30.0) -> None:
        """Write everything queued and stop the thread."""
        self._stop = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        else:
            self._drain()
        for sink in self._sinks.values():
            sink.close()

    @property
    def dropped_lines(self) -> int:
        """Lines given up after the disk refused writes for too long."""
        return sum(sink.dropped for sink in self._sinks.values())

    def flush_now(self) -> None:
        """Ask the thread to write at once (used by tests and finish())."""
        self._wake.set()

    def _loop(self) -> None:
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            stop = self._stop
            self._drain()
            with self._drained:
                self._drained.notify_all()
            if stop:
                return

    def _drain(self) -> None:
        """Encode and write everything queued, one bounded batch at a time.

        Writing after each batch (not once the queue is empty) keeps the encoded lines
        in memory bounded even while the producer keeps refilling the queue, and wakes
        a producer that waits on backpressure as soon as there is room.
        """
        q = self.queue
        while q:
            for _ in range(min(len(q), self.max_backlog)):
                self._encode(*q.popleft())
            self._flush_sinks()
            with self._drained:
                self._drained.notify_all()

    def _encode(self, name: str, record: dict[str, Any]) -> None:
        if name.endswith(".json"):
            self._write_samples(name, record)
            return
        seq = self._seq.get(name, 0)
        self._seq[name] = seq + 1
        record["seq"] = seq
        if name == fmt.METRICS and not _PLAIN_NUMBERS.issuperset(map(type, record.values())):
            self._check_values(record)
        sink = self._sinks.get(name)
        if sink is None:
            sink = self._sinks[name] = _FileSink(self.run_dir / name)
        sink.add(dumps_line(record))

    def _check_values(self, record: dict[str, Any]) -> None:
        """Drop (counted, warned once per key) values that are not numbers."""
        bad = None
        for key, value in record.items():
            t = type(value)
            if t is float or t is int or key in ("step", "ts", "seq"):
                continue
            if t is not bool and t is not str and hasattr(value, "__float__"):
                try:
                    record[key] = float(value)
                    continue
                except (TypeError, ValueError):
                    pass
            if t is bool:
                record[key] = int(value)
                continue
            bad = bad or []
            bad.append(key)
        for key in bad or ():
            value = record.pop(key)
            self.dropped_values += 1
            if key not in self._warned_keys:
                self._warned_keys.add(key)
                _warn(f"runwatch: metric {key!r} got {type(value).__name__} {value!r:.60}, "
                      "not a number; such values are dropped (counted in the run's summary)")

    def _flush_sinks(self) -> None:
        remade = False
        try:
            for sink in self._sinks.values():
                remade = sink.flush() or remade
        except OSError as exc:
            if not self._io_failing:
                self._io_failing = True
                self.io_warnings += 1
                _warn(f"runwatch: could not write to {self.run_dir} ({exc.strerror or exc}); "
                      "records are kept in memory and written when the disk accepts them")
            return
        if self._io_failing or remade:
            self._io_failing = False
            if self._restore is not None:
                with contextlib.suppress(OSError):
                    self._restore()

    def _write_samples(self, name: str, payload: dict[str, Any]) -> None:
        path = self.run_dir / name
        try:
            if path.exists():
                old = loads_line(path.read_bytes())
                payload = {**payload, "samples": list(old.get("samples", [])) + payload["samples"]}
            write_atomic(path, dumps_line(payload))
        except (OSError, ValueError) as exc:
            self.io_warnings += 1
            _warn(f"runwatch: could not write samples file {path} ({exc})")


def _warn(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=2)
