"""The note a stopping worker leaves in attempts/<n>/ before it stops attempt n's process.

A worker told to stop (SIGTERM or Ctrl-C) stops its running jobs with the same SIGTERM a
cancel sends; the note is what tells the two apart afterwards: the run's SDK, and job
control concluding the attempt (its own worker, or another's reaper), record the end as
`worker_stopped` rather than a cancel or a stop from outside, and queue no next attempt.
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
    try:
        return stat.S_ISREG(os.lstat(path(run_dir, attempt)).st_mode)
    except OSError:
        return False
