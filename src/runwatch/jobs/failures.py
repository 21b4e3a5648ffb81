"""The failure catalogue, and how an ended attempt is classified into it.

A failed run carries one reason from `CATALOGUE`: a stable id (the `code` of its
terminal event), a sentence that says what happened and what would fit, and what to do
(`Reason.advice`: a run started by hand, which runwatch cannot retry, gets its own words
where a job's would not fit); a cancelled run carries the `cancelled` entry, or
`cancelled_before_start` when no process of it ran (`AttemptEnd.ran`). Except for
a refusal (the runtime's own words about the input it would not train on, which name
that input), a reason never carries an exception's message, a compute backend's message
or a module name: those belong in the run's logs. `exception_verdict` gives the reason
for an exception that ended a training loop (the SDK records it), and `classify` reads
what a worker can observe of an ended attempt (`AttemptEnd`) and says how the attempt
ended: its terminal phase and, unless it succeeded, the reason.

This module imports no recipe and no framework, so the SDK can use it.
"""

from __future__ import annotations

import errno
import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

MAX_REFUSAL_CHARS = 500


class RefusedInput(Exception):
    """A training runtime will not train on its input. The message names that input and
    the fix; it is the one exception text a run's reason keeps (as `refused`). The
    recipes' RecipeError, ConfigError and WandbSetupError are refusals; a loop of your
    own may raise (a subclass of) it too. `runwatch.sdk.RefusedInput` is this class."""


@dataclass(frozen=True)
class Reason:
    """One entry of the failure catalogue."""

    id: str
    sentence: str  # the reason a run shows (for a refusal: what its text is)
    what_to_do: str
    refusal: bool = False
    phase: str = "FAILED"  # the terminal phase a run with this reason ends in
    # what to do about a run started by hand (no job.json) with this reason, where
    # `what_to_do` asks for what only a job has: a retry, a resubmit, a device profile
    by_hand: str | None = None

    def advice(self, job: bool) -> str:
        """What to do about a run that ended with this reason: a job's advice, or one a run
        started by hand can follow (runwatch cannot start such a run again)."""
        return self.by_hand if self.by_hand is not None and not job else self.what_to_do


