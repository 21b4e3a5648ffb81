"""A run's job.json into the queue's `jobs` row: the spec fields, at the attempt the run's
events name; never the claim."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Connection

from runwatch.ingest.lifecycle import job_follows_events
from runwatch.ingest.offsets import stopped_at
from runwatch.jobs.spec import read_spec
from runwatch.rundir import format as fmt
from runwatch.store.jobs import job_row, upsert_spec


def store_job_spec(conn: Connection, run_pk: int, run_dir: Path) -> bool:
    """Insert or refresh the jobs row of a run from its job.json, if it has one, in step
    with the run's events in the index (`ingest.lifecycle.job_follows_events`). Whether it
    was stored: False when the run has no row yet and the index has not read its
    events.jsonl, which is read first. Until then nothing in the index says which attempt
    the job is at, nor that it has ended: a row made from job.json alone is a QUEUED
    attempt 1 that a worker would claim (in an index made again from a folder whose job was
    retried, or has ended, before the pass reads its events).

    Raises runwatch.jobs.spec.JobSpecError (a ValueError) when job.json is not valid.
    """
    spec = read_spec(run_dir)
    if spec is None:
        return True
    if job_row(conn, run_pk) is None and _events_unread(conn, run_pk, run_dir):
        return False
    upsert_spec(conn, run_pk, spec.as_dict())
    job_follows_events(conn, run_pk)
    return True


def _events_unread(conn: Connection, run_pk: int, run_dir: Path) -> bool:
    """Whether the run folder's events.jsonl holds anything and the index has read none of
    it."""
    try:
        size = (run_dir / fmt.EVENTS).lstat().st_size
    except OSError:
        return False  # none, or none that can be read: the job's state is job.json's alone
    return size > 0 and stopped_at(conn, run_pk, fmt.EVENTS).offset == 0
