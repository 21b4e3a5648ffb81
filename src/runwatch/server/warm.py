"""Warming a new server before it listens: its first answer otherwise pays for first calls
(numpy's lazy imports, the routes' first statements, a pooled connection; about 0.15 s)
and for full garbage collections that walk every object the process made to start.

`warm_up` serves one small overlay and the app's page in-process, straight to the
router: the middleware (auth, origins, request timing) does not see them, nothing is
cached from them, and the overlay reads one summarised key at about ten buckets, so it
warms the code, not the data. Then the objects made so far (modules, the app) are frozen
out of the collector's reach (`gc.freeze`), once a process: a full collection during a
request walks only what came after (one walked 0.2-0.6 s of a cold overlay at load 8-10;
none does once frozen).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
from collections.abc import Iterable
from urllib.parse import urlencode

from fastapi import FastAPI
from fastapi.middleware.asyncexitstack import AsyncExitStackMiddleware
from sqlalchemy import Engine, select
from sqlalchemy.exc import SQLAlchemyError
from starlette.types import Message

from runwatch.store import schema as s

WARM_POINTS = 10


def build_routes(routes: Iterable[object]) -> int:
    """Build every included router's routes now, in this thread; returns how many routers
    were built.

    FastAPI (0.16x) builds an included router's routes at the first request that reaches
    it, and each route's build enters `warnings.catch_warnings`, which swaps the process's
    warning filters and handler for a while and puts back what it found: not thread-safe.
    In the server's thread, that lost a warning another thread of the same process raised
    meanwhile (an SDK's, in a test capturing it or a notebook). Built here, before the
    server listens, no request builds anything. A FastAPI that builds its routes when
    they are included has none of these methods: nothing to do."""
    built = 0
    for route in routes:
        for build in ("effective_candidates", "effective_low_priority_routes"):
            children = getattr(route, build, None)
            if callable(children):
                built += 1 + build_routes(children())
    return built


def warm_up(app: FastAPI, engine: Engine) -> int | None:
    """Serve `GET /api/overlay` of one summarised key (any run's) and the app's page
    inside this process, and build the middleware stack. The overlay's status, or None
    when it raised (an error the first real request meets again; a run named "-" where no
    key is summarised yet is one: it still warms the routes and a connection)."""
    import numpy.ma  # noqa: F401  (np.unique's first call imports it)

    k, r = s.metric_keys.c, s.runs.c
    try:
        with engine.connect() as conn:
            found = conn.execute(
                select(r.run_id, k.key).join(s.metric_keys, k.run_pk == r.pk)
                .join(s.metric_summary_state, s.metric_summary_state.c.key_id == k.id)
                .limit(1)).first()
    except SQLAlchemyError:
        found = None  # the index cannot be read now: the requests say so, the warm-up not
    query = urlencode({"run": found.run_id, "key": found.key, "points": WARM_POINTS}
                      if found else {"run": "-"})
    app.middleware_stack = app.build_middleware_stack()
    # its own thread: asyncio.run refuses to start in a thread whose loop is running
    status: list[int] = []
    t = threading.Thread(target=asyncio.run, args=(_warm_gets(app, query, status),),
                         name="runwatch-warm-up")
    t.start()
    t.join()
    if not gc.get_freeze_count():  # once: a second server of a process freezes nothing more
        gc.freeze()
    return status[0] if status else None


async def _warm_gets(app: FastAPI, query: str, status: list[int]) -> None:
    """The overlay, then the app's page (its route and a FileResponse's first call: a fresh
    server's first document took 38-75 ms to its first byte at load 4.5-6, 4-19 ms so warmed)."""
    await _get(app, "/api/overlay", query, status)
    await _get(app, "/runs", "", [])


async def _get(app: FastAPI, path: str, query: str, status: list[int]) -> None:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": query.encode(), "root_path": "", "app": app,
             "headers": [(b"host", b"127.0.0.1")], "client": ("127.0.0.1", 0),
             "server": ("127.0.0.1", 0)}

    asked: list[bool] = []

    async def receive() -> Message:  # the request, then the client gone (as a server says)
        if asked:
            return {"type": "http.disconnect"}
        asked.append(True)
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    # a failure leaves `status` empty: the first real request meets it again
    with contextlib.suppress(Exception):
        # FastAPI's own innermost layer, which its routes need; none of the app's
        await AsyncExitStackMiddleware(app.router)(scope, receive, send)
