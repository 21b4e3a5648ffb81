"""`Run`: the object a training loop records with. Every method only queues work.

Misuse policy (docs/sdk.md): calling a method after `finish()`, a step that goes
backwards and a metric key that is not a string raise at once, because they are bugs
in the loop that a test run shows on its first step; a metric value that is not a
number, and any value with no JSON form, is dropped, counted and warned about once
per key, because it can appear hours into a run and must not end it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from runwatch.rundir import format as fmt
from runwatch.sdk.lock import RunLock
from runwatch.sdk.writer import BackgroundWriter

_METRICS = fmt.METRICS
_now = time.time


class RunFinishedError(RuntimeError):
    """A method of a Run was called after finish()."""


class Run:
    """A run being recorded into `dir`/<name>. Create it with `runwatch.init()`."""

    def __init__(
        self,
        run_dir: Path,
        manifest: dict[str, Any],
        next_seq: dict[str, int],
        lock: RunLock,
        interval: float = 0.5,
        max_backlog: int = 10_000,
    ) -> None:
        self.dir = run_dir
        self._run_lock = lock
        self.id: str = manifest["run_id"]
        self.name: str = manifest["name"]
        self.manifest = manifest
        self._writer = BackgroundWriter(run_dir, interval, max_backlog, restore=self._restore)
        self._writer.start(next_seq)
        self._queue = self._writer.queue
        # A resumed loop restarts its step count at its checkpoint, which may be before
        # the last step logged before the crash, so step order is checked per process.
        self._last_step: int | None = None
        self._finished = False
        self._lock = threading.Lock()
        self.status: str | None = None

    # -- recording -------------------------------------------------------------------

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        """Record scalar metrics for `step` (the previous step + 1 when omitted)."""
        if self._finished:
            raise RunFinishedError(f"run {self.name!r} is finished; log() after finish() is a bug")
        last = self._last_step
        if step is None:
            step = 0 if last is None else last + 1
        elif last is not None and step < last:
            raise ValueError(
                f"step {step} is before the last logged step {last}: steps must not go backwards"
            )
        record = {"step": step, "ts": _now()}
        try:
            record.update(**metrics)  # the cheapest check that every key is a str
        except TypeError:
            raise TypeError(_key_error(metrics)) from None
        self._last_step = step
        # BackgroundWriter.put, inlined: this is the call a training loop makes most.
        queue = self._queue
        queue.append((_METRICS, record))
        if len(queue) > self._writer.max_backlog:
            self._writer.wait_for_room()

    def log_samples(
        self,
        step: int,
        samples: list[dict[str, Any]],
        split: str = "train",
        kind: str = "completions",
    ) -> None:
        """Record one step's completions or episodes (prompt, completion, reward, …)."""
        self._check_open()
        name = fmt.sample_file_name(int(step), split, kind)
        payload = {"step": int(step), "split": split, "kind": kind, "ts": time.time(),
                   "samples": [dict(s) for s in samples]}
        self._writer.put((name, payload))

    def log_checkpoint(
        self, step: int, kind: str, id: str, path: str | os.PathLike[str] | None = None, **meta: Any
    ) -> None:
        """Record a saved checkpoint; `kind` is "training" (resumable) or "inference"."""
        self._check_open()
        if kind not in fmt.CHECKPOINT_KINDS:
            raise ValueError(f"checkpoint kind {kind!r} is not one of {fmt.CHECKPOINT_KINDS}")
        record: dict[str, Any] = {"ts": time.time(), "step": int(step), "kind": kind, "id": str(id)}
        if path is not None:
            record["path"] = str(path)
        record.update(meta)
        self._writer.put((fmt.CHECKPOINTS, record))

    def set_phase(
        self,
        phase: str,
        stage: str | None = None,
        done: int | None = None,
        total: int | None = None,
        reason: str | None = None,
    ) -> None:
        """Record a lifecycle transition (and, in PREPARING, what it is doing)."""
        self._check_open()
        self._event(phase, stage=stage, done=done, total=total, reason=reason)

    def log_text(self, message: str, level: str = "info", data: Any = None) -> None:
        """Record one log line (level: debug, info, warning, error, critical)."""
        self._check_open()
        level = level.lower()
        if level not in fmt.LOG_LEVELS:
            raise ValueError(f"log level {level!r} is not one of {', '.join(fmt.LOG_LEVELS)}")
        record: dict[str, Any] = {"ts": time.time(), "level": level, "message": str(message)}
        if data is not None:
            record["data"] = data
        self._writer.put((fmt.LOGS, record))

    def logging_handler(self, level: int = logging.INFO) -> logging.Handler:
        """A `logging.Handler` that writes records to this run's logs.jsonl."""
        return RunLogHandler(self, level)

    def log_engine_config(self, requested: dict[str, Any], resolved: dict[str, Any]) -> None:
        """Write engine_config.json: what the loop asked for and what the engine resolved."""
        self._check_open()
        self._writer.write_file(fmt.ENGINE_CONFIG, {"requested": requested, "resolved": resolved})

    def set_manifest_fields(self, **fields: Any) -> None:
        """Add fields to manifest.json (for example `wandb_url`)."""
        self._check_open()
        self.manifest.update(fields)
        self._writer.write_file(fmt.MANIFEST, self.manifest)

    # -- ending ------------------------------------------------------------------------

    def finish(self, status: str = "SUCCEEDED", reason: str | None = None) -> None:
        """End the run with a terminal status, writing everything still queued."""
        with self._lock:
            if self._finished:
                return
            if status not in fmt.TERMINAL_PHASES:
                raise ValueError(f"status {status!r} is not one of {sorted(fmt.TERMINAL_PHASES)}")
            if status == "FAILED" and not reason:
                reason = "the training job failed; the run ID is what support needs"
            self._finished = True
            self.status = status
        # Written after every other record, saying how many of them the disk refused.
        self._writer.close(final=(fmt.EVENTS, self._event_record(status, reason=reason)))
        self._run_lock.release()
        _LIVE_RUNS.discard(self)

    def fail(self, reason: str) -> None:
        """Shorthand for finish(status="FAILED", reason=reason)."""
        self.finish("FAILED", reason)

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def dropped_values(self) -> int:
        """Values dropped so far: metric values that are not numbers, values with no JSON form."""
        return self._writer.dropped_values

    @property
    def dropped_lines(self) -> int:
        """Records that never reached the disk because it refused writes (warned about)."""
        return self._writer.dropped_lines

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.finish("SUCCEEDED")
        elif isinstance(exc, KeyboardInterrupt):
            self.finish("CANCELLED", "the training job was stopped")
        else:
            self.finish("FAILED", exception_reason(exc))

    # -- internals -----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._finished:
            raise RunFinishedError(f"run {self.name!r} is finished; no more records can be added")

    def _event(self, phase: str, **fields: Any) -> None:
        self._writer.put((fmt.EVENTS, self._event_record(phase, **fields)))

    @staticmethod
    def _event_record(phase: str, **fields: Any) -> dict[str, Any]:
        if phase not in fmt.PHASES:
            raise ValueError(f"phase {phase!r} is not one of {', '.join(fmt.PHASES)}")
        record: dict[str, Any] = {"ts": time.time(), "phase": phase}
        record.update({k: v for k, v in fields.items() if v is not None})
        return record

    def _restore(self) -> None:
        """Rewrite the manifest, and lock the folder again, after it was removed and made anew."""
        manifest = self.dir / fmt.MANIFEST
        if not manifest.exists():
            with contextlib.suppress(fmt.RunDirError):
                self._run_lock.acquire()
            self._writer.write_file(fmt.MANIFEST, self.manifest)


