"""Runs rows without SQLAlchemy: the run list over plain SQL (a store/plain Reader, for
`runwatch runs list`, which must start fast), whether a run's process lives on this host,
and a stored JSON column's value.

store/queries.list_runs stays the record of what the list means (the API's pages read it);
a test checks that both list the same rows, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import socket
from collections import namedtuple
from typing import Any

import orjson

from runwatch.rundir import format as fmt
from runwatch.store.plain import Reader

# The columns of the runs table that analysis/views.run_summary reads, and the pk.
SUMMARY_COLUMNS = ("pk", "run_id", "name", "project", "group_name", "tags", "method",
                   "base_model", "dataset", "trainer", "backend", "created_at", "started_at",
                   "ended_at", "updated_at", "status", "stage", "reason", "reason_code",
                   "attempt", "observed_step", "saved_step", "manifest")
SEARCH_COLUMNS = ("name", "run_id", "status", "base_model", "dataset", "trainer", "backend")
SummaryRow = namedtuple("SummaryRow", SUMMARY_COLUMNS)  # type: ignore[misc]


def escape_like(text: str) -> str:
    """`text` matched literally by LIKE … ESCAPE '\\'."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def list_runs(db: Reader, search: str | None = None, project: str | None = None,
              status: str | None = None, limit: int = 100) -> list[Any]:
    """Runs newest first, as store/queries.list_runs lists them (without its pages and
    groups); each row carries SUMMARY_COLUMNS as attributes."""
    where: list[str] = []
    params: list[Any] = []
    if search:
        pattern = "%" + escape_like(search.lower()) + "%"
        if db.mark == "?":
            # SQLite's LIKE ignores ASCII case, as its lower() folds only ASCII
            where.append("(" + " OR ".join(f"{c} LIKE ? ESCAPE '\\'"
                                           for c in SEARCH_COLUMNS) + ")")
            params += [pattern] * len(SEARCH_COLUMNS)
        else:
            where.append(f"lower(concat_ws(chr(31), {', '.join(SEARCH_COLUMNS)})) "
                         "LIKE ? ESCAPE '\\'")
            params.append(pattern)
    for column, value in (("project", project), ("status", status and status.upper())):
        if value:
            where.append(f"{column} = ?")
            params.append(value)
    sql = (f"SELECT {', '.join(SUMMARY_COLUMNS)} FROM runs"
           + (" WHERE " + " AND ".join(where) if where else "")
           + " ORDER BY created_at DESC, pk DESC LIMIT ?")
    return [SummaryRow(*row) for row in db.rows(sql, *params, int(limit))]


def json_or_text(text: str | None) -> Any:
    """A stored JSON column's value; text that is not JSON comes back as it is."""
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _no_process(run: Any) -> bool:
    """Whether the run has no process of its own to judge: it ended, or it is a job's
    next attempt waiting in the queue (a retry or requeue keeps the manifest, which names
    the earlier attempt's process). A run started by hand may be QUEUED in its own
    process (the SDK's start phase), which does count."""
    return run.status in fmt.TERMINAL_PHASES or (run.status == "QUEUED"
                                                 and (run.attempt or 1) > 1)


def process_gone(run: Any) -> bool:
    """True when a run that is not finished, and not a job's attempt waiting in the queue,
    was written by a process on this host that died."""
    return not _no_process(run) and _local_process(run) is False


def process_here(run: Any) -> bool:
    """True when a run that is not finished, and not a job's attempt waiting in the queue,
    was written by a process on this host that is still alive (one this host can
    signal)."""
    return not _no_process(run) and _local_process(run) is True


def _local_process(run: Any) -> bool | None:
    """Whether the process the run's manifest names is alive, when it names one on this
    host; None when it names none, or one elsewhere, or one this user cannot see, or one
    of an earlier attempt of a job (the SDK names the attempt it attached to)."""
    try:
        manifest = orjson.loads(run.manifest)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(manifest, dict):
        return None
    pid, host = manifest.get("pid"), manifest.get("host")
    if type(pid) is not int or pid <= 0 or host != socket.gethostname():
        return None
    attempt = run.attempt or 1
    if attempt > 1 and manifest.get("attempt") != attempt:
        # a job's next attempt whose process has not attached yet (or never will: a plain
        # command): the manifest still names an earlier attempt's process
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return None
    return True
