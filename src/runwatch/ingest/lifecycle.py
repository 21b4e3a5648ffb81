"""Run lifecycle from its record files: events, checkpoints and logs into rows, and the
run's state (phase, stage, progress, times, saved step) derived from them.

Events say the phase. Records say the run has started where no event does: a run is QUEUED
until its process starts, and nothing of an attempt (metric points, checkpoints, samples)
is recorded before that, so a QUEUED run that holds any is RUNNING from its earliest
(`started_by_records`). Records older than the run's last QUEUED event are not its current
attempt's: nothing of an attempt is recorded before it is queued, so they were put back from
the attempt it resumes (runwatch.jobs.resume.restore) and start nothing (`predates_queueing`):
a resumed attempt stays QUEUED until its process starts (a Ray job: until the cluster starts
it), as a fresh one does. A run sent without events (a hand-written client, the sync of a
folder whose events.jsonl was lost) is then RUNNING, as a folder that holds the same files.
A run PREPARING that holds records (a plain command a worker runs, which reports no phase)
stays PREPARING, and its earliest record is its start, so its duration counts from it.
Logs outlive attempts (a requeued job keeps the last one's) and a process may log while it
waits, so they start only a run that no event speaks for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import orjson
from sqlalchemy import ColumnElement, Connection, Table, delete, func, select, update

from runwatch.ingest.result import IngestResult, where
from runwatch.ingest.sql import insert_ignore_sql
from runwatch.rundir import format as fmt
from runwatch.store import jobs as store_jobs
from runwatch.store import schema as s
from runwatch.store.runs import delete_metrics
from runwatch.store.values import finite, is_int64

CODE_LENGTH = 64  # the events.code and runs.reason_code columns' String(64)


def store_events(conn: Connection, run_pk: int, records: Iterable[dict[str, Any]]
                 ) -> IngestResult:
    """Store events records, then derive the run's state from all its events."""
    return _store(conn, run_pk, fmt.EVENTS, records, s.events, _event_row,
                  lambda c, pk, _: refresh_run_state(c, pk))


def store_checkpoints(conn: Connection, run_pk: int, records: Iterable[dict[str, Any]]
                      ) -> IngestResult:
    """Store checkpoints records, then the run's newest saved training step."""
    return _store(conn, run_pk, fmt.CHECKPOINTS, records, s.checkpoints, _checkpoint_row,
                  _checkpoints_stored)


def store_logs(conn: Connection, run_pk: int, records: Iterable[dict[str, Any]]
               ) -> IngestResult:
    """Store logs records; a run that no event speaks for has started with them."""
    return _store(conn, run_pk, fmt.LOGS, records, s.logs, _log_row, _logs_stored)


def predates_queueing(run_pk: ColumnElement[int] | int,
                      first_ts: ColumnElement[float] | float) -> ColumnElement[bool]:
    """Whether records whose earliest is at `first_ts` are older than the run's last
    QUEUED event: then they are not the queued attempt's own but were put back from the
    attempt it resumes, and do not start it. runwatch.ingest.points asks it of metric
    points, in its one statement per batch."""
    e = s.events.c
    return (select(e.seq).where(e.run_pk == run_pk, e.phase == "QUEUED", e.ts > first_ts)
            .exists())


def started_by_records(conn: Connection, run_pk: int, first_ts: float, *,
                       unless_events: bool = False) -> None:
    """Records of the run's current attempt are stored, the earliest at `first_ts`: a run
    still QUEUED has started, and is RUNNING from then, unless they predate its queueing
    (`predates_queueing`). With `unless_events` (records that outlive an attempt: logs)
    only while no event of the run is stored."""
    r = s.runs.c
    cond = [r.pk == run_pk, ~predates_queueing(run_pk, first_ts)]
    if unless_events:
        cond.append(~select(s.events.c.seq).where(s.events.c.run_pk == run_pk).exists())
    conn.execute(update(s.runs).where(*cond, r.status == "QUEUED")
                 .values(status="RUNNING", started_at=first_ts))
    # a process that records while it says PREPARING (a plain command a worker runs,
    # which reports no phase of its own) has started too; its phase stays its events'
    conn.execute(update(s.runs).where(*cond, r.status == "PREPARING", r.started_at.is_(None))
                 .values(started_at=first_ts))