# How a job's run is resumed, in the advice that names it (runwatch.jobs.resume).
RESUME = "resume it from its last checkpoint if it holds one (runwatch runs retry RUN --resume)"
_CATALOGUE = (
    Reason("refused", "the runtime's refusal itself, which names the input it would not train "
           "on, such as \"row 3 ends with a user message\"",
           "Correct the input the refusal names, then submit the run again: the runtime read "
           "the run's inputs and would not train on them.", refusal=True,
           by_hand="Correct the input the refusal names, then run the run's command again: "
                   "the runtime read the run's inputs and would not train on them."),
    Reason("device_oom", "the training job ran out of device memory; shorter sequences, a "
           "smaller micro batch or activation checkpointing need less",
           "A training step needed more device memory than the device has. Lower the longest "
           "sequence length or the micro batch, or turn on activation (gradient) "
           "checkpointing; if it still fails, choose a device profile with more device memory.",
           by_hand="A training step needed more device memory than the device has. Lower the "
                   "longest sequence length or the micro batch, or turn on activation (gradient) "
                   "checkpointing, then run the run's command again; if it still fails, run it "
                   "on a device with more memory."),
    Reason("rollout_engine_oom", "the training job's rollout engine did not fit in its share "
           "of device memory; shorter sequences or a smaller model fit",
           "The rollout engine could not hold the model's weights and the cache for one "
           "sequence in its share of device memory. Lower the longest sequence length, or "
           "train a smaller model."),
    Reason("weight_handoff_oom", "the training job ran out of device memory while handing "
           "its weights to the rollout engine; a smaller model or a device with more memory "
           "fits", "While the trainer updates the rollout engine the device holds two copies "
                   "of the weights. Train a smaller model, or choose a device profile with "
                   "more device memory."),
    Reason("eval_device_oom", "the evaluation job ran out of device memory; a lower "
           "completion limit needs less",
           "Lower the evaluation's completion limit, or ask whoever runs your workers for "
           "evaluation devices with more device memory."),
    Reason("eval_engine_oom", "the evaluation job's inference engine did not fit in its share "
           "of device memory; a smaller model or a device with more memory fits",
           "The inference engine could not hold the model's weights and its cache in its "
           "share of device memory; the completion limit does not change that. Evaluate a "
           "smaller model, or ask whoever runs your workers for devices with more memory."),
    Reason("host_oom", "the training job ran out of host memory; a smaller micro batch or "
           "shorter sequences need less",
           "The worker ran out of host memory, so the operating system stopped the job. "
           "Lower the longest sequence length or the micro batch; if it still fails, choose "
           "a device profile with more host memory.",
           by_hand="The machine ran out of host memory, so the operating system stopped the "
                   "run. Lower the longest sequence length or the micro batch, then run the "
                   "run's command again; if it still fails, run it on a machine with more "
                   "memory."),
    Reason("eval_host_oom", "the evaluation job ran out of host memory; a device with more "
           "host memory fits it",
           "The evaluation worker ran out of host memory, so the operating system stopped the "
           "job. Ask whoever runs your workers for evaluation devices with more host memory."),
    Reason("disk_full", "the training job ran out of disk space",
           "A write failed because the disk (or your quota on it) was full: most often a "
           "checkpoint save, which needs as much free space as the weights and the optimizer "
           "state. Free space on the disk the run writes its checkpoints and its run folder "
           f"to, or keep fewer checkpoints, then {RESUME}, or retry it.",
           by_hand="A write failed because the disk (or your quota on it) was full: most often "
                   "a checkpoint save, which needs as much free space as the weights and the "
                   "optimizer state. Free space on the disk the run writes its checkpoints and "
                   "its run folder to, or keep fewer checkpoints, then run the run's command "
                   "again, resuming from its last checkpoint if it holds one."),
    Reason("devices_unreachable", "the training cluster did not answer while this run waited "
           "for its devices",
           "The run was granted its devices, and the cluster did not answer before the wait "
           "for them ran out. Submit the run again later; if it fails the same way, give the "
           "run ID to whoever runs your workers."),
    Reason("could_not_start", "this run's training process could not be started",
           "Starting the run's process failed, and its logs say why (runwatch runs logs "
           "RUN), such as a command that is not installed where the worker runs or a working "
           "folder that is gone. Correct that, then submit the run again; if its logs name "
           "no cause, give the run ID to whoever runs your workers."),
    Reason("startup_timeout", "this run's training job reported no progress within the "
           "startup timeout",
           "The job was preparing and reported nothing for the deployment's startup timeout. "
           "Submit the run again; if it hangs again, read the run's logs for the last step "
           "it reported, or ask for a longer startup timeout."),
    Reason("stopped", "the training job was stopped",
           "Something outside runwatch ended the job. Retry the run to start it again, or "
           f"{RESUME}.",
           by_hand="Something outside runwatch ended it. Run its command again, resuming from "
                   "its last checkpoint if it holds one."),
    Reason("stopped_early", "the training job stopped before it finished",
           "The job ended without reporting how. Start the run again.",
           by_hand="Its process died without recording how it ended: it was killed "
           "(SIGKILL, or the operating system's out-of-memory killer: dmesg says which), or "
           "its machine stopped. Run its command again, resuming from its last checkpoint "
           "if it holds one; submit it with runwatch submit so that runwatch can retry it."),
    Reason("failed", "the training job failed; the run ID is what support needs",
           "An exception the job raised is in its error logs (runwatch runs logs RUN "
           "--level error), with its traceback; a job that raised none left only what it "
           "printed in its logs. Quote the run ID."),
    Reason("cancelled", "the training job was stopped",
           "It was cancelled (or, started by hand, sent SIGTERM or Ctrl-C) and stopped. "
           f"Retry the run to start it again, or {RESUME}.",
           phase="CANCELLED",
           by_hand="It was cancelled (or sent SIGTERM or Ctrl-C) and stopped. It was started "
                   "by hand, so runwatch cannot start it again: run its command again "
                   "(resuming from its last checkpoint if it holds one), or submit it with "
                   "runwatch submit so that it can be retried."),
    # a cancel of a job no process of which ran: a queued job's, or one its worker (or its
    # cluster) had not started yet; nothing of it ran, so there is nothing to resume
    Reason("cancelled_before_start", "the training job was cancelled before it started",
           "It was cancelled while it waited to start, so it never ran and recorded nothing. "
           "Retry the run to queue it again (runwatch runs retry RUN).", phase="CANCELLED"),
    Reason("worker_stopped", "the training job was stopped because its worker was stopped",
           "Its worker (runwatch worker, or the one runwatch ui or server runs) was stopped "
           "with SIGTERM or Ctrl-C while the job ran, so it stopped the job and did not queue "
           "it again; what the job recorded stays in view. Retry the run to start it again, "
           f"or {RESUME}; to stop a worker and let its jobs finish, drain it (runwatch "
           "resources --drain WORKER).", phase="CANCELLED"),
)
CATALOGUE: dict[str, Reason] = {r.id: r for r in _CATALOGUE}


