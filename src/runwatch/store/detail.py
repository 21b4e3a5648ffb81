"""What the index holds about one run, read in one place for its detail and its logs.

The store only reads rows and records here; `runwatch.analysis.detail` turns them into
the run detail the CLI and the API show.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Row, select

from runwatch.rundir.format import levels_from
from runwatch.store import queries as q
from runwatch.store import schema as s
from runwatch.store.jobs import job_row
from runwatch.store.keys import KeyInfo, run_keys


@dataclass(frozen=True)
class RunRecords:
    """A run's row and the records of it that its detail is made from."""

    row: Row[Any]
    events: list[dict[str, Any]]
    keys: list[KeyInfo]
    checkpoints: list[Row[Any]]
    problems: list[str]
    process_gone: bool
    job: dict[str, Any] | None  # its row in the queue (store.jobs.job_row); None by hand


def read_run(conn: Connection, row: Row[Any]) -> RunRecords:
    """The records of the run in `row`."""
    return RunRecords(row, q.events(conn, row.pk), run_keys(conn, row.pk),
                      checkpoint_rows(conn, row.pk), q.problems(conn, row.pk),
                      q.process_gone(row), job_row(conn, row.pk))


def checkpoint_rows(conn: Connection, run_pk: int) -> list[Row[Any]]:
    """A run's checkpoint rows, oldest first."""
    c = s.checkpoints.c
    return list(conn.execute(select(s.checkpoints).where(c.run_pk == run_pk).order_by(c.seq)))


def log_rows(conn: Connection, run_pk: int, level: str | None = None,
             before_seq: int | None = None, limit: int = 200) -> list[Row[Any]]:
    """A run's log rows newest first, from `level` up (one of LOG_LEVELS), below `before_seq`."""
    c = s.logs.c
    stmt = select(s.logs).where(c.run_pk == run_pk)
    if level:
        stmt = stmt.where(c.level.in_(levels_from(level)))
    if before_seq is not None:
        stmt = stmt.where(c.seq < before_seq)
    return list(conn.execute(stmt.order_by(c.seq.desc()).limit(limit)).all())
