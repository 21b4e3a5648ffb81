"""A run's job.json into the queue's `jobs` row (the spec fields; never the claim)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Connection

from runwatch.jobs.spec import read_spec
from runwatch.store.jobs import upsert_spec


def store_job_spec(conn: Connection, run_pk: int, run_dir: Path) -> None:
    """Insert or refresh the jobs row of a run from its job.json, if it has one.

    Raises runwatch.jobs.spec.JobSpecError (a ValueError) when job.json is not valid.
    """
    spec = read_spec(run_dir)
    if spec is not None:
        upsert_spec(conn, run_pk, spec.as_dict())
