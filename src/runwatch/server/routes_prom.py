"""`GET /metrics`: the server's own state in Prometheus' text format, under `runwatch_`.

What the index holds (runs by phase, open findings by severity, queue depth, points
stored) is read at each scrape; what only this process sees (points it indexed, how late
they were, request latency) is kept by a `ServerMetrics` that the indexer calls as a
points hook and a middleware feeds. The format is written by hand: it is a few lines of
text (https://prometheus.io/docs/instrumenting/exposition_formats/), not worth a dependency.
"""

from __future__ import annotations

import math
import threading
import time
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import Response
from sqlalchemy import Connection, func, select
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runwatch.health.rules.base import SEVERITIES
from runwatch.health.store import open_by_severity
from runwatch.rundir.format import PHASES
from runwatch.server import scopes
from runwatch.server.state import connection
from runwatch.store import schema as s
from runwatch.store.jobs import queue_depth
from runwatch.store.points import PointColumns

PREFIX = "runwatch_"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Bucket bounds in seconds: requests take milliseconds; a record reaches the index within
# a pass (0.2 s) when the trainer writes as it goes, minutes or more when a folder is
# imported or a writer buffers.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
LAG_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)
# the route label of a request no route matched (a 404), so one label per template
UNMATCHED = "unmatched"

router = APIRouter(tags=["server"])


class Histogram:
    """A Prometheus histogram per label set: cumulative bucket counts, sum and count."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = tuple(buckets)
        self.series: dict[tuple[tuple[str, str], ...], tuple[list[int], list[float]]] = {}

    def observe(self, value: float, labels: tuple[tuple[str, str], ...] = ()) -> None:
        counts, total = self.series.setdefault(labels, ([0] * (len(self.buckets) + 1), [0.0]))
        counts[bisect_left(self.buckets, value)] += 1
        total[0] += value

    def lines(self, name: str) -> Iterable[str]:
        for labels, (counts, total) in sorted(self.series.items()):
            running = 0
            for bound, count in zip((*self.buckets, math.inf), counts, strict=True):
                running += count
                le = "+Inf" if bound == math.inf else repr(bound)
                yield f"{name}_bucket{_labels((*labels, ('le', le)))} {running}"
            yield f"{name}_sum{_labels(labels)} {_num(total[0])}"
            yield f"{name}_count{_labels(labels)} {running}"


class ServerMetrics:
    """What this server process saw: points it indexed and their lag, request latency.

    `on_points` is an indexer points hook (runwatch.ingest.indexer.PointsHook); the
    indexer's thread, the event loop and the scrape's worker thread share it, so every
    read and write holds `lock`.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.points_ingested = 0
        self.lag = Histogram(LAG_BUCKETS)
        self.latency = Histogram(LATENCY_BUCKETS)
        # whether this server's indexer could write the index at its last pass (None: it
        # has no indexer, as a team server that only takes runs over HTTP)
        self.index_writable: bool | None = None
        # requests taken and not yet answering (a live stream counts until its first
        # byte): background work that can wait, such as the start-up warming, waits on it
        self.answering = 0

    def on_points(self, conn: Connection, run_pk: int,
                  points: Mapping[str, PointColumns]) -> None:
        """Count new points, and each new record's lag: its indexing time less its `ts`."""
        now = time.time()
        record_ts: dict[int, float] = {}
        count = 0
        for cols in points.values():
            record_ts.update(zip(cols.seqs, cols.ts, strict=True))
            count += len(cols.seqs)
        with self.lock:
            self.points_ingested += count
            for ts in record_ts.values():
                if ts > 0:  # 0 is a record without a usable wall time
                    self.lag.observe(max(now - ts, 0.0))

    def observe_request(self, route: str, method: str, seconds: float) -> None:
        with self.lock:
            self.latency.observe(seconds, (("method", method), ("route", route)))

    def lines(self) -> list[str]:
        with self.lock:
            writable = [] if self.index_writable is None else [
                *_head("index_writable", "gauge",
                       "1 while this server's indexer writes the index; 0 while its passes "
                       "cannot (a full disk, a damaged file): the runs shown stop there."),
                f"{PREFIX}index_writable {int(self.index_writable)}",
            ]
            return [
                *writable,
                *_head("points_ingested_total", "counter",
                       "Metric points this server's indexer stored since it started."),
                f"{PREFIX}points_ingested_total {self.points_ingested}",
                *_head("ingest_lag_seconds", "histogram",
                       "Seconds from a metrics record's timestamp to its indexing."),
                *self.lag.lines(f"{PREFIX}ingest_lag_seconds"),
                *_head("http_request_duration_seconds", "histogram",
                       "Seconds to answer a request, by route template and method."),
                *self.latency.lines(f"{PREFIX}http_request_duration_seconds"),
            ]


