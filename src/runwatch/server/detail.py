"""The run detail for the API: the shared run detail plus the stream cursor."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Connection, Row

from runwatch.analysis.detail import run_detail as shared_detail
from runwatch.jobs.control import queued_waits
from runwatch.server.settle import Gone
from runwatch.server.state import ServerState
from runwatch.server.updates import RunCursor, run_marks
from runwatch.store.detail import read_run
from runwatch.store.keys import KeyInfo
from runwatch.store.points import newest_seq


def stream_cursor(conn: Connection, run_pk: int, keys: list[KeyInfo]) -> str:
    """The high-water marks (metrics.logs.events.checkpoints seq) a stream resumes after."""
    newest = newest_seq(conn, [k.id for k in keys])
    marks = run_marks(conn, run_pk)  # the pollers' one statement for the other tables
    return str(RunCursor(-1 if newest is None else newest, marks.logs, marks.events,
                         marks.checkpoints))


def run_detail(conn: Connection, st: ServerState, row: Row[Any], gone: Gone,
               projects: frozenset[str] | None) -> dict[str, Any]:
    """The run detail (as the CLI shows it), its series read through the server's cache
    and its spend priced by the device profiles of the server's runs folder, and the
    cursor its live stream starts from; `gone`: ServerState.judge's, taken before `row`
    was read; `projects`: the request's scope (None: every project), the only runs its
    `model.parent` is looked for among."""
    rec = read_run(conn, row, gone(row), projects)
    detail = shared_detail(rec, st.cache.values(conn, row.pk), runs_dir=st.runs_dir,
                           waits_for=queued_waits(conn, rec.job, row.status, row.dir,
                                                  time.time()))
    return {"ok": True, **detail, "cursor": stream_cursor(conn, row.pk, rec.keys)}
