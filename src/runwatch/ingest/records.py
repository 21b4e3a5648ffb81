"""Turning run-directory records into rows, idempotently on (run, file, seq).

Both the folder indexer and the HTTP ingest API call `ingest_records`; rows whose
(run, file, seq) is already stored are ignored, so a batch may be sent twice.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import orjson
from sqlalchemy import Connection, select, update

from runwatch.ingest.sql import insert_ignore_sql
from runwatch.rundir import format as fmt
from runwatch.store import schema as s

# At most this many problems are itemised per file and batch; the rest are counted.
MAX_PROBLEMS_LISTED = 20


@dataclass
class IngestResult:
    """What one call stored, and what it refused (with file and line)."""

    rows: int = 0
    records: int = 0
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0

    def problem(self, message: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS_LISTED:
            self.problems.append(message)

    def merge(self, other: IngestResult) -> None:
        self.rows += other.rows
        self.records += other.records
        self.problem_count += other.problem_count
        self.problems.extend(other.problems[: MAX_PROBLEMS_LISTED - len(self.problems)])


def ingest_records(
    conn: Connection, run_pk: int, file: str, records: Iterable[dict[str, Any]]
) -> IngestResult:
    """Store `records` of one record file of a run; returns counts and problems."""
    if file == fmt.METRICS:
        return _metrics(conn, run_pk, records)
    if file == fmt.EVENTS:
        return _events(conn, run_pk, records)
    if file == fmt.CHECKPOINTS:
        return _simple(conn, run_pk, file, records, s.checkpoints, _checkpoint_row)
    if file == fmt.LOGS:
        return _simple(conn, run_pk, file, records, s.logs, _log_row)
    raise ValueError(f"{file!r} is not a record file of format v1 ({', '.join(fmt.FILES)})")


def _where(file: str, rec: dict[str, Any]) -> str:
    line = rec.get("_line")
    return f"{file} line {line}" if line is not None else f"{file} seq {rec.get('seq')}"


_NUMERIC = frozenset({float, int, bool})


def _metrics(conn: Connection, run_pk: int, records: Iterable[dict[str, Any]]) -> IngestResult:
    res = IngestResult()
    keys = _key_ids(conn, run_pk)
    rows: list[tuple[Any, ...]] = []
    extend = rows.extend
    max_step = -1
    max_ts = 0.0
    numeric = _NUMERIC.issuperset
    for rec in records:
        rec = dict(rec)
        step = rec.pop("step", None)
        seq = rec.pop("seq")
        ts = rec.pop("ts", None)
        line = rec.pop("_line", None)
        if type(step) is not int or step < 0:
            res.problem(f"{fmt.METRICS} line {line}: 'step' must be a non-negative integer")
            continue
        if type(ts) is not float:
            ts = float(ts) if type(ts) is int else 0.0
        res.records += 1
        if step > max_step:
            max_step = step
        if ts > max_ts:
            max_ts = ts
        if not numeric(map(type, rec.values())) or not keys.keys() >= rec.keys():
            rec = _clean_record(conn, run_pk, keys, rec, line, res)
        # SQLite stores a bound NaN as NULL, and NULL is how the index spells NaN.
        extend([(run_pk, keys[k], seq, step, ts, v) for k, v in rec.items()])
    if rows:
        sql = insert_ignore_sql(s.metric_points, conn.dialect.name, conn.dialect)
        if conn.dialect.name != "sqlite":
            rows = [r if r[5] == r[5] else (*r[:5], None) for r in rows]
        conn.exec_driver_sql(sql, rows)
        res.rows = len(rows)
        _update_key_stats(conn, rows)
    if max_step >= 0:
        _advance_run(conn, run_pk, max_step, max_ts)
    return res


def _update_key_stats(conn: Connection, rows: list[tuple[Any, ...]]) -> None:
    """Add each key's point count and newest (step, value); rows are in seq order."""
    counts = Counter(map(itemgetter(1), rows))
    newest: dict[int, tuple[Any, ...]] = {}
    # Walking back from the end finds every key's newest point without touching the rest.
    for row in reversed(rows):
        if row[1] not in newest:
            newest[row[1]] = row
            if len(newest) == len(counts):
                break
    for kid, row in newest.items():
        conn.execute(
            update(s.metric_keys)
            .where(s.metric_keys.c.id == kid)
            .values(points=s.metric_keys.c.points + counts[kid], last_step=row[3],
                    last_value=_finite_or_none(row[5]))
        )


def _finite_or_none(value: Any) -> float | None:
    return None if value is None or value != value else float(value)


def _clean_record(
    conn: Connection, run_pk: int, keys: dict[str, int], rec: dict[str, Any], line: Any,
    res: IngestResult,
) -> dict[str, Any]:
    """The slow path: register new keys, drop bad keys and non-numeric values with a problem."""
    out: dict[str, Any] = {}
    for key, value in rec.items():
        if key not in keys:
            problem = fmt.validate_key(key)
            if problem:
                res.problem(f"{fmt.METRICS} line {line}: {problem}; skipped")
                continue
            keys[key] = _new_key(conn, run_pk, key)
        t = type(value)
        if t is float:
            out[key] = value
        elif t is int or t is bool:
            out[key] = float(value)
        else:
            res.problem(f"{fmt.METRICS} line {line}: {key!r} is {t.__name__} "
                        f"{str(value)[:40]!r}, not a number; skipped")
    return out