class RequestTimer:
    """ASGI middleware timing each HTTP request into `ServerMetrics`, by route template.

    The router records the matched route in the scope, so the template (such as
    `/api/runs/{run_id}`) is read after the app has answered.
    """

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        waiting = True
        with self.metrics.lock:
            self.metrics.answering += 1

        def answered() -> None:
            nonlocal waiting
            if waiting:
                waiting = False
                with self.metrics.lock:
                    self.metrics.answering -= 1

        async def timed_send(message: Message) -> None:
            # A live stream never finishes: its latency is the time to its first byte.
            if message["type"] == "http.response.start":
                answered()
                route = scope.get("route")
                template = getattr(route, "path", None) or UNMATCHED
                self.metrics.observe_request(template, scope["method"],
                                             time.perf_counter() - start)
            await send(message)

        try:
            await self.app(scope, receive, timed_send)
        finally:
            answered()  # it failed, or its client left, before any answer


def install(app: FastAPI, metrics: ServerMetrics) -> None:
    """Serve /metrics on `app` and time its requests into `metrics`."""
    app.state.runwatch_metrics = metrics
    app.include_router(router)
    app.add_middleware(RequestTimer, metrics=metrics)


@router.get("/metrics", include_in_schema=False)
def prometheus_metrics(request: Request, conn: Connection = Depends(connection)) -> Response:
    """The server's state in Prometheus' text exposition format (version 0.0.4)."""
    scopes.require(request, None, "read")  # it names every project's runs
    lines = index_lines(conn)
    metrics: ServerMetrics | None = getattr(request.app.state, "runwatch_metrics", None)
    if metrics is not None:
        lines += metrics.lines()
    return Response("\n".join(lines) + "\n", media_type=CONTENT_TYPE)


def index_lines(conn: Connection) -> list[str]:
    """The series read from the index: runs by phase, open findings, queue, points."""
    r = s.runs.c
    phases: dict[str, int] = {
        status: n for status, n in conn.execute(
            select(r.status, func.count()).group_by(r.status))}
    # as the API and CLI list them: findings of one incident count once
    open_by = open_by_severity(conn)
    stored = conn.execute(select(func.coalesce(func.sum(s.metric_keys.c.points), 0))).scalar()
    out = [*_head("runs", "gauge", "Runs in the index, by phase.")]
    out += [f"{PREFIX}runs{_labels((('phase', p),))} {phases.get(p, 0)}"
            for p in (*PHASES, *sorted(set(phases) - set(PHASES)))]
    out += _head("health_findings_open", "gauge",
                 "Open health findings, by severity, as listed (one per incident).")
    out += [f"{PREFIX}health_findings_open{_labels((('severity', sev),))} {open_by.get(sev, 0)}"
            for sev in SEVERITIES]
    out += _head("queue_depth", "gauge", "Jobs waiting for a worker.")
    out.append(f"{PREFIX}queue_depth {queue_depth(conn)}")
    out += _head("points_stored", "gauge", "Metric points the index holds.")
    out.append(f"{PREFIX}points_stored {int(stored or 0)}")
    return out


def _head(name: str, kind: str, help_text: str) -> list[str]:
    return [f"# HELP {PREFIX}{name} {help_text}", f"# TYPE {PREFIX}{name} {kind}"]


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
    return f"{{{body}}}" if body else ""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(value: Any) -> str:
    return repr(float(value))