def refresh_run_state(conn: Connection, run_pk: int) -> None:
    """Derive status, stage, start/end times, reason and attempt of a run from the events
    of its current attempt (those from the first event that names it on).

    A CANCEL_REQUESTED status that job control set in the index (runwatch.jobs.control)
    stays until the attempt ends: an event the process wrote before it heard of the
    request must not undo it. An event that starts a newer attempt first purges the old
    attempt's rows from the index (`purge_attempt`), in this transaction. Where the index
    holds records of the attempt and no event of its start, the records say when it
    started, and a run whose events say QUEUED is RUNNING, unless all of them predate its
    last queueing (see the module's docstring). A job's row takes the attempt the events
    name (`store.jobs.follow_events`): an index made again from the folder of a retried
    job must not start attempt 1 again.
    """
    e = s.events.c
    rows = conn.execute(
        select(e.ts, e.phase, e.stage, e.done, e.total, e.reason, e.attempt, e.code)
        .where(e.run_pk == run_pk).order_by(e.seq)
    ).all()
    if not rows:
        return
    attempt, first = _current_attempt(rows)
    current = rows[first:]
    last = current[-1]
    runs = s.runs.c
    run = conn.execute(select(runs.status, runs.attempt, runs.started_at, runs.observed_step,
                              runs.updated_at).where(runs.pk == run_pk)).one()
    if attempt > run.attempt:
        purge_attempt(conn, run_pk)
    status = last.phase
    if (run.status == "CANCEL_REQUESTED" and attempt == run.attempt
            and status in fmt.ACTIVE_PHASES):
        status = "CANCEL_REQUESTED"
    started = next((r.ts for r in current if r.phase == "RUNNING"), None)
    queued_at = max((r.ts for r in rows if r.phase == "QUEUED"), default=None)
    if (started is None and attempt == run.attempt
            and _attempt_recorded(conn, run_pk, run, queued_at)):
        # records of this attempt and no event of its start: it started when they said
        # (started_by_records), else no later than its last event; a run PREPARING keeps
        # its records' start, if any
        started = run.started_at if run.started_at is not None or status == "PREPARING" \
            else last.ts
        if status == "QUEUED":
            status = "RUNNING"
    if started is None and attempt == run.attempt:
        started = _command_start(conn, run_pk, current)
    ended = last.ts if last.phase in fmt.TERMINAL_PHASES else None
    conn.execute(
        update(s.runs).where(s.runs.c.pk == run_pk).values(
            status=status, stage=last.stage, progress_done=last.done,
            progress_total=last.total, reason=last.reason, reason_code=last.code,
            started_at=started, ended_at=ended, attempt=attempt,
        )
    )
    store_jobs.follow_events(conn, run_pk, attempt)


def job_follows_events(conn: Connection, run_pk: int) -> None:
    """Bring the run's job row in step with the events the index holds of the run
    (`store.jobs.follow_events`), as `refresh_run_state` does whenever it stores them: for a
    row made after them (ingest/jobspec.py)."""
    e = s.events.c
    attempt = conn.execute(select(func.max(e.attempt)).where(e.run_pk == run_pk)).scalar()
    store_jobs.follow_events(conn, run_pk, attempt or 1)


def _current_attempt(rows: Sequence[Any]) -> tuple[int, int]:
    """The run's current attempt, the highest one its events (`rows`, in seq order) name
    (1 where none does), and the position of the first event that names it."""
    attempt, first = 1, 0
    for i, row in enumerate(rows):
        if row.attempt is not None and row.attempt > attempt:
            attempt, first = row.attempt, i
    return attempt, first


def purge_attempt(conn: Connection, run_pk: int) -> None:
    """Forget what the index holds of a run's attempt-scoped files (metric points and
    keys, samples, checkpoints, health findings and state, and where ingest stopped in
    those files): a new attempt starts with none. Events and logs stay."""
    delete_metrics(conn, run_pk)
    for table in (s.samples, s.checkpoints, s.findings, s.health_state):
        conn.execute(delete(table).where(table.c.run_pk == run_pk))
    o = s.ingest_offsets.c
    files = conn.execute(select(o.file).where(o.run_pk == run_pk)).scalars().all()
    scoped = [f for f in files if fmt.is_attempt_file(f)]
    if scoped:
        conn.execute(delete(s.ingest_offsets).where(o.run_pk == run_pk, o.file.in_(scoped)))
    conn.execute(update(s.runs).where(s.runs.c.pk == run_pk).values(
        observed_step=None, saved_step=None, engine_config=None))


def _command_start(conn: Connection, run_pk: int, current: Sequence[Any]) -> float | None:
    """When the worker started a command job's process (its PREPARING event), for a command
    that reports no phase and records nothing (no SDK): that is all there is of its start,
    and its duration runs from it. None for a recipe's run, which reports RUNNING."""
    preparing = next((r.ts for r in current if r.phase == "PREPARING"), None)
    if preparing is None:
        return None
    kind = conn.execute(select(s.jobs.c.kind).where(s.jobs.c.run_pk == run_pk)).scalar()
    return preparing if kind == "command" else None


