"""Starting a run's next attempt on disk: its attempt-scoped files (and its checkpoints/
folder) go to attempts/<n>/, then a QUEUED event names the new attempt.

The order makes it safe to crash anywhere: until the event is written the run is still
the ended attempt n (a second try moves whatever is left and writes the event), and
once it is written the indexer purges attempt n from the index knowing that no file of
it is left in the run folder to be read back. Nothing is overwritten: a file whose name
is taken in attempts/<n>/ is kept beside it under the next free `<name>.<k>`. A resumed
attempt keeps them in the run folder instead, up to the step it resumes from
(runwatch.jobs.resume).
"""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path
from typing import Any

from runwatch.jobs.lifecycle import TransitionError
from runwatch.rundir import format as fmt
from runwatch.rundir.append import WAIT_S, locked, records, write_events


def move_attempt_files(run_dir: Path, attempt: int, *, folders: bool = True) -> list[str]:
    """Move the attempt-scoped files in `run_dir` into attempts/<attempt>/ and return
    their names; with `folders` False the checkpoints/ folder stays (a resumed attempt
    goes on with its checkpoint files). The caller holds the folder's lock."""
    names = sorted(e.name for e in os.scandir(run_dir)
                   if (fmt.is_attempt_file(e.name) and e.is_file(follow_symlinks=False))
                   or (folders and fmt.is_attempt_folder(e.name)
                       and e.is_dir(follow_symlinks=False)))
    if not names:
        return []
    target = fmt.attempt_dir(run_dir, attempt)
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        os.rename(run_dir / name, free_path(target / name))
    fsync_dir(target)
    fsync_dir(run_dir)
    return names


def free_path(path: Path) -> Path:
    """`path`, or the first of `path`.1, `path`.2 … that does not exist."""
    k = 0
    candidate = path
    while candidate.exists():
        k += 1
        candidate = path.with_name(f"{path.name}.{k}")
    return candidate


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def last_event(run_dir: Path) -> dict[str, Any] | None:
    """The last complete record of a run folder's events.jsonl, or None."""
    last = deque(records(run_dir / fmt.EVENTS), maxlen=1)
    return last[0] if last else None


def new_attempt(run_dir: Path, next_attempt: int, *, wait_s: float = WAIT_S) -> list[str]:
    """Start attempt `next_attempt` of the ended run in `run_dir` under the folder's lock
    (start_attempt). Returns the names moved.

    Raises TransitionError when the folder's last event is not a terminal one (the run
    has not ended, or the attempt was started already), RunBusy when a process still
    holds the folder after `wait_s` seconds.
    """
    with locked(run_dir, wait_s):
        return start_attempt(run_dir, next_attempt)


def start_attempt(run_dir: Path, next_attempt: int) -> list[str]:
    """Move attempt `next_attempt - 1`'s files into attempts/<next_attempt - 1>/, then
    append {"phase": "QUEUED", "attempt": next_attempt}; returns the names moved. The
    caller holds the folder's lock. Raises TransitionError when the folder's last event
    is not a terminal one."""
    check_next(run_dir, next_attempt)
    moved = move_attempt_files(run_dir, next_attempt - 1)
    write_events(run_dir, [{"phase": "QUEUED", "attempt": next_attempt}])
    return moved


def check_next(run_dir: Path, next_attempt: int) -> None:
    """Raise TransitionError unless attempt `next_attempt` is the one the folder of the
    ended run in `run_dir` can start now: its last event is a terminal one, of attempt
    `next_attempt - 1`. The caller holds the folder's lock."""
    events = list(records(run_dir / fmt.EVENTS))
    phase = events[-1].get("phase") if events else None
    if phase not in fmt.TERMINAL_PHASES:
        raise TransitionError(f"the run's folder says it is {phase or 'not started'}, "
                              "not ended, so no new attempt was started: wait for it to "
                              "end, then retry")
    # the attempt the folder is at: a retry that counted from an older reading (another
    # retry, and that attempt's end, came in between) starts nothing
    current = max((ev["attempt"] for ev in events if type(ev.get("attempt")) is int),
                  default=1)
    if next_attempt != current + 1:
        raise TransitionError(f"the run is at attempt {current} now, not "
                              f"{next_attempt - 1}: another retry came first; look at the "
                              "run again before you retry it")
