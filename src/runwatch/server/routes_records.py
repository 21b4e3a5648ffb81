"""Record routes of a run: samples (rollouts), checkpoints, logs and health findings."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from sqlalchemy import Connection

from runwatch.analysis.views import checkpoint_entry, log_entry
from runwatch.health.store import health_for_run
from runwatch.rundir.format import LOG_LEVELS
from runwatch.server import scopes
from runwatch.server.errors import bad_request, not_found
from runwatch.server.schemas import (
    CheckpointList,
    HealthResponse,
    LogPage,
    SamplesResponse,
    documented,
)
from runwatch.server.state import connection
from runwatch.store.detail import checkpoint_rows, log_rows
from runwatch.store.rollouts import NoRollouts, rollouts
from runwatch.store.values import parse_int64

router = APIRouter(tags=["records"])

MAX_SAMPLES = 500


@router.get("/api/runs/{run}/samples", **documented(SamplesResponse, "one step's rollouts"))
def samples(
    request: Request,
    run: str,
    step: int | None = Query(None, ge=0, description="the step; the latest kept when omitted"),
    split: str | None = Query(None, pattern="^(train|val)$"),
    best: int | None = Query(None, ge=1, le=MAX_SAMPLES, description="highest N by reward"),
    worst: int | None = Query(None, ge=1, le=MAX_SAMPLES, description="lowest N by reward"),
    limit: int = Query(100, ge=1, le=MAX_SAMPLES, description="first N in scoring order"),
    offset: int = Query(0, ge=0, le=2**31 - 1, description="skip this many first (paging "
                        "through a step's rollouts, in the order asked for)"),
    conn: Connection = Depends(connection),
) -> dict[str, Any]:
    """One step's rollouts (prompt, completion, reward and its terms), sorted or in order."""
    if best is not None and worst is not None:
        raise bad_request("ask for best or worst, not both")
    row = scopes.run(request, conn, run)
    try:
        found = rollouts(conn, row.pk, step, split, best, worst, limit, offset)
    except NoRollouts as exc:
        raise not_found(f"{exc} (run {row.name}); the response of /samples without a "
                        "step lists the steps kept") from exc
    return {"ok": True, **found}


@router.get("/api/runs/{run}/checkpoints", **documented(CheckpointList, "the run's checkpoints"))
def checkpoints(request: Request, run: str, conn: Connection = Depends(connection)
                ) -> dict[str, Any]:
    """The run's training and inference checkpoints, oldest first."""
    row = scopes.run(request, conn, run)
    return {"ok": True, "checkpoints": [checkpoint_entry(c)
                                        for c in checkpoint_rows(conn, row.pk)]}


@router.get("/api/runs/{run}/logs", **documented(LogPage, "a page of log entries"))
def logs(
    request: Request,
    run: str,
    level: str = Query("", description="minimum level: debug, info, warning, error, critical"),
    cursor: str | None = Query(None, max_length=40, description="next_cursor of the last page"),
    limit: int = Query(200, ge=1, le=2000),
    conn: Connection = Depends(connection),
) -> dict[str, Any]:
    """Log entries newest first, a page at a time, optionally from a minimum level up."""
    lv = level.strip().lower()
    if lv and lv not in LOG_LEVELS:
        raise bad_request(f"level {level!r} is not one of {', '.join(LOG_LEVELS)}")
    before = None
    if cursor:
        before = parse_int64(cursor)
        if before is None:
            raise bad_request("the cursor is not one this server gave out")
    row = scopes.run(request, conn, run)
    rows = log_rows(conn, row.pk, lv or None, before, limit + 1)
    nxt = str(rows[limit - 1].seq) if len(rows) > limit else None
    return {"ok": True, "logs": [log_entry(r) for r in rows[:limit]], "next_cursor": nxt}


def findings_payload(conn: Connection, run_pk: int, resolved: bool = False) -> dict[str, Any]:
    """Open findings of a run (from the health engine), each in the one finding shape
    (`runwatch.health.store.finding_json`), and how many have resolved; with `resolved`,
    the resolved findings are in the list too."""
    found = health_for_run(conn, run_pk)
    return {"ok": True, "available": True,
            "findings": [item for item in found if resolved or item["status"] == "open"],
            "resolved": sum(1 for item in found if item["status"] == "resolved")}


@router.get("/api/runs/{run}/health", **documented(HealthResponse, "the run's findings"))
def health(request: Request, run: str, conn: Connection = Depends(connection),
           resolved: bool = Query(False, description="also list the findings that have "
                                  "resolved (the CLI's `runs health` shows them)")
           ) -> dict[str, Any]:
    """The run's open health findings and how many have resolved (`available` is always
    true); with `resolved=true` the resolved ones are listed too."""
    row = scopes.run(request, conn, run)
    return findings_payload(conn, row.pk, resolved)
