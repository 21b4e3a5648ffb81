"""What changed in a run, or in the run list, since a cursor: the reads behind live streams.

Each function takes a connection for one short look and returns `Update`s; the pollers
(`runwatch.server.pollers`) call them and fan the updates out to every stream watching.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import BigInteger, Connection, cast, select

from runwatch.analysis.timing import iso
from runwatch.analysis.views import log_entry, run_summary
from runwatch.server.errors import bad_request
from runwatch.server.jsonio import dumps
from runwatch.server.routes_records import findings_payload
from runwatch.store import schema as s
from runwatch.store.keys import run_keys
from runwatch.store.points import SEQ_LIMIT, key_of, seq_of

SEQ_WINDOW = 2000  # records of metrics per look at most
LOG_PAGE = 500  # log entries per look at most
LIST_WATCH = 500  # newest runs the list stream watches
MARKS = ("metrics", "logs", "events", "checkpoints")


@dataclass
class RunCursor:
    """High-water marks of one run stream: seq of metrics, logs, events, checkpoints.

    `health` counts the findings changes a stream has been sent; it is not part of the
    cursor a client sees (a reconnecting client is sent findings only when they change).
    """

    metrics: int = -1
    logs: int = -1
    events: int = -1
    checkpoints: int = -1
    health: int = 0

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

    def copy(self) -> RunCursor:
        return RunCursor(self.metrics, self.logs, self.events, self.checkpoints, self.health)


@dataclass(frozen=True)
class Update:
    """One event of a stream: `mark` is the cursor field it moves (to `seq`), if any."""

    event: str
    data: Any
    mark: str | None = None
    seq: int = 0
    body: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # encoded once, however many streams send it
        object.__setattr__(self, "body", dumps(self.data))


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


def run_updates(conn: Connection, run_pk: int, cur: RunCursor,
                seen_counts: dict[int, int]) -> list[Update]:
    """Points, logs, checkpoints and a phase change stored after `cur`; advances `cur`.

    Points come at most SEQ_WINDOW records at a time: while a look returns updates,
    look again before waiting.
    """
    out: list[Update] = []
    points = _new_points(conn, run_pk, cur, seen_counts)
    if points:
        cur.metrics = points[-1]["seq"]
        out.append(Update("points", points, "metrics", cur.metrics))
    lg = s.logs.c
    for r in conn.execute(select(s.logs).where(lg.run_pk == run_pk, lg.seq > cur.logs)
                          .order_by(lg.seq).limit(LOG_PAGE)).all():
        cur.logs = r.seq
        out.append(Update("log", log_entry(r), "logs", r.seq))
    ck = s.checkpoints.c
    for r in conn.execute(select(s.checkpoints).where(ck.run_pk == run_pk, ck.seq > cur.checkpoints)
                          .order_by(ck.seq)).all():
        cur.checkpoints = r.seq
        out.append(Update("checkpoint", {"seq": r.seq, "ts": iso(r.ts), "step": r.step,
                                         "kind": r.kind, "id": r.ckpt_id, "path": r.path},
                          "checkpoints", r.seq))
    ev = s.events.c
    top_event = conn.execute(select(ev.seq).where(ev.run_pk == run_pk, ev.seq > cur.events)
                             .order_by(ev.seq.desc()).limit(1)).scalar()
    if top_event is not None:
        cur.events = int(top_event)
        row = conn.execute(select(s.runs).where(s.runs.c.pk == run_pk)).one()
        out.append(Update("phase", run_summary(row), "events", cur.events))
    return out


def findings_stamp(conn: Connection, run_pk: int) -> float | None:
    """When the run's findings last changed (None before the health engine saw it)."""
    f = s.findings.c
    stamp = conn.execute(select(f.updated_ts).where(f.run_pk == run_pk)
                         .order_by(f.updated_ts.desc()).limit(1)).scalar()
    return None if stamp is None else float(stamp)


def findings_update(conn: Connection, run_pk: int, count: int) -> Update:
    """The run's findings as the `count`-th health event of its streams."""
    return Update("health", findings_payload(conn, run_pk), "health", count)


def list_state(conn: Connection, project: str | None) -> dict[str, dict[str, Any]]:
    """The list fields of the newest LIST_WATCH runs (of `project`), newest first."""
    r = s.runs.c
    stmt = select(s.runs)
    if project:
        stmt = stmt.where(r.project == project)
    rows = conn.execute(stmt.order_by(r.created_at.desc(), r.pk.desc()).limit(LIST_WATCH)).all()
    now = time.time()
    return {row.run_id: run_summary(row, now) for row in rows}


def fingerprint(run: dict[str, Any]) -> tuple[Any, ...]:
    """The list fields whose change is worth a `run` event."""
    return tuple(run[k] for k in ("status", "stage", "reason", "observed_step", "saved_step",
                                  "started_at", "ended_at", "name"))
