"""Run routes: the list with search and cursor, projects, detail, lifecycle events, actions."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from sqlalchemy import Connection

from runwatch.analysis.timing import iso
from runwatch.analysis.views import actions, run_summary
from runwatch.server.detail import run_detail
from runwatch.server.errors import ApiError
from runwatch.server.runs import (
    MAX_PAGE_SIZE,
    PAGE_SIZE,
    list_projects,
    list_runs,
    resolve_run,
)
from runwatch.server.schemas import RunDetail, RunList, documented
from runwatch.server.state import ServerState, connection, state
from runwatch.store import queries

router = APIRouter(tags=["runs"])


@router.get("/api/runs", **documented(RunList, "a page of runs"))
def runs_list(
    q: str = Query("", max_length=200, description="words matched against name, id, status, "
                   "model, dataset, trainer and backend"),
    project: str | None = Query(None, max_length=128),
    cursor: str | None = Query(None, max_length=200, description="next_cursor of the last page"),
    limit: int = Query(PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE),
    conn: Connection = Depends(connection),
) -> dict[str, Any]:
    """Runs newest first, a page at a time."""
    rows, nxt = list_runs(conn, q, project, cursor, limit)
    return {"ok": True, "runs": [run_summary(r) for r in rows], "next_cursor": nxt}


@router.get("/api/projects")
def projects(conn: Connection = Depends(connection)) -> dict[str, Any]:
    """Every project with its number of runs."""
    return {"ok": True, "projects": list_projects(conn)}


@router.get("/api/runs/{run}", **documented(RunDetail, "the run detail"))
def run_get(
    run: str, conn: Connection = Depends(connection), st: ServerState = Depends(state),
) -> dict[str, Any]:
    """A run's state, results, cost, settings, manifest, tiles, and its stream cursor."""
    return run_detail(conn, st, resolve_run(conn, run))


@router.get("/api/runs/{run}/events")
def run_events(run: str, conn: Connection = Depends(connection)) -> dict[str, Any]:
    """The run's lifecycle events, oldest first."""
    row = resolve_run(conn, run)
    return {"ok": True, "events": [{**e, "ts": iso(e["ts"])}
                                   for e in queries.events(conn, row.pk)]}


def _job_control(conn: Connection, run: str, action: str) -> None:
    row = resolve_run(conn, run)
    allowed = actions(row.status)
    if action == "cancel" and not allowed["cancel"]:
        raise ApiError(409, f"run {row.name} is {row.status}; only a queued, preparing or "
                            "running run can be cancelled")
    if action == "retry" and not allowed["retry"]:
        raise ApiError(409, f"run {row.name} is {row.status}; only a finished run can be retried")
    raise ApiError(501, f"this server cannot {action} runs yet: job control is not built; "
                        f"stop the training process yourself")


@router.post("/api/runs/{run}/cancel")
def run_cancel(run: str, conn: Connection = Depends(connection)) -> dict[str, Any]:
    """Cancel a queued or running run (not available until job control exists: 501)."""
    _job_control(conn, run, "cancel")
    return {"ok": True}


@router.post("/api/runs/{run}/retry")
def run_retry(run: str, conn: Connection = Depends(connection)) -> dict[str, Any]:
    """Retry a finished run (not available until job control exists: 501)."""
    _job_control(conn, run, "retry")
    return {"ok": True}