class Activity(StrEnum):
    """What the job was doing when it ended (a reason for memory depends on it)."""

    TRAINING = "training"
    ROLLOUT_ENGINE = "rollout_engine"  # loading the rollout engine
    WEIGHT_HANDOFF = "weight_handoff"  # handing the trainer's weights to the rollout engine
    EVALUATION = "evaluation"
    EVALUATION_ENGINE = "evaluation_engine"  # loading the evaluation's inference engine


@dataclass(frozen=True)
class AttemptEnd:
    """What a worker can observe of an attempt whose process ended (or never started)."""

    exit_code: int | None = None  # None when a signal ended the process
    signal: int | None = None  # the signal that ended it
    oom_killed: bool = False  # the kernel's OOM killer ended it (memory evidence, not a guess)
    exception_type: str | None = None  # the exception that ended it, if known by name
    sdk_phase: str | None = None  # the terminal phase the SDK recorded, if any
    sdk_reason: str | None = None  # the reason the SDK recorded with it
    sdk_code: str | None = None  # the catalogue id the SDK recorded with it (its `code`)
    # the process recorded a phase of its own (its SDK attached), whether or not an end
    sdk_recorded: bool = False
    stderr_tail: str = ""  # the last lines the process wrote to stderr
    cancel_requested: bool = False  # runwatch asked it to stop
    startup_timed_out: bool = False  # no progress while PREPARING within the startup timeout
    devices_timed_out: bool = False  # the wait for its devices ran out
    start_failed: bool = False  # its process could not be started
    worker_lost: bool = False  # its worker stopped heartbeating
    worker_stopped: bool = False  # its worker, told to stop, stopped it
    activity: Activity = Activity.TRAINING
    # when it ended, where its runner reports that (Ray's end time: a lost worker's job is
    # concluded later, at its reap); None: when it was seen to have ended
    ended_at: float | None = None

    @property
    def ran(self) -> bool:
        """Whether a process of the attempt ran, as far as what was observed shows: an exit
        status or a signal, a record or an exception of its own, its output, a kill, a
        startup timeout (it was PREPARING). A start that failed, or a cluster that never
        granted its devices, ran nothing; an attempt ended with nothing observed of a
        process (a queued job cancelled, or one its worker or cluster had not started yet)
        never ran. A lost worker's attempt may have run: it counts as run."""
        if self.start_failed or self.devices_timed_out:
            return False
        return (self.exit_code is not None or self.signal is not None or self.oom_killed
                or self.sdk_recorded or self.sdk_phase is not None or self.worker_lost
                or self.startup_timed_out or self.exception_type is not None
                or bool(self.stderr_tail.strip()))

    @classmethod
    def from_returncode(cls, returncode: int, **observed: Any) -> AttemptEnd:
        """From a subprocess's returncode, negative when a signal ended it."""
        if returncode < 0:
            return cls(signal=-returncode, **observed)
        return cls(exit_code=returncode, **observed)


