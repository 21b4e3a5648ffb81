"""GET /api/compare: a supervised run's training loss against a baseline's, the report
`runwatch runs compare RUN BASELINE -o json` prints (runwatch.analysis.compare)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from sqlalchemy import Connection

from runwatch.analysis import compare as cmp
from runwatch.server import scopes
from runwatch.server.errors import ApiError, bad_request
from runwatch.server.jsonio import JSONResponse
from runwatch.server.schemas import CompareReport, documented
from runwatch.server.state import ServerState, connection, state
from runwatch.store import plain

router = APIRouter(tags=["metrics"])


def _side(request: Request, conn: Connection, st: ServerState, ident: str) -> cmp.Side:
    """The run `ident` names (within the request's scopes) as `runwatch runs compare`
    reads it: plain SQL over the driver's own connection, its series through the saved
    files the command line reads and saves too (SeriesCache.compared), not the chart
    series cache (whole reads of four 100,000-point series with their wall times through
    SQLAlchemy: 0.9 CPU s of a fresh server's first compare)."""
    row = scopes.run(request, conn, ident)
    db = plain.Reader(conn.connection.driver_connection,
                      "?" if conn.dialect.paramstyle == "qmark" else "%s")
    return cmp.read_side(db, row, st.cache.compared)


@router.get("/api/compare", **documented(CompareReport, "the comparison"))
def compare(
    request: Request,
    run: str = Query(..., max_length=200, description="the run: id or name"),
    baseline: str = Query(..., max_length=200, description="the baseline run: id or name"),
    window: int = Query(cmp.DEFAULT_WINDOW, ge=1, le=1_000_000,
                        description="steps averaged into each window"),
    margin: float = Query(cmp.DEFAULT_MARGIN, ge=0, description="the mean loss difference "
                          "over a window above which the window is reported"),
    spike_factor: float = Query(cmp.DEFAULT_SPIKE_FACTOR, gt=0, description="how many times "
                                "its run's median a gradient norm must be to count as a "
                                "spike"),
    across_plans: bool = Query(False, description="compare runs whose plans differ"),
    conn: Connection = Depends(connection),
    st: ServerState = Depends(state),
) -> JSONResponse:
    """The mean loss difference (run − baseline) over each window of steps, the steps
    where either run's gradient norm spiked, and the first full window whose mean differs
    by more than `margin`.

    Only supervised runs (400 for a reinforcement run, which logs no training loss).
    Runs whose plans differ (data set, seed, base model or its revision, sequences per
    update, another config value) are refused with 409 and `differences`, a list of
    {field, run, baseline}, unless `across_plans=true`."""
    options = cmp.Options(window, margin, spike_factor, across_plans)
    sides = _side(request, conn, st, run), _side(request, conn, st, baseline)
    try:
        report = cmp.compare(*sides, options)
    except cmp.PlansDiffer as exc:
        raise ApiError(409, f"{exc}; across_plans=true compares them anyway",
                       differences=exc.differences) from None
    except cmp.CompareError as exc:
        raise bad_request(str(exc)) from None
    # a response, not a dict: FastAPI would walk a dict's every value (10,000 windows of a
    # 100,000-step run) through its encoder first, ten times slower than the comparison
    return JSONResponse({"ok": True, **report})
