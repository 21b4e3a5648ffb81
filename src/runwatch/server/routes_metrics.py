"""Metric routes: a run's keys, downsampled series for one or several runs, the overlay
(several runs' list fields, keys and series in one answer), the history table."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from fastapi import APIRouter, Depends, Query, Request
from sqlalchemy import Connection

from runwatch.analysis.downsample import (
    Downsampled,
    Edges,
    aligned_edges,
    downsample,
    shared_edges,
    width_shift,
    window,
)
from runwatch.analysis.views import run_summary
from runwatch.metrics import describe
from runwatch.metrics.aliases import canonical
from runwatch.metrics.catalogue import Role
from runwatch.metrics.lookup import find_key
from runwatch.server import scopes
from runwatch.server.detail import stream_cursor
from runwatch.server.errors import ApiError, bad_request
from runwatch.server.jsonio import JSONResponse
from runwatch.server.schemas import (
    HistoryPage,
    MetricKeys,
    Overlay,
    RewardTermsPage,
    SeriesResponse,
    documented,
)
from runwatch.server.state import ServerState, connection, state
from runwatch.store.keys import KeyInfo, run_keys
from runwatch.store.reward_terms import step_terms, terms_page
from runwatch.store.series import Series
from runwatch.store.summaries import (
    SUMMARY_MIN_POINTS,
    State,
    UnitsRead,
    distinct_steps,
    ensure_summaries,
    read_units,
    reduce_reads,
    retained_count,
    step_window,
    stored_level,
    summary_states,
)
from runwatch.store.values import parse_int64

router = APIRouter(tags=["metrics"])

DEFAULT_POINTS = 1000
MAX_POINTS = 20_000
MAX_SERIES = 400
HISTORY_PAGE = 50
MAX_HISTORY_PAGE = 1000
MAX_HISTORY_KEYS = 100


@router.get("/api/runs/{run}/metrics/keys", **documented(MetricKeys, "the run's metric keys"))
def metric_keys(request: Request, run: str, conn: Connection = Depends(connection)
                ) -> dict[str, Any]:
    """Every metric key the run logged, with its point count and latest value, and what
    the vocabulary says of it: its canonical name, its role (null when it plays none)
    and its unit (null when unknown or unitless).

    `cursor` is where the run's stream starts so that nothing stored after this answer
    is missed by a client that loads the series next.
    """
    row = scopes.run(request, conn, run)
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


@dataclass
class _Pick:
    """One (run, key) of a series request and where its points come from."""

    run: str
    key: str
    run_pk: int = 0
    info: KeyInfo | None = None
    series: Series | None = None  # the points, from the cache
    span: tuple[int, int] = (0, 0)  # index range of `series` in the window
    state: State | None = None  # read from the step summaries instead
    steps: tuple[int, int] | None = None  # first and last step in the window


def _series_payload(
    request: Request, conn: Connection, st: ServerState, runs: list[str], keys: list[str],
    points: int, lo: float | None, hi: float | None, x_time: bool = False, bands: bool = True,
) -> dict[str, Any]:
    if not runs:
        raise bad_request("name at least one run: ?run=<id or name>")
    rows = [scopes.run(request, conn, ident) for ident in runs[:MAX_SERIES]]
    if not keys:
        raise bad_request("name at least one metric key: ?key=<key>")
    if len(runs) * len(keys) > MAX_SERIES:
        raise bad_request(f"at most {MAX_SERIES} series (runs × keys) per request")
    picked: list[_Pick] = []
    for row in rows:
        by_key = {k.key: k for k in run_keys(conn, row.pk)}
        picked += [_Pick(row.run_id, key, row.pk, by_key.get(key)) for key in keys]
    return _series_answer(conn, st, picked, points, lo, hi, x_time, bands)


def _series_answer(conn: Connection, st: ServerState, picked: list[_Pick], points: int,
                  lo: float | None, hi: float | None, x_time: bool = False,
                  bands: bool = True) -> dict[str, Any]:
    """The series of each pick downsampled to `points` buckets with shared edges: over a
    whole series from the step summaries (every key's in one read), else from the cache."""
    for name, bound in (("lo", lo), ("hi", hi)):
        if bound is not None and bound != bound:
            raise bad_request(f"{name} is NaN: give a step, or leave {name} out for the "
                              "series' own end")
    if lo is not None and hi is not None and lo > hi:
        raise bad_request("lo is above hi: give the step range low to high")
    whole = lo is None and hi is None
    summarised = whole and st.cache.summaries
    long = [p.info.id for p in picked if p.info is not None and p.info.points > points]
    states = summary_states(conn, long) if summarised else {}
    for pick in picked:
        if pick.info is None:
            continue
        if summarised and pick.info.points > points:
            pick.state = states.get(pick.info.id) or _ensure(st, pick.info)
            if pick.state is not None and pick.info.last_step is not None:
                pick.steps = (pick.state.first_step, pick.info.last_step)
                continue
            pick.state = None
        _read_points(conn, st, pick, lo, hi)
    ranges = [p.steps for p in picked if p.steps is not None]
    if whole:
        edges = aligned_edges(ranges, points)
    elif lo is not None and hi is not None:
        edges = Edges(float(lo), float(hi), points)
    else:
        edges = shared_edges(ranges, points)
    shift = width_shift(edges) if whole else None
    reads = {p.info.id: UnitsRead(p.info.id, p.state, level) for p in picked
             if p.state is not None and p.info is not None and shift is not None
             and (level := stored_level(p.state, shift)) is not None}
    units = read_units(conn, list(reads.values()), x_time, bands)
    # a series that fits the budget after all is read from its points (below)
    over = {kid: u for kid, u in units.items() if u.count > points}
    reduced = dict(zip(over, reduce_reads(list(over.values()), edges), strict=True))
    out = []
    for p in picked:
        d: Downsampled | None = None
        if p.state is not None and p.info is not None:
            d = reduced.get(p.info.id)
            if d is None:  # fits the budget after all, or buckets finer than the base
                _read_points(conn, st, p, lo, hi)
        if d is None and p.series is not None and p.steps is not None:
            a, b = p.span
            s = p.series
            d = downsample(s.step[a:b], s.value[a:b], edges, points, s.ts[a:b])
        if d is None:
            item: dict[str, Any] = {"run": p.run, "key": p.key, "full": True, "count": 0,
                                    "first_step": None, "step": [], "value": []}
            if x_time:
                item["time"] = []
            out.append(item)
            continue
        # a bucket is drawn at its last point: where the line starts is said apart
        first = p.steps[0] if p.steps is not None else int(d.step[0]) if d.count else None
        item = {"run": p.run, "key": p.key, "full": d.full, "count": d.count,
                "first_step": first, "step": d.step, "value": d.last}
        if not d.full and bands:
            item["min"] = d.min
            item["max"] = d.max
        if x_time:
            item["time"] = d.ts
        out.append(item)
    return {"ok": True, "edges": edges.as_dict(), "series": out}


def _read_points(conn: Connection, st: ServerState, pick: _Pick, lo: float | None,
                 hi: float | None) -> None:
    """The pick's points from the series cache, and its steps in the window."""
    assert pick.info is not None
    series = st.cache.get(conn, pick.run_pk, pick.info)
    a, b = window(series.step, lo, hi)
    pick.series, pick.span = series, (a, b)
    pick.steps = (int(series.step[a]), int(series.step[b - 1])) if b > a else None


def _ensure(st: ServerState, info: KeyInfo) -> State | None:
    """Summarise a key of an index made before step summaries (once, in its own
    transaction); None when the key is too short to summarise."""
    if info.points < SUMMARY_MIN_POINTS:
        return None
    with st.engine.begin() as wconn:
        return ensure_summaries(wconn, info.id)


@router.get("/api/series", **documented(SeriesResponse, "the series"))
def series(
    request: Request,
    run: list[str] = Query(default=[], description="run id or name; repeat for several runs"),
    key: list[str] = Query(default=[], description="metric key; repeat for several keys"),
    points: int = Query(DEFAULT_POINTS, ge=10, le=MAX_POINTS, description="bucket budget"),
    lo: float | None = Query(None, description="first step of the window"),
    hi: float | None = Query(None, description="last step of the window"),
    x: str = Query("step", pattern="^(step|time)$",
                   description="time: each series also carries `time`, the unix time of "
                               "each point (a bucket: of its last point)"),
    bands: bool = Query(True, description="false: no bucket min and max (a chart of "
                        "several runs draws no bands); less to read and send"),
    conn: Connection = Depends(connection),
    st: ServerState = Depends(state),
) -> JSONResponse:
    """Series of several runs and keys, downsampled to at most `points` buckets with
    shared edges.

    Each bucket carries the min, max and last value; a series with no more points in
    the window than the budget comes back whole (`full: true`). Over the whole series
    (no `lo`, no `hi`) the bucket width is a power of two steps, aligned to it, so the
    index's step summaries answer without reading every point.
    """
    return JSONResponse(_series_payload(request, conn, st, run, key, points, lo, hi,
                                        x == "time", bands))


@router.get("/api/runs/{run}/series", **documented(SeriesResponse, "the series"))
def run_series(
    request: Request,
    run: str,
    key: list[str] = Query(default=[]),
    points: int = Query(DEFAULT_POINTS, ge=10, le=MAX_POINTS),
    lo: float | None = None,
    hi: float | None = None,
    x: str = Query("step", pattern="^(step|time)$"),
    bands: bool = True,
    conn: Connection = Depends(connection),
    st: ServerState = Depends(state),
) -> JSONResponse:
    """The series of one run (the same as /api/series?run=…)."""
    return JSONResponse(_series_payload(request, conn, st, [run], key, points, lo, hi,
                                        x == "time", bands))


# --- the overlay: several runs' list fields, keys and series in one answer ---

def _find_name(keys: list[str], name: str) -> str | None:
    """The key logged under canonical `name` (or an alias of it whose values need no
    transform): the name itself, then the first in sorted order (web/src/chartspecs.ts
    findName)."""
    if name in keys:
        return name
    return next((k for k in sorted(keys) if canonical(k) == (name, None)), None)


def _selected(keys: list[str], roles: list[Role], names: list[str], prefixes: list[str],
              exact: list[str]) -> list[str]:
    """The keys among a run's `keys` that the selectors pick, sorted."""
    found = {find_key(keys, role) for role in roles}
    found |= {_find_name(keys, name) for name in names}
    found |= {k for k in keys if any(k.startswith(p) for p in prefixes) or k in exact}
    return sorted(k for k in found if k is not None)


@router.get("/api/overlay", **documented(Overlay, "the runs, their keys and series"))
def overlay(
    request: Request,
    run: list[str] = Query(default=[], description="run id or name; repeat for several runs"),
    role: list[str] = Query(default=[], description="the key that plays this role (e.g. "
                            "train_loss) in each run; repeat"),
    name: list[str] = Query(default=[], description="the key logged under this canonical "
                            "name in each run; repeat"),
    prefix: list[str] = Query(default=[], description="every key under this prefix; repeat"),
    key: list[str] = Query(default=[], description="this key, where a run logged it; repeat"),
    points: int = Query(DEFAULT_POINTS, ge=10, le=MAX_POINTS, description="bucket budget"),
    x: str = Query("step", pattern="^(step|time)$", description="as for /api/series"),
    bands: bool = Query(True, description="as for /api/series"),
    conn: Connection = Depends(connection),
    st: ServerState = Depends(state),
) -> JSONResponse:
    """Several runs' list fields, metric keys and stream cursors, and the series of the
    keys the selectors pick in each run (whole, with shared edges, as /api/series): what
    a page of several runs' charts needs, in one request instead of a list, a keys and a
    series request.

    A run that cannot be read (not found, ambiguous, out of the token's scope) is left
    out and listed in `missing` with its status and error; the others are answered. When
    none can be read, the first one's error is the answer.
    """
    gone = st.judge()  # before the runs are read
    if not run:
        raise bad_request("name at least one run: ?run=<id or name>")
    unknown = sorted(set(role) - set(Role))
    if unknown:
        raise bad_request(f"no role {', '.join(unknown)}; docs/metrics.md lists the roles")
    runs: list[dict[str, Any]] = []
    missing: list[dict[str, Any]] = []
    refusals: list[ApiError] = []
    picked: list[_Pick] = []
    seen: set[int] = set()
    if len(run) > MAX_SERIES:
        raise bad_request(f"at most {MAX_SERIES} runs in one request, got {len(run)}: ask for "
                          "them in several")
    for ident in run:
        try:
            row = scopes.run(request, conn, ident)
        except ApiError as exc:
            missing.append({"ident": ident, "status": exc.status, "error": exc.message})
            refusals.append(exc)
            continue
        infos = run_keys(conn, row.pk)
        runs.append({"ident": ident, "run": run_summary(row, gone=gone(row)),
                     "cursor": stream_cursor(conn, row.pk, infos),
                     "keys": [_key(k) for k in infos]})
        if row.pk in seen:
            continue
        seen.add(row.pk)
        by_key = {k.key: k for k in infos}
        picked += [_Pick(row.run_id, k, row.pk, by_key[k])
                   for k in _selected(list(by_key), [Role(r) for r in role], name, prefix, key)]
    if not runs:
        raise refusals[0]
    if len(picked) > MAX_SERIES:
        raise bad_request(f"the selectors pick {len(picked)} series; at most {MAX_SERIES} "
                          "per request: ask for fewer keys or runs")
    answer = _series_answer(conn, st, picked, points, None, None, x == "time", bands)
    return JSONResponse({**answer, "runs": runs, "missing": missing})


# A history column of a key with more points than this is read from a step window when
# nothing caches it; a shorter one is read whole.
HISTORY_WHOLE = 5_000


def _window_steps(conn: Connection, st: ServerState, run_pk: int, chosen: list[KeyInfo]
                  ) -> _Steps | None:
    """The chosen keys' steps, read without their values when the cache does not hold
    their series and no long key had a step logged again (its summaries say so); None
    when the series must be read whole.

    A long key with as many points as steps from its first to its last logged every step
    between (its steps are distinct): those are a span, read from nothing. The steps of
    the others are read by the database, counted once, but for a long key whose first and
    last step lie in one span: it has no step outside it."""
    long = [k for k in chosen if k.points > HISTORY_WHOLE]
    if not st.cache.summaries or not long or all(st.cache.holds(run_pk, k) for k in long):
        return None
    states = summary_states(conn, [k.id for k in long])
    spans: list[tuple[int, int]] = []  # first and last step of each key that logged all
    sparse: list[tuple[int, int, int | None]] = []  # (id, first step, last step)
    for k in long:
        state = states.get(k.id)
        if state is None or retained_count(conn, k.id, state) != k.points:
            return None
        if k.last_step is not None and k.last_step - state.first_step + 1 == k.points:
            spans.append((state.first_step, k.last_step))
        else:
            sparse.append((k.id, state.first_step, k.last_step))
    spans = _merged(spans)
    more = [st.cache.get(conn, run_pk, k).step for k in chosen if k.points <= HISTORY_WHOLE]
    outside = [kid for kid, first, last in sparse if last is None
               or not any(lo <= first and last <= hi for lo, hi in spans)]
    if outside:
        more.append(distinct_steps(conn, outside))
    return _Steps.of(spans, more)


def _series_steps(columns: list[tuple[str, Series]]) -> _Steps:
    """The steps of the columns' series: a series that logged every step from its first
    to its last (strictly rising, so as many points as steps between) is its span."""
    spans: list[tuple[int, int]] = []
    sparse: list[npt.NDArray[np.int64]] = []
    for _, s in columns:
        if s.size and int(s.step[-1]) - int(s.step[0]) + 1 == s.size:
            spans.append((int(s.step[0]), int(s.step[-1])))
        elif s.size:
            sparse.append(s.step)
    return _Steps.of(spans, sparse)


@dataclass(frozen=True)
class _Steps:
    """The distinct steps of a History table, kept as spans of consecutive steps and the
    sorted steps in none of them, so that a page, its place and the total are found
    without making every step: a 1,000,000-step key is one span, and a page of it costs
    what a page of a short run does."""

    spans: list[tuple[int, int]]  # (first, last), sorted, apart: none touches the next
    extra: npt.NDArray[np.int64]  # sorted, each once, in no span

    @classmethod
    def of(cls, spans: list[tuple[int, int]], parts: list[npt.NDArray[np.int64]]) -> _Steps:
        """The union of the (first, last) spans and the parts (each sorted, each step once)."""
        merged = _merged(spans)
        return cls(merged, _union([_outside(merged, part) for part in parts]))

    @property
    def total(self) -> int:
        return sum(last - first + 1 for first, last in self.spans) + int(self.extra.size)

    def below(self, step: int) -> int:
        """How many of the steps are below `step`."""
        inside = sum(min(last, step - 1) - first + 1 for first, last in self.spans
                     if first < step)
        return inside + int(np.searchsorted(self.extra, step, side="left"))

    def after(self, step: int | None, limit: int) -> npt.NDArray[np.int64]:
        """The first `limit` steps above `step` (from the first when None)."""
        i = 0 if step is None else int(np.searchsorted(self.extra, step, side="right"))
        parts = [self.extra[i:i + limit]]
        taken = 0
        for first, last in self.spans:
            lo = first if step is None else max(first, step + 1)
            if lo <= last and taken < limit:
                n = min(last - lo + 1, limit - taken)
                parts.append(lo + np.arange(n, dtype=np.int64))
                taken += n
        return np.sort(np.concatenate(parts))[:limit]

    def before(self, step: int | None, limit: int) -> npt.NDArray[np.int64]:
        """The last `limit` steps below `step` (up to the last when None)."""
        j = self.extra.size if step is None else int(np.searchsorted(self.extra, step,
                                                                     side="left"))
        parts = [self.extra[max(0, j - limit):j]]
        taken = 0
        for first, last in reversed(self.spans):
            hi = last if step is None else min(last, step - 1)
            if first <= hi and taken < limit:
                n = min(hi - first + 1, limit - taken)
                parts.append(hi - n + 1 + np.arange(n, dtype=np.int64))
                taken += n
        found = np.sort(np.concatenate(parts))
        return found[max(0, found.size - limit):]


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (first, last) spans sorted, those that overlap or touch made one."""
    merged: list[tuple[int, int]] = []
    for first, last in sorted(spans):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def _outside(spans: list[tuple[int, int]], steps: npt.NDArray[np.int64]
             ) -> npt.NDArray[np.int64]:
    """The sorted `steps` that fall in none of the sorted spans."""
    if not spans or not steps.size:
        return steps
    starts = np.searchsorted(steps, [first for first, _ in spans], side="left")
    ends = np.searchsorted(steps, [last for _, last in spans], side="right")
    keep, at = [], 0
    for start, end in zip(starts, ends, strict=True):
        keep.append(steps[at:start])
        at = int(end)
    keep.append(steps[at:])
    return np.concatenate(keep)


def _union(parts: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    """The steps of the sorted parts, sorted, each once. Keys logged together share their
    steps: a part equal to one before it is left out (a compare, not a sort)."""
    kept: list[npt.NDArray[np.int64]] = []
    for part in parts:
        if part.size and not any(np.array_equal(part, k) for k in kept):
            kept.append(part)
    if len(kept) < 2:
        return kept[0] if kept else np.zeros(0, dtype=np.int64)
    # a stable sort merges the sorted runs (1 ms for a million steps; np.unique: 0.5 s)
    steps = np.sort(np.concatenate(kept), kind="stable")
    return steps[np.concatenate(([True], steps[1:] != steps[:-1]))]


def _page_points(conn: Connection, st: ServerState, run_pk: int, key: KeyInfo,
                 page: npt.NDArray[np.int64], states: dict[int, State]) -> Series:
    """A key's points over the page's steps (a long key's from the window: it has no
    superseded points, so seq order is step order, and its summaries bound the seqs; of
    a page past either end, none)."""
    state = states.get(key.id)
    if not page.size:
        none = np.zeros(0, dtype=np.int64)
        return Series(none, none.astype(np.float64), none.astype(np.float64), 0, -1)
    if key.points <= HISTORY_WHOLE or state is None:
        return st.cache.get(conn, run_pk, key)
    rows = step_window(conn, key.id, state, int(page[0]), int(page[-1]))
    return Series(rows["step"], rows["value"], rows["ts"], rows.size, -1)


def _step_param(value: str | None, refused: str) -> int | None:
    """A step given as a query parameter (none when empty), or 400 saying `refused`."""
    if value is None or value == "":
        return None
    step = parse_int64(value)
    if step is None:
        raise bad_request(refused)
    return step


def _step_cursor(value: str | None, name: str) -> int | None:
    return _step_param(value, f"{name} must be a step number from a previous page")


def _step_bound(value: str | None, name: str) -> int | None:
    return _step_param(value, f"{name} must be a step number (a whole number), got {value!r}")


@router.get("/api/runs/{run}/reward-terms",
            **documented(RewardTermsPage, "a page of steps' reward terms"))
def reward_terms_route(
    request: Request,
    run: str,
    lo: str | None = Query(None, description="first step (inclusive)"),
    hi: str | None = Query(None, description="last step (inclusive)"),
    limit: int = Query(HISTORY_PAGE, ge=1, le=MAX_HISTORY_PAGE),
    conn: Connection = Depends(connection),
) -> JSONResponse:
    """The reward terms of the run's steps in [lo, hi] that kept rollouts, the first
    `limit` of them: per step and split, the mean of each numeric term over the step's
    rollouts (as the history route's `reward_terms`), and `next_lo`, where the next page
    starts (null on the last)."""
    step_lo = _step_bound(lo, "lo")
    step_hi = _step_bound(hi, "hi")
    row = scopes.run(request, conn, run)
    terms, more = terms_page(conn, row.pk, step_lo, step_hi, limit)
    return JSONResponse({"ok": True,
                         "steps": [{"step": step, "reward_terms": by_split}
                                   for step, by_split in terms.items()],
                         "next_lo": more})


_MISSING = object()  # a history cell whose key logged no point at its step


@router.get("/api/runs/{run}/history", **documented(HistoryPage, "a page of steps"))
def history(
    request: Request,
    run: str,
    key: list[str] = Query(default=[], description="columns; all keys when omitted"),
    limit: int = Query(HISTORY_PAGE, ge=1, le=MAX_HISTORY_PAGE),
    after: str | None = Query(None, description="next page: steps after this one"),
    before: str | None = Query(None, description="previous page: steps before this one"),
    order: str = Query("first", pattern="^(first|latest)$"),
    reward_terms: bool = Query(False, description="add each step's reward terms: the mean "
                               "of each over the step's rollouts, per split"),
    conn: Connection = Depends(connection),
    st: ServerState = Depends(state),
) -> JSONResponse:
    """Every step of the run with the value of each key, a page at a time (and with
    `reward_terms`, each step's reward terms: asked for, since they are read from the page's
    rollouts, which cost more than its values)."""
    after_step = _step_cursor(after, "after")
    before_step = _step_cursor(before, "before")
    row = scopes.run(request, conn, run)
    infos = run_keys(conn, row.pk)
    by_key = {k.key: k for k in infos}
    chosen: list[KeyInfo] = [by_key[k] for k in key if k in by_key] if key else infos
    if len(chosen) > MAX_HISTORY_KEYS:
        raise bad_request(f"at most {MAX_HISTORY_KEYS} columns per page; name them with ?key=")
    window = _window_steps(conn, st, row.pk, chosen)
    if window is None:
        columns = [(k.key, st.cache.get(conn, row.pk, k)) for k in chosen]
        steps = _series_steps(columns)
    else:
        steps = window
    total = steps.total
    if after_step is not None:
        page = steps.after(after_step, limit)
    elif before_step is not None:
        page = steps.before(before_step, limit)
    elif order == "latest":
        page = steps.before(None, limit)
    else:
        page = steps.after(None, limit)
    start = steps.below(int(page[0])) if page.size else 0  # the page's place among the steps
    end = start + int(page.size)
    if window is not None:
        states = summary_states(conn, [k.id for k in chosen if k.points > HISTORY_WHOLE])
        columns = [(k.key, _page_points(conn, st, row.pk, k, page, states)) for k in chosen]
    # per column, the value at each step of the page, or MISSING where the key logged none
    # there: a key with no point at a step is left out of that row's values, and a
    # non-finite value is null (the JSON has no NaN), so the two read apart
    values: dict[str, list[Any]] = {}
    for name, s in columns:
        idx = np.searchsorted(s.step, page)
        idx_c = np.minimum(idx, max(s.size - 1, 0))
        hit = (idx < s.size) & (s.step[idx_c] == page) if s.size else np.zeros(page.size, bool)
        vals = np.where(hit, s.value[idx_c] if s.size else np.nan, np.nan)
        values[name] = [_MISSING if not h else None if not math.isfinite(v) else float(v)
                        for h, v in zip(hit, vals, strict=True)]
    rows: list[dict[str, Any]] = [
        {"step": int(step), "values": {name: values[name][i] for name, _ in columns
                                       if values[name][i] is not _MISSING}}
        for i, step in enumerate(page)
    ]
    if reward_terms:
        terms = step_terms(conn, row.pk, only=page.tolist()) if page.size else {}
        for r in rows:
            r["reward_terms"] = terms.get(r["step"], {})
    return JSONResponse({
        "ok": True,
        "columns": [name for name, _ in columns],
        "rows": rows,
        "total": total,
        "next_cursor": str(int(page[-1])) if end < total and page.size else None,
        "prev_cursor": str(int(page[0])) if start > 0 and page.size else None,
    })
