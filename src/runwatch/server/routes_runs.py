"""Run routes: the list with search and cursor, projects, detail, lifecycle events, and
the job-control actions cancel and retry (runwatch.jobs.control does them)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from sqlalchemy import Connection, select

from runwatch.analysis.timing import iso
from runwatch.analysis.views import run_summary
from runwatch.jobs import control
from runwatch.jobs.lifecycle import TransitionError
from runwatch.rundir.append import RunBusy
from runwatch.rundir.format import PHASES, phase_named
from runwatch.server import scopes
from runwatch.server.detail import run_detail
from runwatch.server.errors import ApiError, bad_request, not_found, unavailable
from runwatch.server.runs import (
    MAX_PAGE_SIZE,
    PAGE_SIZE,
    list_runs,
)
from runwatch.server.schemas import ActionAnswer, RetryRequest, RunDetail, RunList, documented
from runwatch.server.state import ServerState, connection, state
from runwatch.store import queries, tokens
from runwatch.store import schema as s

router = APIRouter(tags=["runs"])


@router.get("/api/runs", **documented(RunList, "a page of runs"))
def runs_list(
    request: Request,
    q: str = Query("", max_length=200, description="words matched against name, id, status, "
                   "model, dataset, trainer and backend"),
    project: str | None = Query(None, max_length=128),
    status: str | None = Query(None, max_length=32,
                               description=f"only runs in this phase: {', '.join(PHASES)} "
                               "(in any case)"),
    group: str | None = Query(None, max_length=256,
                              description="only the runs of this group (e.g. a sweep's arms)"),
    cursor: str | None = Query(None, max_length=200, description="next_cursor of the last page"),
    limit: int = Query(PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE),
    conn: Connection = Depends(connection),
) -> dict[str, Any]:
    """Runs newest first, a page at a time."""
    if status:
        try:
            status = phase_named(status)
        except ValueError as exc:
            raise bad_request(f"status {exc}") from None
    gone = state(request).judge()  # before the rows are read
    project = scopes.narrow(request, project)
    rows, nxt = list_runs(conn, q, project, cursor, limit, status, group)
    return {"ok": True, "runs": [run_summary(r, gone=gone(r)) for r in rows],
            "next_cursor": nxt}


@router.get("/api/projects")
def projects(request: Request, conn: Connection = Depends(connection)) -> dict[str, Any]:
    """Every project (made with `runwatch projects create`, or named by runs) with its
    number of runs."""
    return {"ok": True, "projects": [{"name": p, "runs": n}
                                     for p, n in tokens.project_names(conn).items()
                                     if scopes.visible(request, p)]}


@router.get("/api/runs/{run}", **documented(RunDetail, "the run detail"))
def run_get(
    request: Request, run: str, conn: Connection = Depends(connection),
    st: ServerState = Depends(state),
) -> dict[str, Any]:
    """A run's state, results, cost, settings, manifest, tiles, and its stream cursor."""
    gone = st.judge()  # before the run is read
    return run_detail(conn, st, scopes.run(request, conn, run), gone,
                      scopes.scope_of(request).projects)


@router.get("/api/runs/{run}/events")
def run_events(request: Request, run: str, conn: Connection = Depends(connection)
               ) -> dict[str, Any]:
    """The run's lifecycle events, oldest first."""
    row = scopes.run(request, conn, run)
    return {"ok": True, "events": [{**e, "ts": iso(e["ts"])}
                                   for e in queries.events(conn, row.pk)]}


def _job_control(request: Request, st: ServerState, run: str, action: str,
                 resume: bool = False) -> dict[str, Any]:
    """Do `action` (cancel or retry, with `resume` a resume) to a run through job control;
    409 with what is possible when its state does not allow it, 404 when it left the index
    meanwhile, 503 while a process still holds its folder."""
    with st.engine.connect() as conn:
        row = scopes.run(request, conn, run, "write")
    try:
        if action == "cancel":
            outcome = control.cancel(st.engine, row, st.runs_dir)
        else:
            outcome = control.retry(st.engine, row, st.runs_dir, wait_s=st.lock_wait_s,
                                    resume=resume)
    except TransitionError as exc:
        raise ApiError(409, f"run {row.name}: {exc}") from None
    except LookupError as exc:  # deleted from the index meanwhile
        raise not_found(str(exc)) from None
    except RunBusy as exc:  # its process still holds the folder; it lets go as it exits
        raise unavailable(f"run {row.name}: {exc}; try again in a moment", 2) from None
    gone = st.judge()
    with st.engine.connect() as conn:
        now = conn.execute(select(s.runs).where(s.runs.c.pk == row.pk)).one()
    return {"ok": True, "status": outcome.phase, "next": outcome.next,
            "run": run_summary(now, gone=gone(now))}


@router.post("/api/runs/{run}/cancel", **documented(ActionAnswer, "the run's new phase"))
def run_cancel(request: Request, run: str, st: ServerState = Depends(state)) -> dict[str, Any]:
    """Cancel a run: a QUEUED job is CANCELLED at once; a PREPARING or RUNNING one is
    CANCEL_REQUESTED and its process is stopped (SIGTERM, then SIGKILL after the grace
    period), after which it is CANCELLED. When its worker is lost, `next` says which live
    worker stops it, or what that waits for."""
    return _job_control(request, st, run, "cancel")


@router.post("/api/runs/{run}/retry", **documented(ActionAnswer, "the run's new phase"))
def run_retry(request: Request, run: str, body: RetryRequest | None = None,
              st: ServerState = Depends(state)) -> dict[str, Any]:
    """Retry an ended job as its next attempt, QUEUED: the earlier attempts stay on record
    (and in its cost); their metrics, samples and checkpoints leave the view. With
    `{"resume": true}` the attempt goes on from the run's last training checkpoint and the
    run keeps its record up to it (409 when it holds none)."""
    return _job_control(request, st, run, "retry", resume=body is not None and body.resume)
