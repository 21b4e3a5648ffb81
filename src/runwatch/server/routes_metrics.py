"""Metric routes: a run's keys, downsampled series for one or several runs, the history table."""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi import APIRouter, Depends, Query
from sqlalchemy import Connection

from runwatch.analysis.downsample import downsample, shared_edges, window
from runwatch.metrics import describe
from runwatch.server.detail import stream_cursor
from runwatch.server.errors import bad_request
from runwatch.server.jsonio import JSONResponse
from runwatch.server.runs import resolve_run
from runwatch.server.schemas import HistoryPage, MetricKeys, SeriesResponse, documented
from runwatch.server.state import ServerState, connection, state
from runwatch.store.keys import KeyInfo, run_keys
from runwatch.store.series import Series

router = APIRouter(tags=["metrics"])

DEFAULT_POINTS = 1000
MAX_POINTS = 20_000
MAX_SERIES = 400
HISTORY_PAGE = 50
MAX_HISTORY_PAGE = 1000
MAX_HISTORY_KEYS = 100


@router.get("/api/runs/{run}/metrics/keys", **documented(MetricKeys, "the run's metric keys"))
def metric_keys(run: str, conn: Connection = Depends(connection)) -> dict[str, Any]:
    """Every metric key the run logged, with its point count and latest value, and what
    the vocabulary says of it: its canonical name, its role (null when it plays none)
    and its unit (null when unknown or unitless).

    `cursor` is where the run's stream starts so that nothing stored after this answer
    is missed by a client that loads the series next.
    """
    row = resolve_run(conn, run)
    keys = run_keys(conn, row.pk)
    return {
        "ok": True,
        "cursor": stream_cursor(conn, row.pk, keys),
        "keys": [_key(k) for k in keys],
    }


def _key(info: KeyInfo) -> dict[str, Any]:
    meaning = describe(info.key)
    return {"key": info.key, "count": info.points, "last_step": info.last_step,
            "last_value": info.last_value, "canonical": meaning.canonical,
            "role": meaning.role,
            "unit": (meaning.metric.unit or None) if meaning.metric else None}


def _series_payload(
    conn: Connection, st: ServerState, runs: list[str], keys: list[str], points: int,
    lo: float | None, hi: float | None,
) -> dict[str, Any]:
    if not runs:
        raise bad_request("name at least one run: ?run=<id or name>")
    rows = [resolve_run(conn, ident) for ident in runs[:MAX_SERIES]]
    if not keys:
        raise bad_request("name at least one metric key: ?key=<key>")
    if len(runs) * len(keys) > MAX_SERIES:
        raise bad_request(f"at most {MAX_SERIES} series (runs × keys) per request")
    if lo is not None and hi is not None and lo > hi:
        raise bad_request("lo is above hi: give the step range low to high")
    picked: list[tuple[str, str, Series | None, tuple[int, int]]] = []
    for row in rows:
        by_key = {k.key: k for k in run_keys(conn, row.pk)}
        for key in keys:
            info = by_key.get(key)
            if info is None:
                picked.append((row.run_id, key, None, (0, 0)))
                continue
            series = st.cache.get(conn, row.pk, info)
            picked.append((row.run_id, key, series, window(series.step, lo, hi)))
    ranges = [
        (int(s.step[a]), int(s.step[b - 1]))
        for _, _, s, (a, b) in picked
        if s is not None and b > a
    ]
    edges = shared_edges(ranges, points)
    if lo is not None and hi is not None:
        edges = type(edges)(float(lo), float(hi), points)
    out = []
    for run_id, key, found, (a, b) in picked:
        if found is None or b <= a:
            out.append({"run": run_id, "key": key, "full": True, "count": 0,
                        "step": [], "value": []})
            continue
        d = downsample(found.step[a:b], found.value[a:b], edges, points)
        item: dict[str, Any] = {"run": run_id, "key": key, "full": d.full, "count": d.count,
                                "step": d.step, "value": d.last}
        if not d.full:
            item["min"] = d.min
            item["max"] = d.max
        out.append(item)
    return {"ok": True, "edges": edges.as_dict(), "series": out}


