"""`Run`: the object a training loop records with. Every method only queues work.

Misuse policy (docs/sdk.md): calling a method after `finish()`, a step that is not a
whole number >= 0 or goes backwards, a metric key that is not a string of 1 to 256
characters (runwatch.rundir.format's rules, which the indexer applies too), a phase
that set_phase() does not record, a manifest field the run format owns, and samples that
are not a list of dicts raise at once, because they are bugs in the loop that a test run
shows on its first step; a metric value that is not a number, and any value with no JSON
form, is dropped, counted and warned about once per key, because it can appear hours
into a run and must not end it.

How a run ends (docs/sdk.md): its terminal event carries a reason from the failure
catalogue (runwatch.jobs.failures) and that reason's id as `code`; an exception that
ended the loop goes to logs.jsonl with its type, message and traceback, and only a
refusal's own text becomes the reason.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import os
import threading
import time
import traceback
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from runwatch.jobs.failures import CATALOGUE, exception_verdict, reason_line
from runwatch.rundir import format as fmt
from runwatch.rundir import stopnote
from runwatch.sdk import encode, live, writer
from runwatch.sdk.encode import snapshot, warn
from runwatch.sdk.lock import LetGoAfter, RunLock
from runwatch.sdk.writer import BackgroundWriter

if TYPE_CHECKING:
    from runwatch.sdk.sender import Sender

_METRICS = fmt.METRICS
_now = time.time
# The reason a terminal phase gets when finish() is given none.
_DEFAULT_CODE = {"FAILED": "failed", "CANCELLED": "cancelled"}
# An error line keeps at most this much of an exception's message and traceback.
MAX_MESSAGE_CHARS = 2_000
MAX_TRACEBACK_CHARS = 20_000
# A record of more than this many fields (its metrics, step and ts) is split into records
# of one step that the index takes (readers join them into the step).
_WIDEST_RECORD = fmt.MAX_METRICS_PER_RECORD + 2
_MAX_STEP = fmt.MAX_STEP  # read at every log(): a global, not a module attribute
# The phases set_phase() refuses, and what records each instead: it records PREPARING
# and RUNNING (QUEUED only as the run's first event, which init() writes). A FAILED set
# mid-loop, with no reason, made `runs wait --exit-status` fail a run that then succeeded.
_NOT_SET_PHASE = {
    "SUCCEEDED": "ends the run: call finish() when the loop is done",
    "FAILED": "ends the run: call fail(reason), or finish('FAILED', reason), with the reason",
    "CANCELLED": "ends the run: call finish('CANCELLED') once the loop has stopped",
    "CANCEL_REQUESTED": "is recorded when the process is asked to stop (SIGTERM, Ctrl-C), "
                        "as run.request_stop() does",
    "QUEUED": "is where a run starts (runwatch.init(phase='QUEUED')), or starts again by "
              "`runwatch runs retry`; a live run goes back to PREPARING or RUNNING",
}


def _split(record: dict[str, Any]) -> list[dict[str, Any]]:
    """A record's metrics in records of its step and time holding at most
    fmt.MAX_METRICS_PER_RECORD metrics each (the most the index takes in one)."""
    step, ts = record["step"], record["ts"]
    items = [(k, v) for k, v in record.items() if k != "step" and k != "ts"]
    width = fmt.MAX_METRICS_PER_RECORD
    return [{"step": step, "ts": ts, **dict(items[i:i + width])}
            for i in range(0, len(items), width)]


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
        sender: Sender | None = None,
        job_attempt: int | None = None,
        jobs_run: bool = False,
    ) -> None:
        self.dir = run_dir
        self._jobs_run = jobs_run  # init() attached it: the run job control made for us
        # The attempt of the job this process runs (RUNWATCH_ATTEMPT), None outside a job.
        self._job_attempt = job_attempt
        self._run_lock = lock
        self.id: str = manifest["run_id"]
        self.name: str = manifest["name"]
        self.manifest = manifest
        self._writer = BackgroundWriter(run_dir, interval, max_backlog, restore=self._restore,
                                        moved=self._moved)
        self._writer.start(next_seq)
        self._queue = self._writer.queue
        # Streams the files the writer writes to a server (team mode), off this thread.
        self._sender = sender
        if sender is not None:
            sender.start()
        # A resumed loop restarts its step count at its checkpoint, which may be before
        # the last step logged before the crash, so step order is checked per process.
        self._last_step: int | None = None
        self._step_lock = threading.Lock()
        # Types of a record's values that cannot change after log() returns (numbers, text,
        # numpy scalars; None, a step not yet given): a record of only these is queued as it is.
        self._unchanging: set[type] = {float, int, type(None)}
        # Metric keys log() has found valid, so a loop's usual keys are checked once.
        self._valid_keys: set[str] = set()
        self._warned_fields: set[str] = set()  # record fields log() was given as keys
        self._over_cap = 0  # new keys left out: the run had fmt.MAX_KEYS_PER_RUN already
        self._finished = False
        self._started = False  # set_phase() has recorded the run's first phase
        self._stop_requested = False
        # Reentrant: the SIGTERM handler (request_stop) may run while this thread holds it.
        self._lock = threading.RLock()
        self.status: str | None = None

    # -- recording -------------------------------------------------------------------

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        """Record scalar metrics for `step` (the previous step + 1 when omitted).

        A step that is not a whole number >= 0 or goes backwards, and a metric key that
        run-format v1 does not take, raise at once; nothing is recorded then."""
        if self._finished:
            raise RunFinishedError(f"run {self.name!r} is finished; log() after finish() is a bug")
        try:
            known = self._valid_keys.issuperset(metrics)
        except TypeError:  # not a mapping of names at all
            raise TypeError(_key_error(metrics)) from None
        if not known:
            metrics, step = self._check_keys(metrics, step)
        if step is not None and (type(step) is not int or not 0 <= step <= _MAX_STEP):
            step = checked_step(step, "log")  # the common case inline
        try:
            # its keys are valid (checked above), so strings: no `**` check of each needed
            record = {"step": step, "ts": _now(), **metrics}
        except TypeError:  # not a mapping
            raise TypeError(_key_error(metrics)) from None
        if not self._unchanging.issuperset(map(type, record.values())):
            self._values_now(record)  # an array or tensor the loop may change later
        queue = self._queue
        # Another thread may log too: the step is checked and the record queued as one, so
        # the file's steps never go backwards.
        with self._step_lock:
            last = self._last_step
            if step is None:
                if last is None:
                    step = 0
                elif last < _MAX_STEP:
                    step = last + 1
                else:
                    raise ValueError(f"log(): the step after {last} is past 2**63-1, the "
                                     "largest step")
                record["step"] = step
            elif last is not None and step < last:
                raise ValueError(f"step {step} is before the last logged step {last}: steps "
                                 "must not go backwards")
            self._last_step = step
            # BackgroundWriter.put, inlined: this is the call a training loop makes most.
            if len(record) > _WIDEST_RECORD:  # more metrics than the index takes in one record
                queue.extend((_METRICS, part) for part in _split(record))
            else:
                queue.append((_METRICS, record))
        if len(queue) > self._writer.max_backlog:
            self._writer.wait_for_room()

    def _values_now(self, record: dict[str, Any]) -> None:
        """Take the values of `record` that may change after log() returns as they are now
        (encode.metric_now); remember the types that cannot change."""
        unchanging = self._unchanging
        for key, value in record.items():
            kind = type(value)
            if kind in unchanging:
                continue
            if encode.unchanging(kind):
                unchanging.add(kind)
            else:
                record[key] = encode.metric_now(value)

    def log_samples(
        self,
        step: int,
        samples: list[dict[str, Any]],
        split: str = "train",
        kind: str = "completions",
    ) -> None:
        """Record one step's completions or episodes (prompt, completion, reward, …)."""
        self._check_open()
        step = checked_step(step, "log_samples")
        name = fmt.sample_file_name(step, split, kind)
        payload = {"step": step, "split": split, "kind": kind, "ts": time.time(),
                   "samples": _sample_dicts(samples)}
        self._writer.put((name, payload))

    def log_checkpoint(
        self, step: int, kind: str, id: str, path: str | os.PathLike[str] | None = None, **meta: Any
    ) -> None:
        """Record a saved checkpoint; `kind` is "training" (resumable) or "inference"."""
        self._check_open()
        if kind not in fmt.CHECKPOINT_KINDS:
            raise ValueError(f"checkpoint kind {kind!r} is not one of {fmt.CHECKPOINT_KINDS}")
        record: dict[str, Any] = {"ts": time.time(), "step": checked_step(step, "log_checkpoint"),
                                  "kind": kind, "id": str(id)}
        if path is not None:
            record["path"] = str(path)
        record.update(snapshot(meta))  # as it is now: the writer encodes it later
        self._writer.put((fmt.CHECKPOINTS, record))

    def set_phase(
        self,
        phase: str,
        stage: str | None = None,
        done: int | None = None,
        total: int | None = None,
        reason: str | None = None,
    ) -> None:
        """Record a move to PREPARING (with what it is doing) or RUNNING. A phase that ends
        or stops the run, or QUEUED once the run has started, raises ValueError (see
        _NOT_SET_PHASE): finish() and fail() end a run."""
        self._check_open()
        if phase in _NOT_SET_PHASE and not (phase == "QUEUED" and not self._started):
            raise ValueError(f"set_phase(): {phase} {_NOT_SET_PHASE[phase]}; set_phase "
                             "records PREPARING and RUNNING")
        self._event(phase, stage=stage, done=done, total=total, reason=reason)
        self._started = True

    def log_text(self, message: str, level: str = "info", data: Any = None) -> None:
        """Record one log line (level: debug, info, warning, error, critical)."""
        self._check_open()
        level = level.lower()
        if level not in fmt.LOG_LEVELS:
            raise ValueError(f"log level {level!r} is not one of {', '.join(fmt.LOG_LEVELS)}")
        record: dict[str, Any] = {"ts": time.time(), "level": level, "message": str(message)}
        if data is not None:
            record["data"] = snapshot(data)  # as it is now: the writer encodes it later
        self._writer.put((fmt.LOGS, record))

    def logging_handler(self, level: int = logging.INFO) -> logging.Handler:
        """A `logging.Handler` that writes records to this run's logs.jsonl."""
        return RunLogHandler(self, level)

    def log_engine_config(self, requested: dict[str, Any], resolved: dict[str, Any]) -> None:
        """Write engine_config.json: what the loop asked for and what the engine resolved."""
        self._check_open()
        self._writer.write_file(fmt.ENGINE_CONFIG, {"requested": requested, "resolved": resolved})

    def set_manifest_fields(self, **fields: Any) -> None:
        """Add fields to manifest.json (for example `wandb_url`). A field the run format
        defines (`run_id`, `name`, `host`, …: fmt.MANIFEST_OWNED) raises ValueError, and
        nothing is written."""
        self._check_open()
        owned = next((k for k in fields if k in fmt.MANIFEST_OWNED), None)
        if owned is not None:
            raise ValueError(f"set_manifest_fields(): {owned!r} is a manifest field the run "
                             f"format owns ({fmt.MANIFEST_OWNED[owned]}); add fields of "
                             "your own, such as wandb_url")
        self.manifest.update(fields)
        self._writer.write_file(fmt.MANIFEST, self.manifest)

    # -- ending ------------------------------------------------------------------------

    def finish(
        self, status: str | None = None, reason: str | None = None, code: str | None = None
    ) -> None:
        """End the run with a terminal status, writing everything still queued.

        No status is SUCCEEDED, or CANCELLED once the process was asked to stop (SIGTERM
        or Ctrl-C).
        `code` is the failure catalogue's id for the reason (runwatch.jobs.failures);
        FAILED or CANCELLED with no reason records that code's sentence (by default
        `failed`, or `cancelled`; for a job's run, `worker_stopped` when its worker stopped
        this process because it was told to stop, and FAILED `stopped` when neither that
        worker nor a cancel did: runwatch.rundir.stopnote).
        """
        with self._lock:
            if self._finished:
                return
            if status is None:
                status = "CANCELLED" if self._stop_requested else "SUCCEEDED"
            if status not in fmt.TERMINAL_PHASES:
                raise ValueError(f"status {status!r} is not one of {sorted(fmt.TERMINAL_PHASES)}")
            if reason is not None:
                reason = self._reason_line(status, str(reason))
            _check_code(status, reason, code)
            if status == "CANCELLED" and not reason and not code:
                code = self._how_stopped()
                status = CATALOGUE[code].phase if code else status
            if not reason and status in _DEFAULT_CODE:
                code = code or _DEFAULT_CODE[status]
                reason = CATALOGUE[code].sentence
            self._finished = True
            self.status = status
        # Written after every other record, saying how many of them the disk refused.
        record = self._event_record(status, reason=reason, code=code)
        # The folder stays this process's while anything of it may still write there
        # (a stalled disk, a server's late answer), or a retry's next attempt or a resumed
        # run would write beside it: the last of the writer and the sender to be done
        # lets it go (the kernel, if the process exits first).
        folder = LetGoAfter(self._run_lock, 1 if self._sender is None else 2)
        sender = self._sender

        def written_late() -> None:
            # in the writer's thread, once a stalled disk took the rest and the run's end
            folder.done()
            if sender is not None:
                sender.written()

        final = (fmt.EVENTS, record)
        try:
            written = self._writer.close(final=final, late=written_late)
        except KeyboardInterrupt:
            # Ctrl-C while finish() waits for the writer (a slow disk): the run's end is
            # what it writes next, so wait once more (a second Ctrl-C stops that too),
            # then let the folder go and stop as asked; the exit hook would find the run
            # finished and wait for nothing, and its end would be lost
            done = self._writer.close(final=final, late=written_late)
            if done:
                folder.done()
            if sender is not None:
                sender.close(then=folder.done, writing=not done)
            live.unregister(self)
            raise
        if written:
            folder.done()
        else:
            warn(f"runwatch: {self.dir} is still being written after finish() waited "
                 f"{writer.CLOSE_WAIT_S:g} s for it; the run folder stays locked until that "
                 "is done or this process exits"
                 + ("" if sender is None else
                    f"; {sender.server} gets the rest once it is written, and if this "
                    f"process exits first, {sender.sync_command} sends what reached the "
                    "folder"))
        if sender is not None:
            # a late writer's records are still to come: the sender stops after them
            sender.close(then=folder.done, writing=not written)
        live.unregister(self)

    def _reason_line(self, status: str, reason: str) -> str | None:
        """`reason` as the run's end records it: one line, cut as a refusal is (a reason is
        one line in run-format v1; tables broke a multi-line one across rows). A reason
        that this changes goes to logs.jsonl whole, first. None for one of only spaces."""
        line = reason_line(reason)
        if line and line != reason:
            self.log_text(f"the {status} reason in full (the run shows it on one line): "
                          f"{reason}", level="error" if status == "FAILED" else "warning")
        return line or None

    def _how_stopped(self) -> str | None:
        """Who stopped a job's run that was asked to stop (SIGTERM, Ctrl-C), by the notes
        job control leaves before its SIGTERM (runwatch.rundir.stopnote): its worker, told
        to stop (`worker_stopped`); a cancel (`cancelled`); neither, so something outside
        runwatch (a cluster preempting it): `stopped`, a failure, which its worker queues
        again while attempts remain. None for a run started by hand (a cancel)."""
        if not self._stop_requested or self._job_attempt is None:
            return None
        if stopnote.written(self.dir, self._job_attempt):
            return "worker_stopped"
        if stopnote.cancel_written(self.dir, self._job_attempt):
            return "cancelled"
        return "stopped"

    def fail(self, reason: str, code: str | None = None) -> None:
        """Shorthand for finish(status="FAILED", reason=reason, code=code)."""
        self.finish("FAILED", reason, code)

    def fail_from(self, exc: BaseException) -> None:
        """End the run for the exception that stopped its loop: the exception's type,
        message and traceback go to logs.jsonl as an error line, and the run records the
        catalogue's reason for it (a refusal's own text; CANCELLED once SIGTERM or
        Ctrl-C stopped it)."""
        if self._finished:
            return
        verdict = exception_verdict(exc)
        if isinstance(exc, KeyboardInterrupt):
            self.request_stop("Ctrl-C")  # unless SIGTERM already did: CANCEL_REQUESTED
        elif verdict.phase != "SUCCEEDED":  # sys.exit(0) is no error
            self._log_exception(exc)
        if self._stop_requested:
            self.finish()
            return
        self.finish(verdict.phase, verdict.text, verdict.code)

    def end_unfinished(self, exc: BaseException | None) -> None:
        """End a run its process is leaving without finish() (the SDK's exit hook):
        `exc` is the uncaught exception, if one is why."""
        if exc is not None:
            self.fail_from(exc)
        elif self._stop_requested:
            self.finish()
        elif not self._finished:
            self.log_text("the process exited without calling finish()", level="error")
            self.finish("FAILED", code="stopped_early")

    def request_stop(self, how: str = "SIGTERM") -> bool:
        """Record that the process was asked to stop (`how`): CANCEL_REQUESTED, written
        with the next flush (at once when the loop unwinds); the run then ends CANCELLED
        however its loop unwinds. True the first time, False once asked or finished.

        The SDK's SIGTERM handler calls this, so it takes no lock but the run's own
        (reentrant) and never waits: it only appends to the writer's queue.
        """
        with self._lock:
            if self._finished or self._stop_requested:
                return False
            self._stop_requested = True
            note = {"ts": time.time(), "level": "warning",
                    "message": f"the process was asked to stop ({how}): stopping the loop"}
            self._queue.append((fmt.LOGS, note))
            self._queue.append((fmt.EVENTS, self._event_record("CANCEL_REQUESTED")))
        return True

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def is_jobs_run(self) -> bool:
        """Whether this is the run of the runwatch job this process was started for
        (init() attached to it, docs/sdk.md "Under a job"): the job ends when the process
        does, whatever the run records."""
        return self._jobs_run

    @property
    def dropped_values(self) -> int:
        """Values dropped so far: metric values that are not numbers, values with no JSON
        form. The writer's thread finds them: this waits (a few seconds at most) until it
        has read what was logged before, so a bad value counts right after its log()."""
        self._writer.settle()
        return self._writer.dropped_values

    @property
    def dropped_lines(self) -> int:
        """Records that never reached the disk (warned about): the disk refused them, or
        they were larger than a reader reads; after what was logged before is written or
        kept (as dropped_values waits)."""
        self._writer.settle()
        return self._writer.dropped_lines

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self.fail_from(exc)
        else:
            self.finish()

    # -- internals -----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._finished:
            raise RunFinishedError(f"run {self.name!r} is finished; no more records can be added")

    def _check_keys(self, metrics: dict[str, Any], step: Any) -> tuple[dict[str, Any], Any]:
        """Refuse a metric key the run format does not take (fmt.validate_key: TypeError
        for one that is no string); leave out a new key past fmt.MAX_KEYS_PER_RUN (counted
        in this process: a resumed run's earlier keys are not known here); remember the
        valid ones.
        A key that names a record's own field is no metric: `step` is the record's step
        where the call gives none (`log({"step": it, "loss": l})`, as loops written for
        other trackers do), and is otherwise left out, as `ts` and `seq` are, with one
        warning a key. Returns the metrics to record and the step."""
        if not hasattr(metrics, "keys"):
            raise TypeError(_key_error(metrics))
        fields = None
        fresh: list[str] = []  # valid keys new to this run
        for key in metrics:
            if key in self._valid_keys:
                continue
            if not isinstance(key, str):
                raise TypeError(_key_error(metrics))
            if key in fmt.RECORD_FIELDS:
                fields = fields or []
                fields.append(key)
                continue
            problem = fmt.validate_key(key)
            if problem:
                raise ValueError(f"log(): {problem}; name a metric with 1 to "
                                 f"{fmt.MAX_KEY_LENGTH} characters, such as 'train/loss'")
            if len(self._valid_keys) + len(fresh) >= fmt.MAX_KEYS_PER_RUN:
                # the index would drop it: left out here, the rest of the call recorded
                fields = fields or []
                fields.append(key)
                continue
            fresh.append(key)
        self._valid_keys.update(fresh)
        if not fields:
            return metrics, step
        kept = {k: v for k, v in metrics.items() if k not in fields}
        for key in fields:
            if key not in fmt.RECORD_FIELDS:
                self._left_out(key)
            elif key == "step" and step is None:
                step = metrics[key]  # checked as a step argument is, next
            elif key not in self._warned_fields:
                self._warned_fields.add(key)
                warn(f"runwatch: log() key {key!r} names a field every record has, so it is "
                     f"not recorded as a metric (the step is log()'s step=; name the metric "
                     f"otherwise, such as 'train/{key}')")
        return kept, step

    def _left_out(self, key: str) -> None:
        """A new key past the run's fmt.MAX_KEYS_PER_RUN, left out of its call (the index
        would drop it): said once, with the first such key; `keys_left_out` counts them."""
        self._over_cap += 1
        if self._over_cap == 1:
            warn(f"runwatch: log() key {key!r} would be run {self.name!r}'s metric key number "
                 f"{fmt.MAX_KEYS_PER_RUN + 1:,}, and the index keeps at most "
                 f"{fmt.MAX_KEYS_PER_RUN:,} a run: it and every later new key are left out "
                 "(the rest of each call is recorded); log fewer distinct keys (a key per "
                 "example or per step belongs in log_samples)")

    @property
    def keys_left_out(self) -> int:
        """How many times log() left out a new key past the run's key cap (see `_left_out`)."""
        return self._over_cap

    def _event(self, phase: str, **fields: Any) -> None:
        self._writer.put((fmt.EVENTS, self._event_record(phase, **fields)))

    @staticmethod
    def _event_record(phase: str, **fields: Any) -> dict[str, Any]:
        if phase not in fmt.PHASES:
            raise ValueError(f"phase {phase!r} is not one of {', '.join(fmt.PHASES)}")
        record: dict[str, Any] = {"ts": time.time(), "phase": phase}
        record.update({k: v for k, v in fields.items() if v is not None})
        return record

    def _log_exception(self, exc: BaseException) -> None:
        data = exception_data(exc)
        said = _one_line(data["message"])
        head = f"the training loop raised {data['exception']}"
        self.log_text(f"{head}: {said}" if said else head, level="error", data=data)

    def _moved(self, now: Path) -> None:
        """The writer found the run folder renamed or moved to `now`, and writes on there:
        so do the folder's lock (taken again there, should the folder be made anew) and
        the sender, and `dir` says where the run is."""
        self.dir = now
        self._run_lock.run_dir = now
        if self._sender is not None:
            self._sender.moved(now)

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
                data.update(exception_data(record.exc_info[1]))
            self.run.log_text(record.getMessage(), level=level, data=data)
        except Exception:
            self.handleError(record)


