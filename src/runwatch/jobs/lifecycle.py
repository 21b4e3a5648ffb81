"""The job lifecycle: which phase a run may move to from which, and why not.

QUEUED → PREPARING → RUNNING → SUCCEEDED | FAILED | CANCELLED. A worker moves a claimed
run to PREPARING when it starts the run's process (the run holds its devices from then
on); a job it submits to a Ray cluster stays QUEUED until the cluster starts it, and ends
FAILED from there when the cluster does not take it or has not started it by its startup
timeout. The process reports RUNNING when it trains. A QUEUED run has no process, so cancel
ends it at once; a PREPARING or RUNNING one is asked to stop first (CANCEL_REQUESTED)
and ends when its process exits, in whatever phase the process recorded if it ended on
its own before the stop took effect. Retry is the one way out of a terminal phase: a new
attempt of the same run, QUEUED again (a resume is a retry that continues from the run's
last checkpoint: runwatch.jobs.resume).

The phase names and groups are those of `runwatch.rundir.format`. Refusals are one
sentence that says what the run can do instead (the API answers them with 409). The
table governs the moves job control makes (workers, cancel, retry); the events a run's
own process writes are recorded as written (the SDK of a run started by hand records
RUNNING → CANCELLED on Ctrl-C).
"""

from __future__ import annotations

from collections.abc import Mapping

from runwatch.rundir.format import (
    CANCELLABLE_PHASES,
    PHASES,
    RETRYABLE_PHASES,
    TERMINAL_PHASES,
)

# Where each phase may go next. A terminal phase goes nowhere but to QUEUED, by retry.
TRANSITIONS: Mapping[str, tuple[str, ...]] = {
    "QUEUED": ("PREPARING", "CANCELLED", "FAILED"),
    "PREPARING": ("RUNNING", "CANCEL_REQUESTED", "SUCCEEDED", "FAILED"),
    "RUNNING": ("CANCEL_REQUESTED", "SUCCEEDED", "FAILED"),
    "CANCEL_REQUESTED": ("CANCELLED", "SUCCEEDED", "FAILED"),
    "SUCCEEDED": ("QUEUED", "FAILED"),
    "FAILED": ("QUEUED",),
    "CANCELLED": ("QUEUED",),
}

# Why an ended run is QUEUED again.
RETRIED = ("retry: a new attempt of the same run, from step 0 (resume: from its last "
           "training checkpoint, keeping its record up to it)")
# Why each move happens, for docs/jobs.md.
WHY: Mapping[tuple[str, str], str] = {
    ("QUEUED", "PREPARING"): "a worker claimed the run and started its process (a job it "
                             "submitted to a Ray cluster: the cluster started it)",
    ("QUEUED", "CANCELLED"): "cancel: the run had no process yet, so it ends at once (a "
                             "job waiting in a Ray cluster's queue: once its worker gave "
                             "it up there)",
    ("QUEUED", "FAILED"): "a Ray cluster did not take the job its worker submitted, or had "
                          "not started it by its startup timeout",
    ("PREPARING", "RUNNING"): "the process started training",
    ("PREPARING", "CANCEL_REQUESTED"): "cancel: its worker tells the process to stop (or, "
                                       "when that worker is lost, a live worker that reaps "
                                       "its jobs does)",
    ("PREPARING", "SUCCEEDED"): "the process finished without reporting a training phase",
    ("PREPARING", "FAILED"): "the process failed, or reported no progress before the startup "
                             "timeout, or could not be started",
    ("RUNNING", "CANCEL_REQUESTED"): "cancel: its worker tells the process to stop (or, "
                                     "when that worker is lost, a live worker that reaps "
                                     "its jobs does)",
    ("RUNNING", "SUCCEEDED"): "the process finished",
    ("RUNNING", "FAILED"): "the process failed (see the failure catalogue)",
    ("CANCEL_REQUESTED", "CANCELLED"): "the process exited after it was told to stop, or "
                                       "was found gone when its lost worker's jobs were "
                                       "reaped",
    ("CANCEL_REQUESTED", "SUCCEEDED"): "the process finished before the stop took effect",
    ("CANCEL_REQUESTED", "FAILED"): "the process failed before the stop took effect",
    ("SUCCEEDED", "QUEUED"): RETRIED,
    ("SUCCEEDED", "FAILED"): "a job's process exited with an error code of its own after its "
                             "run recorded SUCCEEDED (its worker's end follows the SDK's; "
                             "the job is not queued again)",
    ("FAILED", "QUEUED"): RETRIED,
    ("CANCELLED", "QUEUED"): RETRIED,
}


class TransitionError(ValueError):
    """A run cannot make the move asked of it; the message says what it can do instead."""


def _either(phases: tuple[str, ...] | list[str]) -> str:
    return phases[0] if len(phases) == 1 else f"{', '.join(phases[:-1])} or {phases[-1]}"


def refusal(current: str, target: str) -> str | None:
    """None when a run in phase `current` may move to `target`, else one sentence that
    says why not and what is possible."""
    for phase in (current, target):
        if phase not in PHASES:
            return f"{phase!r} is not a run phase; the phases are {_either(list(PHASES))}"
    if target in TRANSITIONS[current]:
        return None
    if current in TERMINAL_PHASES:
        return (f"the run has ended ({current}) and stays so; retry it to start a new "
                "attempt, which is QUEUED")
    if current == "CANCEL_REQUESTED" and target in ("CANCEL_REQUESTED", "QUEUED", "RUNNING"):
        return ("the run is already stopping (CANCEL_REQUESTED); it ends once its process "
                "exits, and you can retry it then")
    if target == "CANCELLED":
        return (f"a {current} run has a process, so cancel asks it to stop first "
                "(CANCEL_REQUESTED) and it is CANCELLED once the process exits")
    if target == "QUEUED":
        return (f"a {current} run has not ended, so it cannot be queued again: cancel it, "
                "or wait for it to end, then retry")
    return f"a {current} run can move to {_either(TRANSITIONS[current])}, not to {target}"


def check(current: str, target: str) -> str:
    """Return `target` if a run in `current` may move there, else raise TransitionError."""
    why = refusal(current, target)
    if why is not None:
        raise TransitionError(why)
    return target


def cancel(current: str) -> str:
    """The phase cancel moves a run in `current` to (CANCELLED for a QUEUED run, else
    CANCEL_REQUESTED), or raise TransitionError saying what is possible."""
    if current in CANCELLABLE_PHASES:
        return check(current, "CANCELLED" if current == "QUEUED" else "CANCEL_REQUESTED")
    if current in TERMINAL_PHASES:
        raise TransitionError(f"the run has already ended ({current}), so there is nothing "
                              "to cancel; retry it to run it again")
    return check(current, "CANCEL_REQUESTED")  # raises: already stopping, or not a phase


def retry(current: str) -> str:
    """QUEUED, the phase of a new attempt, if a run in `current` may be retried; else raise
    TransitionError saying what is possible."""
    if current in PHASES and current not in RETRYABLE_PHASES:
        what = ("wait for it to stop" if current == "CANCEL_REQUESTED"
                else "cancel it or wait for it to end")
        raise TransitionError(f"only an ended run can be retried and this one is {current}: "
                              f"{what}, then retry")
    return check(current, "QUEUED")
