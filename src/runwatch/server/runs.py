"""Reading runs for the API: the list with search and cursor, lookup, and JSON views."""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import Connection, Row, func, select

from runwatch.server.errors import ApiError, bad_request
from runwatch.store import queries
from runwatch.store import schema as s

PAGE_SIZE = 100
MAX_PAGE_SIZE = 500
ACTIVE = frozenset({"QUEUED", "PREPARING", "RUNNING"})
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def _duration(row: Row[Any], now: float) -> float | None:
    if row.started_at is None:
        return None
    end = row.ended_at if row.ended_at is not None else now
    return max(0.0, end - row.started_at)


def run_summary(row: Row[Any], now: float | None = None) -> dict[str, Any]:
    """The fields of a run that the list and the streams carry."""
    now = now if now is not None else datetime.now(UTC).timestamp()
    try:
        tags = orjson.loads(row.tags or "[]")
    except orjson.JSONDecodeError:
        tags = []
    return {
        "run_id": row.run_id,
        "name": row.name,
        "project": row.project,
        "group": row.group_name,
        "tags": tags,
        "method": row.method,
        "base_model": row.base_model,
        "dataset": row.dataset,
        "trainer": row.trainer,
        "backend": row.backend,
        "status": row.status,
        "stage": row.stage,
        "reason": row.reason,
        "created_at": iso(row.created_at),
        "started_at": iso(row.started_at),
        "ended_at": iso(row.ended_at),
        "duration_s": _duration(row, now),
        "observed_step": row.observed_step,
        "saved_step": row.saved_step,
    }


def summary_line(row: Row[Any]) -> str:
    """One sentence: "Training <model> with <trainer> on <dataset> (<method>)."."""
    parts = [f"Training {row.base_model or 'a model'}"]
    if row.trainer:
        parts.append(f"with {row.trainer}")
    if row.dataset:
        parts.append(f"on {row.dataset}")
    if row.backend:
        parts.append(f"via {row.backend}")
    text = " ".join(parts)
    if row.method:
        text += f" ({row.method.upper()})"
    return text + "."


def encode_cursor(created_at: float, pk: int) -> str:
    raw = orjson.dumps([created_at, pk])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, pk = orjson.loads(raw)
        if not isinstance(pk, int) or not isinstance(created_at, int | float):
            raise ValueError
        return float(created_at), pk
    except (binascii.Error, ValueError, TypeError, orjson.JSONDecodeError) as exc:
        raise bad_request(
            "the cursor is not one this server gave out; start again without a cursor"
        ) from exc


def list_runs(
    conn: Connection, q: str = "", project: str | None = None, cursor: str | None = None,
    limit: int = PAGE_SIZE,
) -> tuple[list[Row[Any]], str | None]:
    """Runs newest first, filtered by `q` over the search columns; returns (rows, next cursor)."""
    before = decode_cursor(cursor) if cursor else None
    rows = queries.list_runs(conn, search=q.strip() or None, project=project, limit=limit + 1,
                             before=before)
    nxt = None
    if len(rows) > limit:
        rows = rows[:limit]
        nxt = encode_cursor(rows[-1].created_at, rows[-1].pk)
    return rows, nxt


def resolve_run(conn: Connection, ident: str) -> Row[Any]:
    """The run with this id or name (or a unique prefix of one); 404 or 400 otherwise."""
    try:
        return queries.resolve_run(conn, ident)
    except queries.RunNotFound as exc:
        status = 400 if exc.ambiguous else 404
        raise ApiError(status, f"{exc}; list runs with GET /api/runs",
                       candidates=exc.candidates) from exc


def list_projects(conn: Connection) -> list[dict[str, Any]]:
    r = s.runs.c
    rows = conn.execute(
        select(r.project, func.count()).group_by(r.project).order_by(r.project)
    ).all()
    return [{"name": p, "runs": n} for p, n in rows]