def checked_step(step: Any, call: str) -> int:
    """`step` as an int (a numpy or torch integer too), or a ValueError from `call` saying
    what a step may be (fmt.validate_step): 1.5 was cut to 1 in silence."""
    if type(step) is not int:
        step = _whole_step(step)
    problem = fmt.validate_step(step)
    if problem:
        raise ValueError(f"{call}(): {problem}")
    return cast(int, step)


def _whole_step(step: Any) -> Any:
    """An integer step of another type (numpy, torch) as an int; any other value as it is,
    for fmt.validate_step to refuse (a bool stays a bool: it is not a step)."""
    if isinstance(step, bool):
        return step
    try:
        return operator.index(step)
    except TypeError:
        return step


def _sample_dicts(samples: Any) -> list[dict[str, Any]]:
    """`samples` as log_samples() records them: each a dict of its own, its values as they
    are now (encode.snapshot: the writer encodes them later). Another shape is a
    ValueError that says which shape the call takes (dict() of a string said "dictionary
    update sequence element #0 has length 1; 2 is required")."""
    shape = ("log_samples() takes a list of samples, each a dict of its fields, such as "
             "[{'prompt': p, 'completion': c, 'reward': r}]")
    if hasattr(samples, "keys"):
        raise ValueError(f"{shape}; got one {type(samples).__name__}: put the sample in a "
                         "list")
    if isinstance(samples, str | bytes):
        raise ValueError(f"{shape}; got {type(samples).__name__}")
    try:
        items = list(samples)
    except TypeError:
        raise ValueError(f"{shape}; got {type(samples).__name__}") from None
    for i, sample in enumerate(items):
        if not hasattr(sample, "keys"):
            raise ValueError(f"{shape}; its sample {i} is {type(sample).__name__}, not dict")
    return [snapshot(dict(sample)) for sample in items]