def _attempt_recorded(conn: Connection, run_pk: int, run: Any, queued_at: float | None
                      ) -> bool:
    """Whether the index holds records of the run's current attempt not older than its
    last queueing at `queued_at` (`predates_queueing`): metric points (its observed step,
    the newest at its updated_at), checkpoints or samples. A sample keeps no time in the
    index: samples count where the run was never queued, or once records started it."""
    if queued_at is None:
        return run.observed_step is not None or any(
            _holds(conn, table, run_pk) for table in (s.checkpoints, s.samples))
    if run.observed_step is not None and (run.updated_at or 0.0) >= queued_at:
        return True
    return (_holds(conn, s.checkpoints, run_pk, s.checkpoints.c.ts >= queued_at)
            or (run.started_at is not None and _holds(conn, s.samples, run_pk)))


def _holds(conn: Connection, table: Table, run_pk: int, *cond: ColumnElement[bool]) -> bool:
    """Whether `table` holds a row of the run (that meets `cond`)."""
    return conn.execute(select(table.c.run_pk).where(table.c.run_pk == run_pk, *cond).limit(1)
                        ).first() is not None


def _store(
    conn: Connection, run_pk: int, file: str, records: Iterable[dict[str, Any]], table: Table,
    make_row: Callable[[int, dict[str, Any]], tuple[Any, ...]],
    then: Callable[[Connection, int, float], None] | None = None,
) -> IngestResult:
    """Store the records that make a row (its third column their time); `then` refreshes
    the run, given the earliest of them, when any were stored."""
    res = IngestResult()
    rows = []
    for rec in records:
        try:
            row = make_row(run_pk, rec)
        except (KeyError, TypeError, ValueError, ArithmeticError, RecursionError) as exc:
            # a value no column holds (too large, too deeply nested) is the record's problem
            res.problem(f"{where(file, rec)}: {str(exc)[:200]}")
            continue
        rows.append(row)
    res.records = len(rows)
    if rows:
        conn.exec_driver_sql(insert_ignore_sql(table, conn.dialect.name, conn.dialect), rows)
        res.rows = len(rows)
        if then is not None:
            then(conn, run_pk, min(row[2] for row in rows))
    return res


def _ts(rec: dict[str, Any]) -> float:
    ts = finite(rec.get("ts"))
    return time.time() if ts is None else ts


def _seq(rec: dict[str, Any]) -> int:
    seq = rec["seq"]
    if not is_int64(seq) or seq < 0:
        raise ValueError("'seq' must be a non-negative integer below 2**63")
    return int(seq)


def _opt_int(value: Any) -> int | None:
    return value if is_int64(value) else None


def _json(value: Any) -> str | None:
    if value is None:
        return None
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def _event_row(run_pk: int, rec: dict[str, Any]) -> tuple[Any, ...]:
    phase = rec["phase"]
    if phase not in fmt.PHASES:
        raise ValueError(f"unknown phase {phase!r}")
    return (run_pk, _seq(rec), _ts(rec), phase, _opt_str(rec.get("stage")),
            _opt_int(rec.get("done")), _opt_int(rec.get("total")), _opt_str(rec.get("reason")),
            _attempt(rec), _code(rec), fmt.event_rate(rec))


def _checkpoint_row(run_pk: int, rec: dict[str, Any]) -> tuple[Any, ...]:
    step = rec["step"]
    if not is_int64(step):
        raise ValueError("'step' must be an integer below 2**63")
    kind = rec["kind"]
    if kind not in fmt.CHECKPOINT_KINDS:
        raise ValueError(f"checkpoint kind {kind!r} is not training or inference")
    extra = {k: v for k, v in rec.items() if k not in ("ts", "seq", "step", "kind", "id", "path",
                                                        "_line")}
    return (run_pk, _seq(rec), _ts(rec), step, kind, str(rec["id"]), _opt_str(rec.get("path")),
            _json(extra) if extra else None)


def _log_row(run_pk: int, rec: dict[str, Any]) -> tuple[Any, ...]:
    level = str(rec.get("level", "info")).lower()
    if level not in fmt.LOG_LEVELS:
        level = "info"
    message = rec["message"]
    return (run_pk, _seq(rec), _ts(rec), level, str(message), _json(rec.get("data")))


def _attempt(rec: dict[str, Any]) -> int | None:
    value = rec.get("attempt")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**31:
        raise ValueError("'attempt' must be a whole number from 1")
    return value


def _code(rec: dict[str, Any]) -> str | None:
    code = _opt_str(rec.get("code"))
    return None if code is None else code[:CODE_LENGTH]


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _checkpoints_stored(conn: Connection, run_pk: int, first_ts: float) -> None:
    started_by_records(conn, run_pk, first_ts)
    _refresh_saved_step(conn, run_pk)


def _logs_stored(conn: Connection, run_pk: int, first_ts: float) -> None:
    started_by_records(conn, run_pk, first_ts, unless_events=True)


def _refresh_saved_step(conn: Connection, run_pk: int) -> None:
    c = s.checkpoints.c
    saved = conn.execute(
        select(func.max(c.step)).where(c.run_pk == run_pk, c.kind == "training")
    ).scalar()
    conn.execute(update(s.runs).where(s.runs.c.pk == run_pk).values(saved_step=saved))
