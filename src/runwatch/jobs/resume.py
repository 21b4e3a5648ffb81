"""Resuming a job's run from its last checkpoint: a new attempt that keeps the run's record
up to its saved step and trains on from there (`runwatch runs retry RUN --resume`, the
API's retry with `{"resume": true}`; runwatch.jobs.control.retry does it).

A retry moves attempt n's files to attempts/<n>/, and the next attempt trains from step 0.
A resume restores the run's record up to its saved step, the step of the last `training`
record of checkpoints.jsonl, which the run's recipe or script restores (`restorable`; a
record whose file is gone restores nothing). Job control first moves attempt n's files to
attempts/<n>/ as a retry does, all but the checkpoints/ folder, which the next attempt goes
on with, and appends `{"phase": "QUEUED", "attempt": n+1, "resume": {"attempt": n,
"step": S, "checkpoint"?: PATH}}` and a log line (`resume_attempt`). The index then shows
the attempt QUEUED with nothing recorded (a worker claims only a QUEUED job). The worker
that starts it puts back, under the folder's lock and before its start event, what attempt
n recorded up to step S: the records of metrics.jsonl and checkpoints.jsonl of those steps,
the sample files of those steps and the engine config (`restore`; attempts/<n>/ keeps them
all, what came after S too: the work the attempt does again). They keep attempt n's times,
older than the QUEUED event, so the index does not read them as the attempt's start
(runwatch.ingest.lifecycle.predates_queueing): a Ray worker's attempt, whose start event
is QUEUED until its cluster starts it, reads QUEUED until then, its record in view. So the
run's series follows the training that goes on, as a trainer that restores a step drops
what came after it.

The worker tells the process where to resume (`Resume.args`): `RUNWATCH_RESUME_STEP` (and
`RUNWATCH_RESUME_CHECKPOINT`, the checkpoint's file, when its record names one) in its
environment and, for a built-in recipe, `resume=true` on its command line (with the run's
name, which a recipe's resume names), so that the recipe restores its last training
checkpoint. The attempt's device time is the run's, as every attempt's is, the work
repeated after the restore included (runwatch.jobs.cost).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runwatch.jobs.attempts import check_next, fsync_dir, move_attempt_files
from runwatch.jobs.lifecycle import TransitionError
from runwatch.rundir import format as fmt
from runwatch.rundir.append import records, write_events, write_records
from runwatch.rundir.jsonl import loads_line
from runwatch.rundir.safeio import UnsafeFile, open_run_file

ENV_RESUME_STEP = "RUNWATCH_RESUME_STEP"
ENV_RESUME_CHECKPOINT = "RUNWATCH_RESUME_CHECKPOINT"
# The field of the QUEUED event that starts a resumed attempt.
RESUME = "resume"
# What to do instead of a resume that cannot be, in every refusal's words.
INSTEAD = "retry it without resuming, which trains it again from step 0"


@dataclass(frozen=True)
class Resume:
    """Where an attempt resumes: the attempt whose record it goes on from (its files in
    attempts/<attempt>/), the step of the checkpoint it restores, and that checkpoint's
    file as its record names it (relative to the run folder, or absolute; None when the
    record names none: the script knows where it keeps it)."""

    attempt: int
    step: int
    checkpoint: str | None = None

    def event(self, next_attempt: int) -> dict[str, Any]:
        """The QUEUED event that starts attempt `next_attempt` as this resume."""
        said: dict[str, Any] = {"attempt": self.attempt, "step": self.step}
        if self.checkpoint:
            said["checkpoint"] = self.checkpoint
        return {"phase": "QUEUED", "attempt": next_attempt, RESUME: said}

    def args(self, run_dir: Path, kind: str | None, name: str
             ) -> tuple[list[str], dict[str, str]]:
        """What the attempt's process is started with besides its job's command: the words
        added to its command line (a recipe's `recipe_settings`), and its environment's
        RUNWATCH_RESUME_STEP and RUNWATCH_RESUME_CHECKPOINT (an absolute path)."""
        env = {ENV_RESUME_STEP: str(self.step)}
        if self.checkpoint:
            env[ENV_RESUME_CHECKPOINT] = str(run_dir / self.checkpoint)  # absolute stays so
        return (recipe_settings(name) if kind == "recipe" else []), env


def recipe_settings(name: str) -> list[str]:
    """The settings that make a built-in recipe continue run `name` from its last training
    checkpoint (`name` is what its `resume` asks for; under a job the run is the job's)."""
    return [f"name={name}", "resume=true"]


def restorable(run_dir: Path, attempt: int) -> Resume:
    """Where attempt `attempt`, the ended attempt of the run in `run_dir` whose files are
    still in the run folder, is resumed from: its last `training` checkpoint record (what
    a recipe's resume restores). Raises TransitionError when it holds none, or when the
    file that record names is gone."""
    last: dict[str, Any] | None = None
    for rec in records(run_dir / fmt.CHECKPOINTS):
        if rec.get("kind") == "training" and type(rec.get("step")) is int and rec["step"] >= 0:
            last = rec
    if last is None:
        raise TransitionError(f"the run holds no training checkpoint to resume from: {INSTEAD}")
    path = last.get("path")
    if not isinstance(path, str) or not path:
        return Resume(attempt, last["step"])
    if not (run_dir / path).exists():
        raise TransitionError(f"the file of the run's last training checkpoint (step "
                              f"{last['step']}), {path}, is gone, so there is nothing to "
                              f"resume from: {INSTEAD}")
    return Resume(attempt, last["step"], path)


def resume_attempt(run_dir: Path, next_attempt: int) -> Resume:
    """Start attempt `next_attempt` of the ended run in `run_dir` as a resume from its
    last training checkpoint: move the ended attempt's files to its attempts/<n>/ (all but
    the checkpoints/ folder), then append the QUEUED event that says where it resumes, and
    a log line. An ended attempt that was itself a resume and never started (cancelled
    while it waited) passes its own resume on. The caller holds the folder's lock. Raises
    TransitionError when the run has not ended, another retry came first, or it holds no
    checkpoint to resume from."""
    check_next(run_dir, next_attempt)
    ended = next_attempt - 1
    before = resumed(records(run_dir / fmt.EVENTS), ended)
    if before is not None and not (run_dir / fmt.CHECKPOINTS).exists():
        resume = before  # nothing of it was put back: it never started
    else:
        resume = restorable(run_dir, ended)
    move_attempt_files(run_dir, ended, folders=False)
    write_events(run_dir, [resume.event(next_attempt)])
    kept = fmt.attempt_dir(run_dir, resume.attempt).relative_to(run_dir).as_posix()
    write_records(run_dir, fmt.LOGS, [{
        "level": "info",
        "message": f"attempt {next_attempt} resumes from step {resume.step}, the run's last "
                   f"training checkpoint, with what attempt {resume.attempt} recorded up to "
                   f"that step ({kept}/ keeps all it recorded)",
        "data": {"attempt": next_attempt, "resume": resume.event(next_attempt)[RESUME]}}])
    return resume


def resumed(events: Iterable[dict[str, Any]], attempt: int) -> Resume | None:
    """Where attempt `attempt` resumes, from the QUEUED event that started it (job
    control's, not a worker's start event); None when it starts from step 0."""
    for ev in events:
        if ev.get("phase") == "QUEUED" and ev.get("attempt") == attempt and "worker" not in ev:
            said = ev.get(RESUME)
            if not isinstance(said, dict):
                return None
            source, step, path = said.get("attempt"), said.get("step"), said.get("checkpoint")
            if type(source) is not int or type(step) is not int:
                return None
            return Resume(source, step, path if isinstance(path, str) and path else None)
    return None


def restore(run_dir: Path, resume: Resume) -> None:
    """Put back into the run folder what attempt `resume.attempt` recorded up to
    `resume.step` (its files in attempts/<attempt>/, which keep all of it): the records of
    metrics.jsonl and checkpoints.jsonl of those steps, the sample files of those steps,
    and the engine config. Done again, it puts back the same. The caller holds the
    folder's lock; the attempt's process has not started."""
    source = fmt.attempt_dir(run_dir, resume.attempt)
    for name in (fmt.METRICS, fmt.CHECKPOINTS):
        _copy_until(source / name, run_dir / name, resume.step)
    for entry in os.scandir(source) if source.is_dir() else ():
        parsed = fmt.parse_sample_file_name(entry.name)
        if ((entry.name == fmt.ENGINE_CONFIG or (parsed is not None and parsed[0] <= resume.step))
                and entry.is_file(follow_symlinks=False)):
            _put(Path(entry.path), run_dir / entry.name)
    fsync_dir(run_dir)


def _copy_until(source: Path, path: Path, step: int) -> None:
    """Write to record file `path`, in one rename, the complete records of `source` of
    steps up to `step` (and any line that names no step)."""
    try:
        reading = open_run_file(source)
    except (FileNotFoundError, UnsafeFile):
        return  # none, or one no reader reads (a link)
    tmp = path.with_name(path.name + ".tmp")  # a name the indexer ignores
    try:
        with reading, open(tmp, "wb") as kept:
            for line in reading:
                # a torn last line (its writer was killed mid-write) is no record
                if line.endswith(b"\n") and _step_of(line) <= step:
                    kept.write(line)
            kept.flush()
            os.fsync(kept.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _put(source: Path, path: Path) -> None:
    """Put file `source` at `path` as well (a link, else a copy), unless it is there."""
    if path.exists():
        return
    try:
        os.link(source, path)
    except OSError:  # a filesystem without hard links
        shutil.copyfile(source, path)


def _step_of(line: bytes) -> int:
    """The step of a record line; -1 when it names none (such a line is kept)."""
    try:
        rec = loads_line(line)
    except ValueError:
        return -1
    step = rec.get("step") if isinstance(rec, dict) else None
    return step if type(step) is int else -1
