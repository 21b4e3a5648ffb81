"""The background writer: one thread that appends a run's records to its files in batches.

`Run.log()` only appends to an in-memory deque. This thread drains it at most every
`interval` seconds (sooner when the backlog passes `max_backlog`, which also makes the
producer wait, so memory stays bounded when the loop outruns the disk), and writes what it
encoded whenever `sinks.FLUSH_BYTES` of it wait. An I/O error becomes one warning; the
unwritten bytes are kept and retried (sinks.py), so logging resumes when the disk is
writable again. A record that cannot be encoded loses only its unencodable values
(encode.py), and no error in one batch stops the thread. No record is written that its
readers would skip (a line past `rundir.format.MAX_LINE_BYTES`, a file past its cap): a
log line is cut to fit, any other such record is left out. Every record left out, for
whatever reason, is counted, and the run's last event says how many.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runwatch.rundir import format as fmt
from runwatch.rundir.format import MAX_LINE_BYTES
from runwatch.rundir.safeio import CAPS, SAMPLES_CAP, MiB
from runwatch.sdk.encode import Encoder, warn
from runwatch.sdk.sinks import FLUSH_BYTES, LineSink, WholeFiles

# Metric records whose values are all of these types need no per-value check.
_PLAIN_NUMBERS = frozenset({float, int})

# A queued item: (file name, record) for JSONL files, or (sample file name, payload).
Item = tuple[str, dict[str, Any]]
# How long close() (a run's finish()) waits for the thread to write what is queued; read
# at each close().
CLOSE_WAIT_S = 30.0
# How long reading a count the writer keeps waits for what was logged before it.
SETTLE_S = 5.0


class BackgroundWriter:
    """Owns the files of one run directory and the thread that writes them."""

    def __init__(
        self,
        run_dir: Path,
        interval: float = 0.5,
        max_backlog: int = 10_000,
        restore: Callable[[], None] | None = None,
        moved: Callable[[Path], None] | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.interval = interval
        self.max_backlog = max_backlog
        self._restore = restore
        self._moved = moved
        # the run folder as opened at the start: where it is now, should it be renamed
        # while the run records (`_follow_move`)
        try:
            self._dir_fd: int | None = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            self._dir_fd = None
        self._moving = threading.Lock()
        self.queue: collections.deque[Item] = collections.deque()
        self._sinks: dict[str, LineSink] = {}
        self._files = WholeFiles(run_dir)
        self._encoder = Encoder()
        self._seq: dict[str, int] = {}
        self._wake = threading.Event()
        self._drained = threading.Condition()
        self._stop = False
        self._final: Item | None = None
        self._io_failing = False
        self._told_remade = False  # the folder was found removed, and the user told
        self._lost = 0  # unwritten when the run ended
        self._failed_records = 0  # records whose encoding met an error
        self._too_big = 0  # records left out because readers would skip them
        self._waiting = 0  # bytes added to the line sinks since they were last flushed
        self._told_too_big: set[str] = set()  # the files whose records were cut or left out
        self.io_warnings = 0
        self.errors = 0
        self._warned_keys: set[str] = set()
        # Whether the last batch was written, and what to call then when close() gave up
        # waiting for it (under `_ending`, so exactly one of them ends the files).
        self._ending = threading.Lock()
        self._written = False
        # Set by the thread once its last batch is written: close() waits on it, not on
        # join(), whose state a Ctrl-C that interrupts it spoils (Python 3.11 then takes
        # the thread for ended while it still writes).
        self._done = threading.Event()
        self._late: Callable[[], None] | None = None
        self._thread = threading.Thread(target=self._loop, name="runwatch-writer", daemon=True)

    def start(self, next_seq: dict[str, int]) -> None:
        self._seq = dict(next_seq)
        self._thread.start()

    def put(self, item: Item) -> None:
        """Queue one item; waits while the backlog is full (bounded memory)."""
        self.queue.append(item)
        if len(self.queue) > self.max_backlog:
            self.wait_for_room()

    def wait_for_room(self) -> None:
        """Wait until the backlog is back under `max_backlog` (Run.log() calls this itself)."""
        with self._drained:
            self._wake.set()
            while len(self.queue) > self.max_backlog:
                if not self._thread.is_alive():
                    self._drain()  # no thread to wait for: write from the caller
                self._drained.wait(0.1)

    def write_file(self, name: str, record: dict[str, Any]) -> None:
        """Write `record` as the whole file `name` now; when the disk refuses, keep it and
        retry with the rest."""
        with self._drained:
            try:
                data = self._encoder.line(name, record)
                self._follow_move()
                if not self._files.replace(name, data):
                    self._too_big += 1
                    self._warn_too_big(name, f"runwatch: {name} would be {len(data):,} bytes, "
                                       f"more than the {CAPS[name] // MiB} MiB a reader of it "
                                       "reads, so it is not written (counted in "
                                       "run.dropped_lines)")
                    return
                self._files.flush()
            except OSError as exc:
                self._failed_io(exc)

    def close(self, final: Item | None = None, timeout: float | None = None,
              late: Callable[[], None] | None = None) -> bool:
        """Write everything queued, then `final` (the run's last event), and stop the thread.

        `final` is written after every other record and says how many of them could not
        be written; what is still unwritten at the end is counted in `dropped_lines`.
        Waits up to `timeout` seconds (CLOSE_WAIT_S). False when the thread still writes
        then (a stalled disk): it writes the rest, then closes the files itself and calls
        `late` in its thread (the run lets its folder go, once its sender has sent what
        was written late), and nothing is counted lost before that.
        """
        self._final = final
        self._stop = True
        self._wake.set()
        if self._thread.ident is not None:  # started: it writes the last batch
            self._done.wait(CLOSE_WAIT_S if timeout is None else timeout)
        elif not self._written:  # no thread to write it: write it here
            self._last_batch()
            self._written = True
        with self._ending:
            if not self._written:
                self._late = late or _nothing
                return False
        self._end_files()
        return True

    def _end_files(self) -> None:
        """Count what is still unwritten as lost, and close the files (the last batch is done)."""
        lost = self.unwritten
        self._lost += lost
        for sink in self._sinks.values():
            sink.close()
        if self._dir_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._dir_fd)
            self._dir_fd = None
        if lost:
            said = "1 record" if lost == 1 else f"{lost} records"
            warn(f"runwatch: {said} could not be written to {self.run_dir} and "
                 f"{'is' if lost == 1 else 'are'} lost (counted in run.dropped_lines); free "
                 "space on that disk")

    def _ended(self) -> None:
        """The thread has written its last batch: when close() gave up waiting for it, end
        the files and call close()'s `late` here."""
        with self._ending:
            self._written = True
            late = self._late
            self._done.set()
        if late is not None:
            self._end_files()
            late()

    @property
    def unwritten(self) -> int:
        """Records waiting for the disk now."""
        return sum(s.unwritten for s in self._sinks.values()) + self._files.unwritten

    @property
    def dropped_lines(self) -> int:
        """Records lost: dropped while the disk refused writes for long, unwritten at close,
        left out because readers would skip them, or met by an error."""
        return self._dropped_by_disk() + self._lost + self._too_big + self._failed_records

    def _dropped_by_disk(self) -> int:
        return sum(sink.dropped for sink in self._sinks.values()) + self._files.dropped

    def _not_written(self) -> tuple[int, str]:
        """How many records the run's end says were not written, and why (its reason)."""
        disk = self._dropped_by_disk() + self.unwritten
        causes = [fmt.records_lost(disk) if disk else "",
                  fmt.records_lost(self._too_big, "it was larger than a reader reads",
                                   "they were larger than a reader reads")
                  if self._too_big else "",
                  fmt.records_lost(self._failed_records, "the writer met an error",
                                   "the writer met errors") if self._failed_records else ""]
        return disk + self._too_big + self._failed_records, "; ".join(c for c in causes if c)

    @property
    def dropped_values(self) -> int:
        """Values dropped because they were not numbers (metrics) or had no JSON form."""
        return self._encoder.dropped

    def settle(self, timeout: float = SETTLE_S) -> None:
        """Wait (at most `timeout` seconds, the lock included: the writer holds it while a
        stalled disk takes a batch) until what was queued before this call is encoded,
        so that counts made while encoding (`dropped_values`) include it. The writer's own
        thread does not wait, nor does anyone once the writer has stopped (its counts are
        final)."""
        if threading.current_thread() is self._thread or not self._thread.is_alive():
            return
        deadline = time.monotonic() + timeout
        self._wake.set()
        # _drain pops and encodes a batch under the lock: an empty queue seen under it
        # holds no half-encoded batch
        if not self._drained.acquire(timeout=timeout):
            return
        try:
            while self.queue and self._thread.is_alive():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._drained.wait(min(0.1, left))
        finally:
            self._drained.release()

    def flush_now(self) -> None:
        """Ask the thread to write at once (tests use it; close() wakes the thread itself)."""
        self._wake.set()

    def _loop(self) -> None:
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            stop = self._stop
            try:
                if stop:
                    self._last_batch()
                else:
                    self._drain()
            except BaseException as exc:  # the thread outlives any one batch
                self._failed(exc)
            with self._drained:
                self._drained.notify_all()
            if stop:
                self._ended()
                return

    def _last_batch(self) -> None:
        self._drain()
        if self._final is not None:
            self._flush_sinks()  # what the disk refused before, once more: then count
            name, record = self._final
            lost, why = self._not_written()
            if lost:
                record["unwritten"] = lost
                record["reason"] = f"{record['reason']}; {why}" if record.get("reason") else why
            self._encode(name, record)
            self._flush_sinks()

    def _drain(self) -> None:
        """Encode and write everything queued, one bounded batch at a time.

        Writing after each batch (not once the queue is empty) keeps the encoded lines
        in memory bounded even while the producer keeps refilling the queue, and wakes
        a producer that waits on backpressure as soon as there is room. Within a batch,
        what was encoded is written whenever FLUSH_BYTES of it wait (a burst of large
        records), or, while the disk refuses writes, trimmed to what the sinks keep.
        """
        q = self.queue
        files = self._files
        while q:
            with self._drained:
                for _ in range(min(len(q), self.max_backlog)):
                    item = q.popleft()
                    try:
                        self._encode(*item)
                    except Exception as exc:
                        self._failed_records += 1
                        self._failed(exc)
                    if self._waiting + files.pending_bytes > FLUSH_BYTES:
                        if self._io_failing:
                            self._trim()  # written at the batch's end, if the disk takes it
                        else:
                            self._flush_sinks()
                self._flush_sinks()
                self._drained.notify_all()

    def _encode(self, name: str, record: dict[str, Any]) -> None:
        if name.endswith(".json"):
            left_out = self._files.add_samples(name, *self._encoder.checked(name, record))
            if left_out:
                self._samples_left_out(name, left_out)
            return
        seq = self._seq.get(name, 0)
        self._seq[name] = seq + 1
        record["seq"] = seq
        if name == fmt.METRICS and not _PLAIN_NUMBERS.issuperset(map(type, record.values())):
            self._check_values(record)
        sink = self._sinks.get(name)
        if sink is None:
            sink = self._sinks[name] = LineSink(self.run_dir / name)
        line = self._encoder.line(name, record)
        if len(line) > MAX_LINE_BYTES:
            fitted = self._fitted(name, record, len(line))
            if fitted is None:
                self._seq[name] = seq  # no line, so no seq: the file's seqs stay consecutive
                return
            line = fitted
        sink.add(line)
        self._waiting += len(line)

    def _fitted(self, name: str, record: dict[str, Any], size: int) -> bytes | None:
        """The line of a record that would be `size` bytes, more than MAX_LINE_BYTES, the
        longest line a reader reads: a log line without its data, and with its message cut
        if that is not enough, each said in the message and counted in `dropped_values`;
        None for any other record, which is left out and counted lost. Warned once a file."""
        limit = f"the {MAX_LINE_BYTES // MiB} MiB a reader of {name} reads"
        if name != fmt.LOGS:
            self._too_big += 1
            self._warn_too_big(name, f"runwatch: a record of {name} would be a line of "
                               f"{size:,} bytes, more than {limit}, so it is not written "
                               "(counted in run.dropped_lines)")
            return None
        message = record["message"]
        called = f"{message!r}" if len(message) <= 40 else f"{message[:40]!r}…"
        self._warn_too_big(name, f"runwatch: log_text({called}) would be a line of "
                           f"{size:,} bytes, more than {limit}, so it is written without its "
                           "data (its message says so, and is cut too where it alone is too "
                           "long; counted in run.dropped_values); put large outputs in "
                           "log_samples() or a file of your own")
        self._encoder.dropped += 1
        said = f"this line would have been {size:,} bytes, more than {limit}"
        had_data = record.pop("data", None) is not None
        if had_data:
            record["message"] = f"{message} [runwatch left out its data: {said}]"
            line = self._encoder.line(name, record)
            if len(line) <= MAX_LINE_BYTES:
                return line
        record["message"] = message
        over = len(self._encoder.line(name, record)) - MAX_LINE_BYTES
        cut = f"[runwatch cut this message{' and left out its data' if had_data else ''}: {said}]"
        # a character is at least a byte: cutting `over` of them, and as many as the note
        # and "… " (4 bytes) take, is enough
        record["message"] = f"{message[:max(0, len(message) - over - len(cut) - 4)]}… {cut}"
        return self._encoder.line(name, record)

    def _samples_left_out(self, name: str, count: int) -> None:
        self._too_big += count
        self._warn_too_big("samples", f"runwatch: log_samples() would make {name} larger "
                           f"than {SAMPLES_CAP // MiB} MiB, the most a reader of a samples "
                           f"file reads, so {count} of its samples are left out of it, as "
                           "are later ones past that size (counted in run.dropped_lines); "
                           "log fewer or shorter samples a step")

    def _warn_too_big(self, what: str, message: str) -> None:
        if what not in self._told_too_big:
            self._told_too_big.add(what)
            warn(message)

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
                except (TypeError, ValueError, OverflowError):
                    pass
            if t is bool:
                record[key] = int(value)
                continue
            bad = bad or []
            bad.append(key)
        for key in bad or ():
            value = record.pop(key)
            self._encoder.dropped += 1
            if key not in self._warned_keys:
                self._warned_keys.add(key)
                warn(f"runwatch: metric {key!r} got {type(value).__name__} {value!r:.60}, "
                     "not a number; such values are dropped (counted in run.dropped_values)")

    def _follow_move(self) -> None:
        """When the run folder was renamed or moved (`mv runs/a runs/b`) while the run
        records, write on where it is now: its files, opened before, are there, and the
        run keeps its records (the indexer takes the move for a rename). Said once a move.
        A folder removed is no move: each file is made again at the path (LineSink)."""
        if self._dir_fd is None:
            return
        with self._moving:
            try:
                held = os.fstat(self._dir_fd)
            except OSError:
                return
            try:
                st = os.stat(self.run_dir)
                if (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino):
                    return
            except OSError:
                pass
            if held.st_nlink == 0:
                return  # removed
            now = _folder_of(self._dir_fd, held)
            if now is None or now == self.run_dir:
                return
            before, self.run_dir = self.run_dir, now
            for name, sink in self._sinks.items():
                sink.path = now / name
            self._files.run_dir = now
            if self._moved is not None:
                self._moved(now)
            warn(f"runwatch: {before} was moved to {now} while the run recorded; its records "
                 "go on there")

    def _flush_sinks(self) -> None:
        """Try every file, so that one the disk refuses does not hold back the others."""
        self._follow_move()
        remade = False
        error: OSError | None = None
        for sink in self._sinks.values():
            try:
                remade = sink.flush() or remade
            except OSError as exc:
                error = error or exc
        try:
            self._files.flush()
        except OSError as exc:
            error = error or exc
        if error is not None:
            self._failed_io(error)
            self._trim()
            return
        self._waiting = 0
        if remade and not self._told_remade:  # once: each file finds it as it is next written
            self._told_remade = True
            self.io_warnings += 1
            warn(f"runwatch: {self.run_dir} was removed or replaced while the run recorded; "
                 "it is made again with its manifest and what comes next, and what it held "
                 "before is gone unless it was copied elsewhere")
        if self._io_failing or remade:
            self._io_failing = False
            if self._restore is not None:
                with contextlib.suppress(OSError):
                    self._restore()

    def _trim(self) -> None:
        """While the disk refuses writes: keep at most what each sink keeps, the newest."""
        for sink in self._sinks.values():
            sink.trim()
        self._files.trim()
        self._waiting = sum(sink.pending_bytes for sink in self._sinks.values())

    def _failed_io(self, exc: OSError) -> None:
        if not self._io_failing:
            self._io_failing = True
            self.io_warnings += 1
            warn(f"runwatch: could not write to {self.run_dir} ({exc.strerror or exc}); "
                 "records are kept in memory and written when the disk accepts them")

    def _failed(self, exc: BaseException) -> None:
        """An error no record should cause: count it and warn about the first."""
        self.errors += 1
        if self.errors == 1:
            warn(f"runwatch: the writer of {self.run_dir} met an error and carries on "
                 f"({type(exc).__name__}: {exc}); please report it")


def _folder_of(fd: int, held: os.stat_result) -> Path | None:
    """Where the folder open as `fd` (of stat `held`) is now: read from /proc on Linux,
    with F_GETPATH on macOS; None where neither tells, or what they tell is another."""
    try:
        if sys.platform == "darwin":
            import fcntl

            raw = fcntl.fcntl(fd, fcntl.F_GETPATH, bytes(1024))  # type: ignore[attr-defined]
            where = Path(os.fsdecode(raw.split(b"\0", 1)[0]))
        else:
            where = Path(os.readlink(f"/proc/self/fd/{fd}"))
        st = os.stat(where)
    except (OSError, ValueError, AttributeError):
        return None
    return where if (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino) else None


def _nothing() -> None:
    """close()'s `late` when the caller gave none."""
