"""Reading runs for the API: the list with search and cursor, and lookup.

The JSON views of a run (summary, detail, log line) are shared with the CLI and live in
`runwatch.analysis`."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson
from sqlalchemy import Connection, Row

from runwatch.server.errors import ApiError, bad_request
from runwatch.store import queries
from runwatch.store.values import INT64_MAX

PAGE_SIZE = 100
MAX_PAGE_SIZE = 500


def encode_cursor(created_at: float, pk: int) -> str:
    raw = orjson.dumps([created_at, pk])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, pk = orjson.loads(raw)
        if (not isinstance(pk, int) or not isinstance(created_at, int | float)
                or not 0 <= pk <= INT64_MAX):
            raise ValueError
        return float(created_at), pk
    except (binascii.Error, ValueError, TypeError, orjson.JSONDecodeError) as exc:
        raise bad_request(
            "the cursor is not one this server gave out; start again without a cursor"
        ) from exc


def list_runs(
    conn: Connection, q: str = "", project: str | None = None, cursor: str | None = None,
    limit: int = PAGE_SIZE, status: str | None = None, group: str | None = None,
) -> tuple[list[Row[Any]], str | None]:
    """Runs newest first, filtered by `q` over the search columns, by phase and by group;
    returns (rows, next cursor)."""
    before = decode_cursor(cursor) if cursor else None
    rows = queries.list_runs(conn, search=q.strip() or None, project=project, status=status,
                             limit=limit + 1, before=before, group=group)
    nxt = None
    if len(rows) > limit:
        rows = rows[:limit]
        nxt = encode_cursor(rows[-1].created_at, rows[-1].pk)
    return rows, nxt


def resolve_run(conn: Connection, ident: str, projects: frozenset[str] | None = None,
                project: str | None = None) -> Row[Any]:
    """The run with this id or name (or a unique prefix of one), among the runs of
    `projects` when given, and of `project` (`?project=`, or `ident` written
    `PROJECT/RUN`); 404 when none, 400 when several, 409 (with `projects`) when it is a
    name runs of several projects bear."""
    try:
        return queries.resolve_run(conn, ident, projects, project)
    except queries.RunNotFound as exc:
        if exc.projects:
            raise ApiError(409, f"{exc}; over HTTP, ?project={exc.projects[0]} says which",
                           candidates=exc.candidates, projects=exc.projects) from exc
        status = 400 if exc.ambiguous else 404
        raise ApiError(status, f"{exc}; list runs with GET /api/runs",
                       candidates=exc.candidates) from exc