class RunLogHandler(logging.Handler):
    """Sends Python logging records to a run's logs.jsonl."""

    def __init__(self, run: Run, level: int = logging.INFO) -> None:
        super().__init__(level)
        self.run = run

    def emit(self, record: logging.LogRecord) -> None:
        if self.run.finished:
            return
        try:
            level = record.levelname.lower()
            if level not in fmt.LOG_LEVELS:
                level = "info"
            data = {"logger": record.name}
            if record.exc_info and record.exc_info[1] is not None:
                data["exception"] = exception_reason(record.exc_info[1])
            self.run.log_text(record.getMessage(), level=level, data=data)
        except Exception:
            self.handleError(record)


def _key_error(metrics: Any) -> str:
    """Why log() refused `metrics`: a key that is not a str, or not a mapping at all."""
    if not hasattr(metrics, "keys"):
        return f"log() takes a dict of metric name to number, not {type(metrics).__name__}"
    bad = next((k for k in metrics if not isinstance(k, str)), None)
    return (f"metric keys must be strings: got {type(bad).__name__} {bad!r:.60}; "
            "name the metric, for example {'train/loss': value}")


def exception_reason(exc: BaseException) -> str:
    """A one-line failure reason for an exception that ended a training loop."""
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:297] + "…"
    head = f"the training loop raised {type(exc).__name__}"
    return f"{head}: {text}" if text else head


# Runs that have not finished: the exit hooks below mark them FAILED. This is the one
# piece of module state, because atexit and sys.excepthook are process-wide too.
_LIVE_RUNS: set[Run] = set()
_LAST_EXCEPTION: list[BaseException] = []
_HOOKS_INSTALLED = threading.Event()


def register(run: Run) -> None:
    """Track `run` so an uncaught exception or an exit without finish() marks it FAILED."""
    _LIVE_RUNS.add(run)
    if not _HOOKS_INSTALLED.is_set():
        _HOOKS_INSTALLED.set()
        import atexit

        previous = sys.excepthook

        def hook(t: type[BaseException], e: BaseException, tb: TracebackType | None) -> None:
            _LAST_EXCEPTION.append(e)
            previous(t, e, tb)

        sys.excepthook = hook
        atexit.register(_finish_live_runs)


def _finish_live_runs() -> None:
    exc = _LAST_EXCEPTION[-1] if _LAST_EXCEPTION else None
    for run in list(_LIVE_RUNS):
        try:
            if isinstance(exc, KeyboardInterrupt):
                run.finish("CANCELLED", "the training job was stopped")
            elif exc is not None:
                run.finish("FAILED", exception_reason(exc))
            else:
                run.finish("FAILED", "the training job stopped before it finished "
                                     "(the process exited without calling finish())")
        except Exception:
            continue

