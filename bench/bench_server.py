"""Server benchmark: a 1,000,000-point series downsampled to 1,000 points by the HTTP API.

One run with one key of 1,000,000 points is stored in a SQLite index, the real server
(uvicorn) serves it on a loopback port, and an HTTP client asks for the whole series in
1,000 buckets: the first request (cold: the series is read from SQLite into the cache),
then N more (warm). Also timed: a zoomed window that is still downsampled, a window small
enough to come back at full resolution, a small answer (/api/projects) on the kept-open
connection and on a new one each, and the downsampling function alone.

    python bench/bench_server.py                  # 1,000,000 points, 50 requests
    python bench/bench_server.py --points 200000 --requests 20
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from runwatch.analysis.downsample import downsample, shared_edges
from runwatch.ingest import ingest_records
from runwatch.server.runner import Runner, free_port
from runwatch.store.db import open_engine
from runwatch.store.runs import upsert_run
from verdict import add_strict, exit_status

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "build" / "bench" / "server.json"
CHUNK = 100_000


def build_index(db: Path, points: int) -> None:
    engine = open_engine(db)
    manifest = {"schema_version": 1, "run_id": "bench-1m", "name": "bench-1m",
                "created_at": time.time()}
    with engine.begin() as conn:
        pk, _ = upsert_run(conn, manifest, None)
    for start in range(0, points, CHUNK):
        records = [{"seq": i, "step": i, "ts": 0.0, "loss": 2.0 + math.sin(i / 500.0)}
                   for i in range(start, min(points, start + CHUNK))]
        with engine.begin() as conn:
            ingest_records(conn, pk, "metrics.jsonl", records)
    engine.dispose()


def timed(client: httpx.Client, params: dict[str, Any], n: int) -> tuple[list[float], Any]:
    times, body = [], None
    for _ in range(n):
        t = time.perf_counter()
        resp = client.get("/api/series", params=params)
        times.append((time.perf_counter() - t) * 1000)
        resp.raise_for_status()
        body = resp.json()
    return times, body


def summary(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {"median_ms": round(statistics.median(ms), 2),
            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
            "min_ms": round(ordered[0], 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--target", type=float, default=50.0,
                    help="median ms of a full-range request; a miss is printed (exit 1 "
                         "with --strict)")
    add_strict(ap)
    args = ap.parse_args()
    out: dict[str, Any] = {"points": args.points, "buckets": 1000}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "index.db"
        t = time.perf_counter()
        build_index(db, args.points)
        out["build_index_s"] = round(time.perf_counter() - t, 1)
        engine = open_engine(db)
        with Runner(engine, port=free_port()) as server, \
                httpx.Client(base_url=server.url, timeout=60) as client:
            base = {"run": "bench-1m", "key": "loss", "points": 1000}
            cold, body = timed(client, base, 1)
            series = body["series"][0]
            # over a whole series the buckets are a power of two steps wide: between half
            # the budget and the budget of them
            buckets = body["edges"]["buckets"]
            assert series["count"] == args.points and 500 <= buckets <= 1000, series["count"]
            assert 0 < len(series["step"]) <= buckets, len(series["step"])
            out["buckets"] = buckets
            out["cold_first_request_ms"] = round(cold[0], 1)
            warm, _ = timed(client, base, args.requests)
            out["full_range"] = summary(warm)
            lo, hi = args.points // 4, args.points // 4 + args.points // 10
            zoom, body = timed(client, {**base, "lo": lo, "hi": hi}, args.requests)
            assert not body["series"][0]["full"]
            out["zoomed_10pct"] = summary(zoom)
            fine, body = timed(client, {**base, "lo": lo, "hi": lo + 999}, args.requests)
            assert body["series"][0]["full"] and len(body["series"][0]["step"]) == 1000
            out["zoomed_full_resolution"] = summary(fine)
            # a small answer on the kept-open connection, and on a new connection each: the
            # two were 44 and 1 ms while Nagle's algorithm held the kept-open one's answers
            small = []
            for _ in range(args.requests):
                t = time.perf_counter()
                client.get("/api/projects").raise_for_status()
                small.append((time.perf_counter() - t) * 1000)
            out["small_answer_kept_open"] = summary(small)
            fresh = []
            for _ in range(args.requests):
                t = time.perf_counter()
                httpx.get(f"{server.url}/api/projects", timeout=60).raise_for_status()
                fresh.append((time.perf_counter() - t) * 1000)
            out["small_answer_new_connection"] = summary(fresh)
        engine.dispose()
    steps = np.arange(args.points, dtype=np.int64)
    values = np.sin(steps / 500.0)
    edges = shared_edges([(0, args.points - 1)], 1000)
    fn = []
    for _ in range(args.requests):
        t = time.perf_counter()
        downsample(steps, values, edges, 1000)
        fn.append((time.perf_counter() - t) * 1000)
    out["downsample_function"] = summary(fn)
    out["target_median_ms"] = args.target
    out["meets_target"] = out["full_range"]["median_ms"] <= args.target
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))
    print(f"\n{args.points:,}-point series -> 1,000 buckets over HTTP: median "
          f"{out['full_range']['median_ms']} ms (target <= {args.target:g} ms), cold first request "
          f"{out['cold_first_request_ms']} ms; results in {args.out}")
    missed = [] if out["meets_target"] else [
        f"full-range median {out['full_range']['median_ms']} ms > {args.target:g} ms"]
    return exit_status(missed, args.strict)


if __name__ == "__main__":
    sys.exit(main())