@dataclass(frozen=True)
class Verdict:
    """How an attempt ended: its terminal phase and, unless it SUCCEEDED, the reason."""

    phase: str
    reason: Reason | None = None
    text: str | None = None  # what the run shows: the sentence, or a refusal's own words

    @property
    def code(self) -> str | None:
        """The reason's id, which the run's terminal event records as its `code`."""
        return None if self.reason is None else self.reason.id


def refusal_of(exc: BaseException) -> str | None:
    """The text of `exc` if it is a refusal of the run's input (a `RefusedInput`, which
    is what the recipes raise), else None: any other exception's message stays out of
    the reason."""
    if not isinstance(exc, RefusedInput):
        return None
    return reason_line(_text(exc)) or None


def exception_verdict(exc: BaseException) -> Verdict:
    """How a run ends when `exc` ended its training loop (what the SDK records).

    Ctrl-C (or the SDK's SIGTERM handler): CANCELLED. sys.exit(0): SUCCEEDED (the loop
    chose to end). A refusal: FAILED with its own text. A framework's device
    out-of-memory error (a class named OutOfMemoryError, such as
    torch.cuda.OutOfMemoryError, or its known wording), here or in what it was raised
    from: `device_oom`; MemoryError, a host allocator's wording or Ray's
    OutOfMemoryError (its node ran low on memory): `host_oom`. A write the disk
    refused for want of space (ENOSPC or EDQUOT, or PyTorch's checkpoint writer's failure,
    which names no cause): `disk_full`. Anything else: `failed`. No verdict carries the
    exception's message but a refusal's.
    """
    if isinstance(exc, KeyboardInterrupt):
        return _verdict("cancelled")
    if isinstance(exc, SystemExit) and exc.code in (None, 0):
        return Verdict("SUCCEEDED")
    refusal = refusal_of(exc)
    if refusal:
        return Verdict("FAILED", CATALOGUE["refused"], refusal)
    for link in _chain(exc):
        named = f"{type(link).__name__}: {_text(link)}"
        if RAY_HOST_OOM.search(f"{type(link).__module__}.{named}"):
            return _verdict("host_oom")
        oom_class = any(c.__name__ == "OutOfMemoryError" for c in type(link).__mro__)
        if oom_class or _DEVICE_OOM.search(named):
            return _verdict("device_oom")
        if isinstance(link, MemoryError) or _HOST_OOM.search(named):
            return _verdict("host_oom")
        if (isinstance(link, OSError) and link.errno in _DISK_FULL_ERRNOS) or \
                _DISK_FULL.search(named):
            return _verdict("disk_full")
    return _verdict("failed")


