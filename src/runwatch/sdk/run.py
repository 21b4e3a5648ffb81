"""`Run`: the object a training loop records with. Every method only queues work.

Misuse policy (docs/sdk.md): calling a method after `finish()` and a step that goes
backwards raise at once, because they are bugs in the loop that a test run shows on
its first step; a metric value that is not a number is dropped, counted and warned
about once per key, because it can appear hours into a run and must not end it.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from runwatch.rundir import format as fmt
from runwatch.rundir.atomic import write_atomic
from runwatch.rundir.jsonl import dumps_line
from runwatch.sdk.lock import RunLock
from runwatch.sdk.writer import BackgroundWriter


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
        self._last_step = step
        record = {"step": step, "ts": time.time()}
        record.update(metrics)
        self._writer.put((fmt.METRICS, record))

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
        self, step: int, kind: str, id: str, path: str | None = None, **meta: Any
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
        write_atomic(self.dir / fmt.ENGINE_CONFIG,
                      dumps_line({"requested": requested, "resolved": resolved}))

    def set_manifest_fields(self, **fields: Any) -> None:
        """Add fields to manifest.json (for example `wandb_url`)."""
        self._check_open()
        self.manifest.update(fields)
        write_atomic(self.dir / fmt.MANIFEST, dumps_line(self.manifest))

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
            self._event(status, reason=reason)
            self._finished = True
            self.status = status
        self._writer.close()
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
        """How many non-numeric metric values were dropped so far."""
        return self._writer.dropped_values

    @property
    def dropped_lines(self) -> int:
        """Records lost because the disk refused writes for too long (warned about)."""
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
        if phase not in fmt.PHASES:
            raise ValueError(f"phase {phase!r} is not one of {', '.join(fmt.PHASES)}")
        record: dict[str, Any] = {"ts": time.time(), "phase": phase}
        record.update({k: v for k, v in fields.items() if v is not None})
        self._writer.put((fmt.EVENTS, record))

    def _restore(self) -> None:
        """Rewrite the manifest, and lock the folder again, after it was removed and made anew."""
        manifest = self.dir / fmt.MANIFEST
        if not manifest.exists():
            with contextlib.suppress(fmt.RunDirError):
                self._run_lock.acquire()
            write_atomic(manifest, dumps_line(self.manifest))


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