def _key_error(metrics: Any) -> str:
    """Why log() refused `metrics`: a key that is not a str, or not a mapping at all."""
    if not hasattr(metrics, "keys"):
        return f"log() takes a dict of metric name to number, not {type(metrics).__name__}"
    bad = next((k for k in metrics if not isinstance(k, str)), None)
    return (f"metric keys must be strings: got {type(bad).__name__} {bad!r:.60}; "
            "name the metric, for example {'train/loss': value}")


def exception_data(exc: BaseException) -> dict[str, str]:
    """An exception for a log line's data: its type (with module), message and traceback."""
    kind = type(exc)
    module = "" if kind.__module__ == "builtins" else f"{kind.__module__}."
    try:
        message = str(exc)
    except Exception:
        message = ""
    trace = "".join(traceback.format_exception(exc))
    return {"exception": f"{module}{kind.__qualname__}",
            "message": _capped(message, MAX_MESSAGE_CHARS),
            "traceback": trace if len(trace) <= MAX_TRACEBACK_CHARS
            else "…" + trace[-MAX_TRACEBACK_CHARS:]}


def _capped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _one_line(text: str) -> str:
    return _capped(" ".join(text.split()), 300)


def _check_code(status: str, reason: str | None, code: str | None) -> None:
    """Refuse a `code` the catalogue does not hold for `status`, or a refusal with no text."""
    if code is None:
        return
    entry = CATALOGUE.get(code)
    if entry is None or entry.phase != status:
        fitting = ", ".join(r.id for r in CATALOGUE.values() if r.phase == status) or "none"
        raise ValueError(f"code {code!r} is not a failure-catalogue id for {status} "
                         f"(those are: {fitting})")
    if entry.refusal and not reason:
        raise ValueError("a refusal's reason is its own text: pass reason= with the "
                         "input it refuses and the fix")
