"""Server-sent event streams: one per run (points, logs, phase changes, checkpoints,
health) and one for the run list. Each event id is a cursor; a client that reconnects
with Last-Event-ID resumes after it, so nothing is lost across a dropped connection.

A stream holds no database connection: it is fed by its run's (or the list's) poller,
see `runwatch.server.pollers`. A stream opened with an API token looks at that token again
every REVOCATION_CHECK_S: once it is revoked (by the API, the web app or `runwatch tokens
revoke` in another process) the stream says so in a `revoked` event and ends; reconnecting
is refused as any request with that token is. A stream opened through a share link does the
same once the link is revoked (`runwatch runs share --revoke`) or expires, and one opened
with a project's token once its run is no longer that project's (a folder took it over).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import TypeVar

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from sqlalchemy import select

from runwatch.server import auth, scopes, share
from runwatch.server.detail import stream_cursor
from runwatch.server.pollers import hub
from runwatch.server.state import ServerState, state
from runwatch.server.updates import RunCursor, Update
from runwatch.store import schema as s
from runwatch.store import tokens
from runwatch.store.keys import run_keys

router = APIRouter(tags=["live"])
T = TypeVar("T")

HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
KEEP_ALIVE = b": keep-alive\n\n"
# How often a stream opened with an API token checks that the token is still live.
REVOCATION_CHECK_S = 5.0
REVOKED = (b'{"error": "the token this stream was opened with was revoked; ask an admin of '
           b'your project for a new one (runwatch tokens create)"}')


def frame(event: str, body: bytes, event_id: str | None = None) -> bytes:
    """One event; `body` is its data, already JSON."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: ".encode() + body + b"\n\n"


def _still_let_in(request: Request, st: ServerState) -> Callable[[], bytes | None] | None:
    """What tells whether the credential a stream was opened with still lets it in: a
    blocking call giving None while it does, else the `revoked` event's body. None where
    nothing can end it (the server's own token, a server without a token)."""
    granted = scopes.scope_of(request)
    if granted.who == share.WHO:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in request.scope["headers"]}
        credential = auth._cookie(headers, share.COOKIE)
        runs_dir = getattr(st, "runs_dir", None)
        if credential is None:
            return None

        def link_check() -> bytes | None:
            try:
                share.check(runs_dir, credential)
            except share.ShareError as exc:
                return json.dumps({"error": f"{exc}; the stream has ended"}).encode()
            return None
        return link_check
    if granted.projects is None:
        return None
    given, _ = auth._presented(request.scope)
    if given is None or not tokens.looks_like_token(given):
        return None
    secret = given

    def token_check() -> bytes | None:
        with st.engine.begin() as conn:
            return None if tokens.authenticate(conn, secret) is not None else REVOKED
    return token_check


async def _events(request: Request, st: ServerState, updates: AsyncGenerator[T | None],
                  render: Callable[[T], bytes],
                  run_check: Callable[[], bytes | None] | None = None
                  ) -> AsyncIterator[bytes]:
    """The stream's bytes: each update rendered as a frame, a keep-alive comment after
    `heartbeat` seconds without one; ends when the client leaves, the server stops or the
    stream's API token or share link is revoked (or the link expires), or `run_check`
    says the run left what the stream may read."""
    yield b"retry: 1000\n\n"
    let_in = _still_let_in(request, st)
    still = let_in if run_check is None else (
        run_check if let_in is None else lambda: let_in() or run_check())
    last = checked = time.monotonic()
    async with aclosing(updates):
        async for got in updates:
            if still is not None and time.monotonic() - checked >= REVOCATION_CHECK_S:
                checked = time.monotonic()
                refused = await hub(st).read(still)
                if refused is not None:
                    yield frame("revoked", refused)
                    return
            if got is not None:
                last = time.monotonic()
                yield render(got)
            elif await request.is_disconnected():
                return
            elif time.monotonic() - last > st.heartbeat:
                last = time.monotonic()
                yield KEEP_ALIVE


@router.get("/api/runs/{run}/stream")
async def run_stream(
    run: str,
    request: Request,
    cursor: str | None = Query(None, description="resume after this cursor (or Last-Event-ID)"),
    st: ServerState = Depends(state),
) -> StreamingResponse:
    """Live updates of one run as server-sent events: points, log, checkpoint, phase, health."""
    resume = request.headers.get("last-event-id") or cursor

    def start() -> tuple[int, RunCursor]:
        with st.engine.connect() as conn:
            run_pk = int(scopes.run(request, conn, run).pk)
            # without a cursor the stream starts from now, not from the run's first record
            return run_pk, RunCursor.parse(
                resume or stream_cursor(conn, run_pk, run_keys(conn, run_pk)))

    # through the streams' connection gate: a burst of (re)connecting streams waits its
    # turn there instead of taking the pool from the API
    run_pk, cur = await hub(st).read(start)

    def render(got: tuple[Update, str]) -> bytes:
        update, event_id = got
        return frame(update.event, update.body, event_id)

    updates = hub(st).follow_run(run_pk, cur)
    return StreamingResponse(_events(request, st, updates, render,
                                     _run_in_scope(request, st, run_pk)),
                             media_type="text/event-stream", headers=HEADERS)


def _run_in_scope(request: Request, st: ServerState, run_pk: int
                  ) -> Callable[[], bytes | None] | None:
    """For a stream opened with a project's token: whether its run is still one of the
    token's projects. A run sent over HTTP that a folder takes over is the folder's from
    then on (store.runs.upsert_run), project and all, and a stream opened on it before
    must not go on with the folder's records."""
    projects = scopes.scope_of(request).projects
    if projects is None:
        return None

    def check() -> bytes | None:
        with st.engine.connect() as conn:
            project = conn.execute(select(s.runs.c.project)
                                   .where(s.runs.c.pk == run_pk)).scalar()
        if project in projects:
            return None
        return (b'{"error": "this run is no longer one of your project\'s runs (another '
                b'project\'s run folder now records it); the stream has ended"}')
    return check


@router.get("/api/stream/runs")
async def runs_stream(
    request: Request,
    project: str | None = Query(None, max_length=128),
    st: ServerState = Depends(state),
) -> StreamingResponse:
    """Live changes to the run list: one `run` event per new or changed run.

    A `ready` event follows the first look at the runs: a client that fetches the list
    after it misses nothing. A client that reconnects with Last-Event-ID is sent every
    watched run once, so it misses nothing that changed while it was away.
    """
    resumed = request.headers.get("last-event-id") is not None

    # an id only lets a client resume, which sends it every watched run: any id will do
    ids = itertools.count(1)

    def render(update: Update) -> bytes:
        if update.event == "ready":
            return frame("ready", update.body, "0")
        return frame(update.event, update.body, str(next(ids)))

    updates = hub(st).follow_list(scopes.narrow(request, project), resumed)
    return StreamingResponse(_events(request, st, updates, render),
                             media_type="text/event-stream", headers=HEADERS)
