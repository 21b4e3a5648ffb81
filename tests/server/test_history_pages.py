"""The History table's pages (GET /api/runs/{run}/history) of long runs whose keys logged
every step, from a later step on, every other or third step, over a gap, or again after a
re-logged step: each page has the steps, values, total and cursors that the run's own
records give, whether the keys' series are cached (as under `runwatch ui`, whose indexer
warms them), cold (read from a step window) or read from the points."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from runwatch.ingest import Indexer
from runwatch.server.app import create_app
from runwatch.server.routes_metrics import HISTORY_WHOLE
from runwatch.server.series_cache import SeriesCache
from runwatch.store import schema as s
from runwatch.store.keys import run_keys
from tests.support import write_run

from .apiclient import Api

STEPS = 12_000  # more than HISTORY_WHOLE: the long keys are read from a step window cold
KEY_SETS: list[list[str]] = [[], ["grad_norm", "acc"], ["grad_norm", "clip"], ["acc"],
                             ["tokens", "val/loss"], ["lr", "tokens"], ["lr", "grad_norm"]]


def mixed(i: int, step: int) -> dict[str, Any]:
    out: dict[str, Any] = {"seq": i, "ts": 1e9 + i, "step": step,
                           "loss": math.nan if step % 777 == 0 else step / 7.0}
    if step >= 100:
        out["lr"] = 1e-3 * step
    if step % 2 == 0:
        out["grad_norm"] = 1.0 + step % 5
        out["clip"] = math.inf if step % 3 == 0 else 0.5
    if step % 3 == 0:
        out["acc"] = step / STEPS
    if step % 1000 == 0:
        out["val/loss"] = step * 2.0
    if 4000 <= step < 6000 or step >= 8000:
        out["tokens"] = 1000.0 + step
    return out


def redo(i: int, step: int) -> dict[str, Any]:
    out: dict[str, Any] = {"seq": i, "ts": 1e9 + i, "step": step, "loss": i / 3.0}
    if step % 2 == 0:
        out["grad_norm"] = float(i)
    return out


RUNS = {
    "mixed": [mixed(i, step) for i, step in enumerate(range(STEPS))],
    "redo": [redo(i, step) for i, step in enumerate([*range(6000), *range(5000, 7000)])],
}


def kept(records: list[dict[str, Any]]) -> dict[str, dict[int, float]]:
    """Each key's value at each step, a point superseded by a later point of the same or
    an earlier step left out (as the run's own history reads)."""
    by_key: dict[str, tuple[list[int], list[float]]] = {}
    for rec in records:
        for key, value in rec.items():
            if key in ("seq", "ts", "step"):
                continue
            steps, values = by_key.setdefault(key, ([], []))
            cut = bisect_left(steps, rec["step"])
            del steps[cut:], values[cut:]
            steps.append(rec["step"])
            values.append(value)
    return {key: dict(zip(steps, values, strict=True)) for key, (steps, values) in
            by_key.items()}


def all_steps(points: dict[str, dict[int, float]], columns: list[str]) -> list[int]:
    return sorted({step for key in columns for step in points[key]})


def expected(points: dict[str, dict[int, float]], columns: list[str], params: dict[str, Any]
             ) -> dict[str, Any]:
    """The page the records give, as the route pages its steps."""
    steps = all_steps(points, columns)
    total, limit = len(steps), params["limit"]
    if "after" in params:
        start = bisect_right(steps, int(params["after"]))
        end = min(total, start + limit)
    elif "before" in params:
        end = bisect_left(steps, int(params["before"]))
        start = max(0, end - limit)
    elif params.get("order") == "latest":
        start, end = max(0, total - limit), total
    else:
        start, end = 0, min(total, limit)
    page = steps[start:end]
    rows = [{"step": step, "values": {
        key: points[key][step] if math.isfinite(points[key][step]) else None
        for key in columns if step in points[key]}} for step in page]
    return {"ok": True, "columns": columns, "rows": rows, "total": total,
            "next_cursor": str(page[-1]) if end < total and page else None,
            "prev_cursor": str(page[0]) if start > 0 and page else None}


def asks(steps: list[int]) -> list[dict[str, Any]]:
    """Pages at each end, at both sides of each change of cadence, and past the ends."""
    out: list[dict[str, Any]] = [{"limit": 50}, {"limit": 7, "order": "latest"},
                                 {"limit": 1000, "order": "latest"}, {"limit": 1}]
    for at in (-5, 0, 99, 100, 2999, 3999, 4000, 5000, 5999, 6000, 7999, 11998, 11999,
               20_000):
        out += [{"limit": 7, "after": str(at)}, {"limit": 50, "before": str(at)}]
    out += [{"limit": 1000, "after": str(steps[len(steps) // 2])},
            {"limit": 3, "before": str(steps[-1])}]
    return out


def walk(api: Api, run: str, keys: list[str]) -> list[int]:
    """Every step, page by page from the first along `next_cursor`."""
    seen: list[int] = []
    cursor: str | None = None
    while True:
        page = api.ok(f"/api/runs/{run}/history",
                      params={"key": keys, "limit": 1000, **({"after": cursor} if cursor else {})})
        seen += [row["step"] for row in page["rows"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen


@pytest.mark.parametrize("how", ["cached", "cold", "points"])
def test_history_pages_are_the_records_own(engine: Engine, runs_dir: Path, how: str) -> None:
    for name, records in RUNS.items():
        write_run(runs_dir, name, records)
    Indexer(engine, runs_dir).index_once()
    cache = SeriesCache(summaries=how != "points")
    api = Api(create_app(engine, runs_dir=runs_dir, cache=cache))
    for run, records in RUNS.items():
        points = kept(records)
        if how == "cached":
            api.ok(f"/api/runs/{run}/series", params={"key": sorted(points), "lo": 0,
                                                      "hi": 10**9})
            assert cache.held_points >= sum(len(p) for p in points.values())
        for keys in KEY_SETS:
            if not set(keys) <= set(points):
                continue
            for params in asks(all_steps(points, keys or list(points))):
                got = api.ok(f"/api/runs/{run}/history", params={"key": keys, **params})
                assert sorted(got["columns"]) == sorted(keys or points)
                assert got == expected(points, got["columns"], params), (run, keys, params)
            steps = walk(api, run, keys)
            assert steps == all_steps(points, keys or list(points))
    if how == "cold":
        with engine.connect() as conn:
            pk = conn.execute(select(s.runs.c.pk).where(s.runs.c.name == "mixed")).scalar_one()
            long = [k for k in run_keys(conn, pk) if k.points > HISTORY_WHOLE]
        assert len(long) == 5 and not any(cache.holds(pk, k) for k in long), \
            "a long series was read whole: the cold path was not taken"
