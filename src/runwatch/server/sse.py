"""Server-sent event streams: one per run (points, logs, phase changes, checkpoints,
health) and one for the run list. Each event id is a cursor; a client that reconnects
with Last-Event-ID resumes after it, so nothing is lost across a dropped connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from sqlalchemy import BigInteger, Connection, cast, select
from starlette.concurrency import run_in_threadpool

from runwatch.server.detail import stream_cursor
from runwatch.server.errors import bad_request
from runwatch.server.jsonio import dumps
from runwatch.server.routes_records import _log, findings_payload
from runwatch.server.runs import iso, resolve_run, run_summary
from runwatch.server.state import ServerState, connection, state
from runwatch.store import schema as s
from runwatch.store.points import SEQ_LIMIT, key_of, seq_of
from runwatch.store.series import run_keys

router = APIRouter(tags=["live"])

# A stream looks at the database at least this often even when nothing bumped the feed.
FALLBACK_POLL_S = 2.0
# The list stream sends at most one round of changes this often.
LIST_INTERVAL_S = 1.0
SEQ_WINDOW = 2000
LOG_PAGE = 500
LIST_WATCH = 500
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def frame(event: str, data: Any, event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: ".encode() + dumps(data) + b"\n\n"


@dataclass
class RunCursor:
    """High-water marks of one run stream: seq of metrics, logs, events, checkpoints."""

    metrics: int = -1
    logs: int = -1
    events: int = -1
    checkpoints: int = -1
    findings: float = -1.0

    def __str__(self) -> str:
        return f"{self.metrics}.{self.logs}.{self.events}.{self.checkpoints}"

    @classmethod
    def parse(cls, text: str) -> RunCursor:
        try:
            m, lg, e, c = (int(x) for x in text.split("."))
        except ValueError:
            raise bad_request("the stream cursor is not one this server gave out; "
                              "use the cursor of GET /api/runs/{run}") from None
        return cls(m, lg, e, c)


def _new_points(conn: Connection, run_pk: int, cur: RunCursor,
                seen_counts: dict[int, int]) -> list[dict[str, Any]]:
    """Records (seq, step, values) stored after cur.metrics, at most SEQ_WINDOW seqs of them.

    One statement reads every key, so a batch committed meanwhile is seen whole or not
    at all: the cursor never moves past a record half of whose points were missed.
    """
    keys = run_keys(conn, run_pk)
    changed = {k.id: k for k in keys if seen_counts.get(k.id) != k.points}
    if not changed:
        return []
    p, kc = s.metric_points.c, s.metric_keys.c
    top = cur.metrics + SEQ_WINDOW
    # every key of the run, each a range of point ids (a key with nothing new costs one
    # index probe); one statement however many keys, with no list of them to bind
    base = cast(kc.id, BigInteger) * SEQ_LIMIT  # BIGINT: PostgreSQL binds an INTEGER
    low, high = max(cur.metrics + 1, 0), min(top, SEQ_LIMIT - 1)
    rows = conn.execute(
        select(p.id, p.step, p.value)
        .select_from(s.metric_keys.join(s.metric_points,
                                        p.id.between(base + low, base + high)))
        .where(kc.run_pk == run_pk)
    ).all()
    records: dict[int, dict[str, Any]] = {}
    for point, step, value in rows:
        key = changed.get(key_of(point))
        if key is None:
            continue
        seq = seq_of(point)
        rec = records.setdefault(seq, {"seq": seq, "step": step, "values": {}})
        rec["values"][key.key] = value
    if top not in records:  # otherwise more may lie beyond the window: look again at once
        for k in changed.values():
            seen_counts[k.id] = k.points
    return [records[q] for q in sorted(records)]


def _run_round(conn: Connection, run_pk: int, cur: RunCursor,
               seen_counts: dict[int, int]) -> list[bytes]:
    """Everything new since `cur`, as frames; advances `cur`."""
    out: list[bytes] = []
    points = _new_points(conn, run_pk, cur, seen_counts)
    if points:
        cur.metrics = points[-1]["seq"]
        out.append(frame("points", points, str(cur)))
    lg = s.logs.c
    logs = conn.execute(select(s.logs).where(lg.run_pk == run_pk, lg.seq > cur.logs)
                        .order_by(lg.seq).limit(LOG_PAGE)).all()
    for r in logs:
        cur.logs = r.seq
        out.append(frame("log", _log(r), str(cur)))
    ck = s.checkpoints.c
    for r in conn.execute(select(s.checkpoints).where(ck.run_pk == run_pk, ck.seq > cur.checkpoints)
                          .order_by(ck.seq)).all():
        cur.checkpoints = r.seq
        out.append(frame("checkpoint", {"seq": r.seq, "ts": iso(r.ts), "step": r.step,
                                        "kind": r.kind, "id": r.ckpt_id, "path": r.path},
                         str(cur)))
    ev = s.events.c
    top_event = conn.execute(select(ev.seq).where(ev.run_pk == run_pk, ev.seq > cur.events)
                             .order_by(ev.seq.desc()).limit(1)).scalar()
    if top_event is not None:
        cur.events = int(top_event)
        row = conn.execute(select(s.runs).where(s.runs.c.pk == run_pk)).one()
        out.append(frame("phase", run_summary(row), str(cur)))
    f = s.findings.c
    stamp = conn.execute(select(f.updated_ts).where(f.run_pk == run_pk)
                         .order_by(f.updated_ts.desc()).limit(1)).scalar()
    if stamp is not None and stamp != cur.findings:
        first = cur.findings < 0
        cur.findings = float(stamp)
        if not first:
            out.append(frame("health", findings_payload(conn, run_pk), str(cur)))
    return out


@router.get("/api/runs/{run}/stream")
async def run_stream(
    run: str,
    request: Request,
    cursor: str | None = Query(None, description="resume after this cursor (or Last-Event-ID)"),
    conn: Connection = Depends(connection),
    st: ServerState = Depends(state),
) -> StreamingResponse:
    """Live updates of one run as server-sent events: points, log, checkpoint, phase, health."""
    row = resolve_run(conn, run)
    run_pk = int(row.pk)
    resume = request.headers.get("last-event-id") or cursor
    # without a cursor the stream starts from now, not from the run's first record
    cur = RunCursor.parse(resume or stream_cursor(conn, run_pk, run_keys(conn, run_pk)))
    engine = st.engine
    seen_counts: dict[int, int] = {}

    def round_() -> list[bytes]:
        with engine.connect() as c:
            return _run_round(c, run_pk, cur, seen_counts)

    async def gen() -> AsyncIterator[bytes]:
        yield b"retry: 1000\n\n"
        last_beat = time.monotonic()
        version = -1
        while not st.feed.closed and not await request.is_disconnected():
            version = st.feed.version
            frames = await run_in_threadpool(round_)
            for fr in frames:
                yield fr
            if frames:
                last_beat = time.monotonic()
                continue
            if time.monotonic() - last_beat > st.heartbeat:
                last_beat = time.monotonic()
                yield b": keep-alive\n\n"
            await st.feed.wait(version, FALLBACK_POLL_S, st.poll_interval)

    return StreamingResponse(gen(), media_type="text/event-stream", headers=HEADERS)


def _list_state(conn: Connection, project: str | None) -> dict[str, dict[str, Any]]:
    r = s.runs.c
    stmt = select(s.runs)
    if project:
        stmt = stmt.where(r.project == project)
    rows = conn.execute(stmt.order_by(r.created_at.desc(), r.pk.desc()).limit(LIST_WATCH)).all()
    now = time.time()
    return {row.run_id: run_summary(row, now) for row in rows}


def _fingerprint(run: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(run[k] for k in ("status", "stage", "reason", "observed_step", "saved_step",
                                  "started_at", "ended_at", "name"))


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
    engine = st.engine

    def snapshot() -> dict[str, dict[str, Any]]:
        with engine.connect() as c:
            return _list_state(c, project)

    async def gen() -> AsyncIterator[bytes]:
        yield b"retry: 1000\n\n"
        sent: dict[str, tuple[Any, ...]] = {}
        first = True
        counter = 0
        last_beat = time.monotonic()
        while not st.feed.closed and not await request.is_disconnected():
            version = st.feed.version
            current = await run_in_threadpool(snapshot)
            for run_id, summary in reversed(list(current.items())):
                fp = _fingerprint(summary)
                if sent.get(run_id) != fp:
                    sent[run_id] = fp
                    if not first or resumed:
                        counter += 1
                        last_beat = time.monotonic()
                        yield frame("run", summary, str(counter))
            if first and not resumed:
                # the baseline is taken: a client that lists runs now misses nothing
                yield frame("ready", {"runs": len(current)}, "0")
            first = False
            if time.monotonic() - last_beat > st.heartbeat:
                last_beat = time.monotonic()
                yield b": keep-alive\n\n"
            await st.feed.wait(version, FALLBACK_POLL_S, st.poll_interval)
            if not st.feed.closed:
                await asyncio.sleep(LIST_INTERVAL_S)

    return StreamingResponse(gen(), media_type="text/event-stream", headers=HEADERS)