def _chain(exc: BaseException, limit: int = 16) -> Iterator[BaseException]:
    """`exc`, then what it was raised from or while handling (a wrapped OOM is an OOM)."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen and len(seen) < limit:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def _text(exc: BaseException) -> str:
    """str(exc), or '' for an exception whose __str__ fails."""
    try:
        return str(exc)
    except Exception:
        return ""


# Ray's words when its memory monitor killed a job's tasks or actors (host memory, though
# its exception class is named OutOfMemoryError like a device's).
RAY_HOST_OOM = re.compile(r"ray\.exceptions\.OutOfMemoryError|killed due to (?:the node "
                          r"running low on memory|memory pressure)")
# Words a framework's device out-of-memory error carries (PyTorch on CUDA, ROCm, MPS and
# XPU, cuBLAS, the CUDA runtime, XLA).
_DEVICE_OOM = re.compile(
    r"OutOfMemoryError|(CUDA|HIP|XPU|MPS backend) out of memory|CUDA error: out of memory|"
    r"CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation|RESOURCE_EXHAUSTED")
# Host allocation failures: Python's MemoryError, PyTorch's CPU allocator, C++, ENOMEM.
_HOST_OOM = re.compile(
    r"\bMemoryError\b|DefaultCPUAllocator: can't allocate memory|std::bad_alloc|"
    r"Cannot allocate memory")
# A write the disk refused for want of space: the C library's words for ENOSPC and EDQUOT,
# and PyTorch's checkpoint writer, whose errors on a full disk say only that a write failed
# ("file write failed", "unexpected pos 640 vs 534", "basic_ios::clear: iostream error").
_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_DISK_FULL = re.compile(
    r"No space left on device|Disk quota exceeded|\[Errno (?:28|122)\]|"
    r"PytorchStreamWriter failed writing file|inline_container\.cc:\d+\] \. unexpected pos "
    r"\d+ vs \d+|basic_ios::clear: iostream error")
# The last line of a traceback: a (dotted) exception name, then ":" or the line's end.
_EXC_LINE = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)(?::|$)")
# How the SDK recorded an exception that ended the loop before it recorded codes (old runs).
_SDK_RAISED = re.compile(r"^the training loop raised ((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)")
# Signals that mean the process was stopped from outside rather than crashing.
_STOP_SIGNALS = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP,
                           signal.SIGQUIT})
_DEVICE_OOM_BY_ACTIVITY = {
    Activity.TRAINING: "device_oom", Activity.ROLLOUT_ENGINE: "rollout_engine_oom",
    Activity.WEIGHT_HANDOFF: "weight_handoff_oom", Activity.EVALUATION: "eval_device_oom",
    Activity.EVALUATION_ENGINE: "eval_engine_oom",
}
_EVALUATING = frozenset({Activity.EVALUATION, Activity.EVALUATION_ENGINE})


def reason_line(text: str) -> str:
    """`text` as a run's reason holds it: on one line (each run of whitespace, line breaks
    too, one space) and at most MAX_REFUSAL_CHARS characters."""
    text = " ".join(text.split())
    return text if len(text) <= MAX_REFUSAL_CHARS else text[:MAX_REFUSAL_CHARS - 1] + "…"


def traceback_exception(stderr_tail: str) -> str | None:
    """The name of the exception a Python traceback in `stderr_tail` ended with, if any."""
    lines = stderr_tail.splitlines()
    start = max((i for i, line in enumerate(lines)
                 if line.startswith("Traceback (most recent call last)")), default=None)
    if start is None:
        return None
    for line in lines[start + 1:]:
        if line and not line[0].isspace():
            m = _EXC_LINE.match(line)
            return m.group(1) if m else None
    return None


def _exception(end: AttemptEnd) -> str | None:
    if end.exception_type:
        return end.exception_type
    m = _SDK_RAISED.match(end.sdk_reason or "")
    return m.group(1) if m else traceback_exception(end.stderr_tail)


def ending_signal(returncode: int) -> int | None:
    """The signal that ended a process of this returncode (negative when a signal ended
    it); a shell reports its child's stop signal N as exit status 128 + N (other statuses
    over 128 are the program's own). Workers read an attempt's end with it too."""
    if returncode < 0:
        return -returncode
    return returncode - 128 if returncode - 128 in _STOP_SIGNALS else None


def _signal(end: AttemptEnd) -> int | None:
    """The signal that ended the process, reported as one or by a shell's exit status."""
    if end.signal is not None:
        return end.signal
    return ending_signal(end.exit_code) if end.exit_code is not None else None


def _verdict(reason_id: str) -> Verdict:
    """The verdict of catalogue reason `reason_id` (not a refusal): its phase, its sentence."""
    reason = CATALOGUE[reason_id]
    return Verdict(reason.phase, reason, reason.sentence)


def _memory(end: AttemptEnd, exc: str | None) -> Verdict | None:
    texts = " ".join(t for t in (exc, end.sdk_reason, end.stderr_tail) if t)
    if end.oom_killed or RAY_HOST_OOM.search(texts) or (
            _HOST_OOM.search(texts) and not _DEVICE_OOM.search(texts)):
        return _verdict("eval_host_oom" if end.activity in _EVALUATING else "host_oom")
    if _DEVICE_OOM.search(texts):
        return _verdict(_DEVICE_OOM_BY_ACTIVITY[end.activity])
    return None


