"""What changed in a run, or in the run list, since a cursor: the reads behind live streams.

Each function takes a connection for one short look and returns `Update`s; the pollers
(`runwatch.server.pollers`) call them and fan the updates out to every stream watching.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, bindparam, func, select

from runwatch.analysis.views import checkpoint_entry, log_entry, run_summary
from runwatch.server.errors import bad_request
from runwatch.server.jsonio import dumps
from runwatch.server.routes_records import findings_payload
from runwatch.server.settle import Gone
from runwatch.store import schema as s
from runwatch.store.keys import run_keys
from runwatch.store.points import key_of, run_points, seq_of
from runwatch.store.values import parse_int64

SEQ_WINDOW = 2000  # records of metrics per look at most
LOG_PAGE = 500  # log entries per look at most
LIST_WATCH = 500  # newest runs the list stream watches


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
    # the run's phase as last seen (None: not yet), not part of the cursor a client sees
    status: str | None = None
    # whether its process was gone as last seen (None: not yet), likewise
    gone: bool | None = None

    def __str__(self) -> str:
        return f"{self.metrics}.{self.logs}.{self.events}.{self.checkpoints}"

    @classmethod
    def parse(cls, text: str) -> RunCursor:
        # four seqs, each stored as a 64-bit integer or -1 ("none yet")
        marks = [parse_int64(x) for x in text.split(".")]
        if len(marks) != 4 or any(x is None or x < -1 for x in marks):
            raise bad_request("the stream cursor is not one this server gave out; "
                              "use the cursor of GET /api/runs/{run}")
        m, lg, e, c = (int(x or 0) for x in marks)
        return cls(m, lg, e, c)

    def copy(self) -> RunCursor:
        return RunCursor(self.metrics, self.logs, self.events, self.checkpoints, self.health,
                         self.status, self.gone)


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


@dataclass(frozen=True)
class Marks:
    """How far each kind of record of a run has come: one cheap statement, so a look at a
    run where nothing changed reads nothing else."""

    points: int  # points stored, all keys together
    logs: int
    checkpoints: int
    events: int
    findings: float | None  # when the findings last changed
    attempt: int  # the run's attempt: a new one starts its metrics and checkpoints at seq 0
    status: str  # the run's phase, which job control may change before any event says so
    # the run's id and manifest: with attempt and status, what says whether its process
    # is gone, which changes with nothing stored (a process that dies writes nothing)
    run_id: str
    manifest: str


def _marks_statement() -> Any:
    def top(table: Any, column: Any) -> Any:
        return select(func.max(column)).where(table.c.run_pk == bindparam("run_pk"))

    kc = s.metric_keys.c
    return select(
        select(func.sum(kc.points)).where(kc.run_pk == bindparam("run_pk")).scalar_subquery(),
        *(top(t, c).scalar_subquery() for t, c in (
            (s.logs, s.logs.c.seq), (s.checkpoints, s.checkpoints.c.seq),
            (s.events, s.events.c.seq), (s.findings, s.findings.c.updated_ts))),
        *(select(c).where(s.runs.c.pk == bindparam("run_pk")).scalar_subquery()
          for c in (s.runs.c.attempt, s.runs.c.status, s.runs.c.run_id, s.runs.c.manifest)))


# built once: building the statement costs more than running it
RUN_MARKS = _marks_statement()


def run_marks(conn: Connection, run_pk: int) -> Marks:
    points, logs, checkpoints, events, findings, attempt, status, run_id, manifest = \
        conn.execute(RUN_MARKS, {"run_pk": run_pk}).one()
    return Marks(int(points or 0), -1 if logs is None else int(logs),
                 -1 if checkpoints is None else int(checkpoints),
                 -1 if events is None else int(events),
                 None if findings is None else float(findings), int(attempt or 1),
                 str(status), str(run_id), str(manifest))


def _new_points(conn: Connection, run_pk: int, cur: RunCursor,
                seen_counts: dict[int, int]) -> tuple[list[dict[str, Any]], bool]:
    """Records (seq, step, values) stored after cur.metrics, at most SEQ_WINDOW seqs of
    them, and whether more may lie beyond that window.

    `run_points` reads every key in one statement, so a batch committed meanwhile is seen
    whole or not at all: the cursor never moves past a record half of whose points were
    missed.
    """
    keys = run_keys(conn, run_pk)
    changed = {k.id: k for k in keys if seen_counts.get(k.id) != k.points}
    if not changed:
        return [], False
    top = cur.metrics + SEQ_WINDOW
    rows = run_points(conn, run_pk, cur.metrics, top)
    records: dict[int, dict[str, Any]] = {}
    for point, step, value in rows:
        key = changed.get(key_of(point))
        if key is None:
            continue
        seq = seq_of(point)
        rec = records.setdefault(seq, {"seq": seq, "step": step, "values": {}})
        rec["values"][key.key] = value
    more = top in records
    if not more:
        for k in changed.values():
            seen_counts[k.id] = k.points
    return [records[q] for q in sorted(records)], more


def run_updates(conn: Connection, run_pk: int, cur: RunCursor, seen_counts: dict[int, int],
                marks: Marks, gone: Gone) -> tuple[list[Update], bool]:
    """Points, logs, checkpoints and a phase change stored after `cur` (up to `marks` at
    least), and whether more may wait beyond the pages read; advances `cur`. `gone` says
    whether a run's process is gone (a server's ServerState.judge, taken before the read).

    `seen_counts` (point counts per key id) is the caller's, kept from look to look.
    Only the kinds of record whose mark moved are read.
    """
    out: list[Update] = []
    more = False
    if marks.points != sum(seen_counts.values()):
        points, more = _new_points(conn, run_pk, cur, seen_counts)
        if points:
            cur.metrics = points[-1]["seq"]
            out.append(Update("points", points, "metrics", cur.metrics))
    if marks.logs > cur.logs:
        lg = s.logs.c
        for r in conn.execute(select(s.logs).where(lg.run_pk == run_pk, lg.seq > cur.logs)
                              .order_by(lg.seq).limit(LOG_PAGE)).all():
            cur.logs = r.seq
            out.append(Update("log", log_entry(r), "logs", r.seq))
        more = more or cur.logs < marks.logs
    if marks.checkpoints > cur.checkpoints:
        ck = s.checkpoints.c
        for r in conn.execute(select(s.checkpoints)
                              .where(ck.run_pk == run_pk, ck.seq > cur.checkpoints)
                              .order_by(ck.seq)).all():
            cur.checkpoints = r.seq
            out.append(Update("checkpoint", checkpoint_entry(r), "checkpoints", r.seq))
    gone_now = gone(marks)
    moved = cur.status is not None and (marks.status != cur.status
                                        or (cur.gone is not None and gone_now != cur.gone))
    cur.status, cur.gone = marks.status, gone_now
    if marks.events > cur.events:
        # a phase event carries the run's list fields after the newest lifecycle event
        cur.events = marks.events
        row = conn.execute(select(s.runs).where(s.runs.c.pk == run_pk)).one()
        out.append(Update("phase", run_summary(row, gone=gone(row)), "events", cur.events))
    elif moved:
        # job control changed the phase in the index alone (a cancel asked of a running
        # job is CANCEL_REQUESTED before its process records anything), or its process
        # died: no cursor moves
        out.append(phase_now(conn, run_pk, gone))
    return out, more


def phase_now(conn: Connection, run_pk: int, gone: Gone) -> Update:
    """A phase event with the run's list fields as they are now; it moves no cursor."""
    row = conn.execute(select(s.runs).where(s.runs.c.pk == run_pk)).one()
    return Update("phase", run_summary(row, gone=gone(row)))


def findings_update(conn: Connection, run_pk: int, count: int) -> Update:
    """The run's findings as the `count`-th health event of its streams."""
    return Update("health", findings_payload(conn, run_pk), "health", count)


def list_state(conn: Connection, project: str | None, gone: Gone
               ) -> dict[str, dict[str, Any]]:
    """The list fields of the newest LIST_WATCH runs (of `project`), newest first."""
    r = s.runs.c
    stmt = select(s.runs)
    if project:
        stmt = stmt.where(r.project == project)
    rows = conn.execute(stmt.order_by(r.created_at.desc(), r.pk.desc()).limit(LIST_WATCH)).all()
    now = time.time()
    return {row.run_id: run_summary(row, now, gone(row)) for row in rows}


def fingerprint(run: dict[str, Any]) -> tuple[Any, ...]:
    """The list fields whose change is worth a `run` event."""
    return tuple(run[k] for k in ("status", "stage", "reason", "observed_step", "saved_step",
                                  "started_at", "ended_at", "name", "process_gone"))