def _key_ids(conn: Connection, run_pk: int) -> dict[str, int]:
    rows = conn.execute(
        select(s.metric_keys.c.key, s.metric_keys.c.id).where(s.metric_keys.c.run_pk == run_pk)
    )
    return {k: i for k, i in rows}


def _new_key(conn: Connection, run_pk: int, key: str) -> int:
    result = conn.execute(s.metric_keys.insert().values(run_pk=run_pk, key=key, points=0))
    pk = result.inserted_primary_key
    assert pk is not None
    return int(pk[0])


def _advance_run(conn: Connection, run_pk: int, max_step: int, max_ts: float | None) -> None:
    r = s.runs.c
    current = conn.execute(select(r.observed_step, r.updated_at).where(r.pk == run_pk)).one()
    values: dict[str, Any] = {}
    if current.observed_step is None or max_step > current.observed_step:
        values["observed_step"] = max_step
    if max_ts is not None and (current.updated_at is None or max_ts > current.updated_at):
        values["updated_at"] = max_ts
    if values:
        conn.execute(update(s.runs).where(r.pk == run_pk).values(**values))


def _events(conn: Connection, run_pk: int, records: Iterable[dict[str, Any]]) -> IngestResult:
    res = _simple(conn, run_pk, fmt.EVENTS, records, s.events, _event_row)
    if res.rows:
        refresh_run_state(conn, run_pk)
    return res


def refresh_run_state(conn: Connection, run_pk: int) -> None:
    """Derive status, stage, start/end times and reason of a run from its events."""
    e = s.events.c
    rows = conn.execute(
        select(e.ts, e.phase, e.stage, e.done, e.total, e.reason)
        .where(e.run_pk == run_pk).order_by(e.seq)
    ).all()
    if not rows:
        return
    last = rows[-1]
    started = next((r.ts for r in rows if r.phase == "RUNNING"), None)
    ended = last.ts if last.phase in fmt.TERMINAL_PHASES else None
    conn.execute(
        update(s.runs).where(s.runs.c.pk == run_pk).values(
            status=last.phase, stage=last.stage, progress_done=last.done,
            progress_total=last.total, reason=last.reason, started_at=started, ended_at=ended,
        )
    )


def _simple(
    conn: Connection, run_pk: int, file: str, records: Iterable[dict[str, Any]], table: Any,
    make_row: Any,
) -> IngestResult:
    res = IngestResult()
    rows = []
    for rec in records:
        try:
            row = make_row(run_pk, rec)
        except (KeyError, TypeError, ValueError) as exc:
            res.problem(f"{_where(file, rec)}: {exc}")
            continue
        rows.append(row)
    res.records = len(rows)
    if rows:
        conn.exec_driver_sql(insert_ignore_sql(table, conn.dialect.name, conn.dialect), rows)
        res.rows = len(rows)
        if table is s.checkpoints:
            _refresh_saved_step(conn, run_pk)
    return res


def _ts(rec: dict[str, Any]) -> float:
    ts = rec.get("ts")
    if not isinstance(ts, int | float) or not math.isfinite(ts):
        return time.time()
    return float(ts)


def _json(value: Any) -> str | None:
    if value is None:
        return None
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def _event_row(run_pk: int, rec: dict[str, Any]) -> tuple[Any, ...]:
    phase = rec["phase"]
    if phase not in fmt.PHASES:
        raise ValueError(f"unknown phase {phase!r}")
    done, total = rec.get("done"), rec.get("total")
    return (run_pk, rec["seq"], _ts(rec), phase, _opt_str(rec.get("stage")),
            done if type(done) is int else None, total if type(total) is int else None,
            _opt_str(rec.get("reason")))


def _checkpoint_row(run_pk: int, rec: dict[str, Any]) -> tuple[Any, ...]:
    step = rec["step"]
    if type(step) is not int:
        raise ValueError("'step' must be an integer")
    kind = rec["kind"]
    if kind not in fmt.CHECKPOINT_KINDS:
        raise ValueError(f"checkpoint kind {kind!r} is not training or inference")
    extra = {k: v for k, v in rec.items() if k not in ("ts", "seq", "step", "kind", "id", "path",
                                                        "_line")}
    return (run_pk, rec["seq"], _ts(rec), step, kind, str(rec["id"]), _opt_str(rec.get("path")),
            _json(extra) if extra else None)


def _log_row(run_pk: int, rec: dict[str, Any]) -> tuple[Any, ...]:
    level = str(rec.get("level", "info")).lower()
    if level not in fmt.LOG_LEVELS:
        level = "info"
    message = rec["message"]
    return (run_pk, rec["seq"], _ts(rec), level, str(message), _json(rec.get("data")))


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _refresh_saved_step(conn: Connection, run_pk: int) -> None:
    from sqlalchemy import func

    c = s.checkpoints.c
    saved = conn.execute(
        select(func.max(c.step)).where(c.run_pk == run_pk, c.kind == "training")
    ).scalar()
    conn.execute(update(s.runs).where(s.runs.c.pk == run_pk).values(saved_step=saved))