@router.get("/api/series", **documented(SeriesResponse, "the series"))
def series(
    run: list[str] = Query(default=[], description="run id or name; repeat for several runs"),
    key: list[str] = Query(default=[], description="metric key; repeat for several keys"),
    points: int = Query(DEFAULT_POINTS, ge=10, le=MAX_POINTS, description="bucket budget"),
    lo: float | None = Query(None, description="first step of the window"),
    hi: float | None = Query(None, description="last step of the window"),
    conn: Connection = Depends(connection),
    st: ServerState = Depends(state),
) -> JSONResponse:
    """Series of several runs and keys, downsampled to `points` buckets with shared edges.

    Each bucket carries the min, max and last value; a series with no more points in
    the window than the budget comes back whole (`full: true`).
    """
    return JSONResponse(_series_payload(conn, st, run, key, points, lo, hi))


@router.get("/api/runs/{run}/series", **documented(SeriesResponse, "the series"))
def run_series(
    run: str,
    key: list[str] = Query(default=[]),
    points: int = Query(DEFAULT_POINTS, ge=10, le=MAX_POINTS),
    lo: float | None = None,
    hi: float | None = None,
    conn: Connection = Depends(connection),
    st: ServerState = Depends(state),
) -> JSONResponse:
    """The series of one run (the same as /api/series?run=…)."""
    return JSONResponse(_series_payload(conn, st, [run], key, points, lo, hi))


def _step_cursor(value: str | None, name: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise bad_request(f"{name} must be a step number from a previous page") from None


@router.get("/api/runs/{run}/history", **documented(HistoryPage, "a page of steps"))
def history(
    run: str,
    key: list[str] = Query(default=[], description="columns; all keys when omitted"),
    limit: int = Query(HISTORY_PAGE, ge=1, le=MAX_HISTORY_PAGE),
    after: str | None = Query(None, description="next page: steps after this one"),
    before: str | None = Query(None, description="previous page: steps before this one"),
    order: str = Query("first", pattern="^(first|latest)$"),
    conn: Connection = Depends(connection),
    st: ServerState = Depends(state),
) -> JSONResponse:
    """Every step of the run with the value of each key, a page at a time."""
    after_step = _step_cursor(after, "after")
    before_step = _step_cursor(before, "before")
    row = resolve_run(conn, run)
    infos = run_keys(conn, row.pk)
    by_key = {k.key: k for k in infos}
    chosen: list[KeyInfo] = [by_key[k] for k in key if k in by_key] if key else infos
    if len(chosen) > MAX_HISTORY_KEYS:
        raise bad_request(f"at most {MAX_HISTORY_KEYS} columns per page; name them with ?key=")
    columns = [(k.key, st.cache.get(conn, row.pk, k)) for k in chosen]
    steps = (np.unique(np.concatenate([s.step for _, s in columns])) if columns
             else np.zeros(0, dtype=np.int64))
    total = int(steps.size)
    if after_step is not None:
        start = int(np.searchsorted(steps, after_step, side="right"))
        end = min(total, start + limit)
    elif before_step is not None:
        end = int(np.searchsorted(steps, before_step, side="left"))
        start = max(0, end - limit)
    elif order == "latest":
        end, start = total, max(0, total - limit)
    else:
        start, end = 0, min(total, limit)
    page = steps[start:end]
    values: dict[str, list[float | None]] = {}
    for name, s in columns:
        idx = np.searchsorted(s.step, page)
        idx_c = np.minimum(idx, max(s.size - 1, 0))
        hit = (idx < s.size) & (s.step[idx_c] == page) if s.size else np.zeros(page.size, bool)
        vals = np.where(hit, s.value[idx_c] if s.size else np.nan, np.nan)
        values[name] = [None if not h or v != v else float(v)
                        for h, v in zip(hit, vals, strict=True)]
    rows = [
        {"step": int(step), "values": {name: values[name][i] for name, _ in columns}}
        for i, step in enumerate(page)
    ]
    return JSONResponse({
        "ok": True,
        "columns": [name for name, _ in columns],
        "rows": rows,
        "total": total,
        "next_cursor": str(int(page[-1])) if end < total and page.size else None,
        "prev_cursor": str(int(page[0])) if start > 0 and page.size else None,
    })
