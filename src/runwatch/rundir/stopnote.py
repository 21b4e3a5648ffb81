"""The notes job control leaves in attempts/<n>/ before it stops attempt n's process.

A cancel and a worker told to stop (SIGTERM or Ctrl-C) stop a job with the same SIGTERM
that anything outside runwatch may send (a cluster preempting the job); the notes tell
them apart afterwards: the run's SDK, and job control concluding the attempt (its own
worker, or another's reaper), record the end as `worker_stopped` (`write`: a stopping
worker's, queued no more), `cancelled` (`write_cancel`: a cancel's), or, with neither, as
stopped from outside (FAILED `stopped`, queued again while attempts remain).
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from runwatch.rundir import format as fmt
from runwatch.rundir.atomic import write_atomic
from runwatch.rundir.jsonl import dumps_line


def path(run_dir: Path, attempt: int) -> Path:
    """attempts/<attempt>/worker_stopped.json of the run in `run_dir`."""
    return fmt.attempt_dir(run_dir, attempt) / fmt.WORKER_STOPPED


def write(run_dir: Path, attempt: int, worker: str) -> None:
    """Say that worker `worker` stops attempt `attempt` because it was told to stop.
    Raises OSError when the disk refuses it."""
    write_atomic(path(run_dir, attempt), dumps_line({"ts": time.time(), "worker": worker}))


def written(run_dir: Path, attempt: int) -> bool:
    """Whether a stopping worker left the note for attempt `attempt` (a regular file: a
    link or anything else there is no note)."""
    return _regular(path(run_dir, attempt))


def cancel_path(run_dir: Path, attempt: int) -> Path:
    """attempts/<attempt>/cancel_asked.json of the run in `run_dir`."""
    return fmt.attempt_dir(run_dir, attempt) / fmt.CANCEL_ASKED


def write_cancel(run_dir: Path, attempt: int, by: str) -> None:
    """Say that job control (`by`: the worker that stops it) stops attempt `attempt`
    because it was cancelled. Raises OSError when the disk refuses it."""
    write_atomic(cancel_path(run_dir, attempt), dumps_line({"ts": time.time(), "by": by}))


def cancel_written(run_dir: Path, attempt: int) -> bool:
    """Whether job control left the cancel's note for attempt `attempt`."""
    return _regular(cancel_path(run_dir, attempt))


def _regular(note: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(note).st_mode)
    except OSError:
        return False