def _coded(end: AttemptEnd) -> Verdict | None:
    """The verdict the SDK's recorded `code` gives (the best evidence there is), or None
    when it recorded none that fits its phase (a run from before codes, a loop's own)."""
    reason = CATALOGUE.get(end.sdk_code or "")
    if reason is None or reason.phase != end.sdk_phase:
        return None
    if reason.phase == "CANCELLED":
        # a stopping worker asked (`worker_stopped`, even one a reaper concludes), a cancel
        # asked (`cancelled`, by its note), or the program ended itself so
        # (`run.finish("CANCELLED")`): a SIGTERM from outside the SDK records as FAILED
        # `stopped` itself, so a recorded cancel is one, and is not queued again
        return _verdict(reason.id)
    if reason.refusal:
        refusal = reason_line(end.sdk_reason or "")
        return Verdict("FAILED", reason, refusal) if refusal else None
    return _verdict(reason.id)


def _recorded(end: AttemptEnd) -> Verdict | None:
    """The catalogue reason the SDK recorded, when it recorded one of the sentences."""
    text = end.sdk_reason or ""
    found = next((r for r in _CATALOGUE if r.phase == "FAILED" and not r.refusal
                  and text.startswith(r.sentence)), None)
    return None if found is None else _verdict(found.id)


def exited_after_success(end: AttemptEnd) -> Verdict:
    """How an attempt whose process recorded SUCCEEDED ended: SUCCEEDED, unless the
    process then exited with an error code of its own (a failed upload or test after
    training, `sys.exit(3)` after an evaluation: Python gives the SDK no exit status, so
    it recorded SUCCEEDED), which fails it `failed`, saying so. A signal (a kill during
    teardown, a shell's 128 + N for a stop signal) or a stop runwatch asked for undoes no
    training: it stays SUCCEEDED."""
    code = end.exit_code
    if (code is None or code == 0 or ending_signal(code) is not None or end.cancel_requested
            or end.worker_stopped):
        return Verdict("SUCCEEDED")
    reason = CATALOGUE["failed"]
    return Verdict("FAILED", reason,
                   f"{reason.sentence}: {EXITED_AFTER_SUCCESS.format(code=code)}")


# What the reason of a job whose process failed after its run recorded SUCCEEDED adds to
# the `failed` sentence (the worker's end follows the SDK's, which stays on record).
EXITED_AFTER_SUCCESS = "its process exited with code {code} after its run recorded SUCCEEDED"


def classify(end: AttemptEnd) -> Verdict:
    """How an attempt ended, from what its worker observed (see docs/jobs.md)."""
    if end.sdk_phase == "SUCCEEDED":
        return exited_after_success(end)
    if end.cancel_requested:
        return _verdict("cancelled" if end.ran else "cancelled_before_start")
    if end.worker_stopped:
        return _verdict("worker_stopped")
    for flag, reason_id in ((end.start_failed, "could_not_start"),
                            (end.devices_timed_out, "devices_unreachable"),
                            (end.startup_timed_out, "startup_timeout"),
                            (end.worker_lost, "stopped_early")):
        if flag:
            return _verdict(reason_id)
    coded = _coded(end)
    if coded is not None:
        return coded
    if end.exit_code == 0 and end.sdk_phase is None and not end.oom_killed:
        # a command that records nothing and exits well; a process that recorded phases
        # and no end exited without finish() (os._exit(0)): it stopped partway
        return _verdict("stopped_early") if end.sdk_recorded else Verdict("SUCCEEDED")
    exc = _exception(end)
    memory = _memory(end, exc)
    if memory is not None:
        return memory
    if _DISK_FULL.search(" ".join(t for t in (end.sdk_reason, end.stderr_tail) if t)):
        return _verdict("disk_full")
    sig = _signal(end)
    if sig is not None:
        return _verdict("stopped" if sig in _STOP_SIGNALS else "failed")
    if end.sdk_phase == "CANCELLED":
        return _verdict("stopped")  # stopped from outside: runwatch did not ask
    if end.sdk_phase == "FAILED":
        return _recorded(end) or _verdict("failed")
    return _verdict("failed" if exc else "stopped_early")
