"""A record file replaced under the indexer: shorter than what was read of it, or whose
bytes before where the indexer stopped are no longer those it read (an older copy
restored, a file cut by hand and then written on by a resumed run).

Such a file is read again from its start, its rows of the run forgotten first in the same
transaction, so the index never drops records the folder holds nor keeps ones it no longer
holds. What was read is recognised by its tail: a hash of the TAIL_BYTES bytes before the
offset, kept with the offset (ingest/marks.py tells a replaced file; here is what the index
forgets of it).
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Connection, delete, update

from runwatch.ingest.offsets import restart_offsets
from runwatch.rundir import format as fmt
from runwatch.store import schema as s
from runwatch.store.runs import UNREAD, delete_metrics

# A run's columns its events set (ingest/lifecycle.refresh_run_state).
EVENT_STATE = ("status", "stage", "progress_done", "progress_total", "reason", "reason_code",
               "attempt", "started_at", "ended_at")


def forget_file(conn: Connection, run_pk: int, path: Path) -> None:
    """Forget what the index holds of a run's record file `path` (its rows, what they
    derived, its problems, where the indexer stopped in it), to read it again from its
    start."""
    name = path.name
    runs = update(s.runs).where(s.runs.c.pk == run_pk)
    if name == fmt.METRICS:
        delete_metrics(conn, run_pk)
        for table in (s.findings, s.health_state):
            conn.execute(delete(table).where(table.c.run_pk == run_pk))
        conn.execute(runs.values(observed_step=None))
    elif name == fmt.CHECKPOINTS:
        conn.execute(delete(s.checkpoints).where(s.checkpoints.c.run_pk == run_pk))
        conn.execute(runs.values(saved_step=None))
    elif name in (fmt.EVENTS, fmt.LOGS):
        table = s.events if name == fmt.EVENTS else s.logs
        conn.execute(delete(table).where(table.c.run_pk == run_pk))
        if name == fmt.EVENTS:
            # what the events said goes with them, as a new index of the folder would read
            # it: a file left with no whole record (emptied, an older copy holding a torn
            # line) says nothing, and the run's ended state must not outlive its events
            conn.execute(runs.values({k: UNREAD[k] for k in EVENT_STATE}))
    p = s.ingest_problems.c
    gone = conn.execute(delete(s.ingest_problems).where(
        p.run_pk == run_pk, p.path == str(path))).rowcount
    if gone > 0:
        conn.execute(runs.values(problems=s.runs.c.problems - gone))
    restart_offsets(conn, run_pk, name)
