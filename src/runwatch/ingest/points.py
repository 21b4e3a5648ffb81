"""The metric fast path: metrics records into points, checked as columns.

`store_metrics` stores a batch of metrics records and collects the new points by key
(`IngestResult.points`) for the indexer's hooks; the keys' step summaries
(runwatch.store.summaries) are brought up to date in the same transaction.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from itertools import groupby
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, Update, and_, bindparam, case, or_, select, update

from runwatch.ingest.lifecycle import predates_queueing
from runwatch.ingest.result import IngestResult, where
from runwatch.ingest.sql import insert_ignore_sql
from runwatch.rundir import format as fmt
from runwatch.store import schema as s
from runwatch.store.keys import metric_keys
from runwatch.store.points import SEQ_BITS, SEQ_LIMIT, PointColumns, key_base, update_key_stats
from runwatch.store.values import INT64_MAX, INT64_MIN, finite, preview, to_float

_NUMERIC = frozenset({float, int, bool})
_INT = frozenset({int})
_FLOAT = frozenset({float})
# the fields of a metrics record that are not metrics
RECORD_FIELDS = frozenset({*fmt.RECORD_FIELDS, "_line"})
# One SQLite statement stores this many metrics of a record at most (one bound value
# each, plus seq, step and ts); a wider record is stored in several.
KEYS_PER_STATEMENT = 200
# Each new key costs statements inside the transaction that holds the index's write
# lock: a record may have at most this many metrics, a run at most this many keys.
MAX_KEYS_PER_RECORD = fmt.MAX_METRICS_PER_RECORD
MAX_KEYS_PER_RUN = fmt.MAX_KEYS_PER_RUN


def store_metrics(conn: Connection, run_pk: int, records: Iterable[dict[str, Any]]
                  ) -> IngestResult:
    """Store metrics records as points and collect them by key (`IngestResult.points`).

    Records come in runs of the same shape (the same fields in the same order, as a
    training loop logs them). Each run is checked as columns, a few C-level passes
    instead of a Python step per point, and stored by one statement per record that
    inserts all its points. A run with anything wrong in it (a bad step, a key not
    seen before and not valid, a value that is not a number) goes record by record
    instead, so every problem is reported with its line and the rest is kept. A seq
    that repeats within the call keeps its first record, as one stored earlier would.
    """
    res = IngestResult()
    sink = _PointSink(conn, run_pk, res)
    sink.fill(records)
    sink.flush()
    return res


Stored = Callable[[int, IngestResult], None]


class MetricsGroup:
    """Metrics batches of several runs stored together, in one transaction.

    `add` checks a batch's records as `store_metrics` does (new keys are created at
    once) and queues its points; `flush` stores what is queued. On PostgreSQL every
    run's points go in one statement, the key counts in one (two when some points
    were stored already) and the runs' progress in one; the step summaries are
    brought up to date run by run. `stored(run_pk, result)` is called per batch
    once its points are stored (`result.rows` set), in the order they were added.
    """

    def __init__(self, conn: Connection, stored: Stored) -> None:
        self.conn = conn
        self.stored = stored
        self.keys: dict[int, dict[str, int]] = {}
        self.sinks: list[_PointSink] = []

    def prefetch(self, run_pks: Iterable[int]) -> None:
        """Read the metric keys of runs about to be added, in one statement."""
        want = sorted(set(run_pks) - self.keys.keys())
        if not want:
            return
        k = s.metric_keys.c
        for pk in want:
            self.keys[pk] = {}
        for run_pk, key, kid in self.conn.execute(
                select(k.run_pk, k.key, k.id).where(k.run_pk.in_(want))):
            self.keys[run_pk][key] = kid

    def add(self, run_pk: int, records: Iterable[dict[str, Any]]) -> IngestResult:
        """Check and queue a batch of run `run_pk`; its result is whole once flushed."""
        if self.holds(run_pk):
            self.flush()  # one batch of a run per flush: its counts say what it stored
        res = IngestResult()
        if run_pk not in self.keys:
            self.prefetch([run_pk])
        sink = _PointSink(self.conn, run_pk, res, self.keys[run_pk])
        sink.fill(records)
        self.sinks.append(sink)
        return res

    def forget(self, run_pk: int) -> None:
        """Read run `run_pk`'s keys again for its next batch: something else was stored of
        it (a new attempt's first event drops the old attempt's keys)."""
        self.keys.pop(run_pk, None)

    def holds(self, run_pk: int) -> bool:
        """Whether a batch of run `run_pk` waits to be stored."""
        return any(sink.run_pk == run_pk for sink in self.sinks)

    def flush(self) -> None:
        sinks, self.sinks = self.sinks, []
        if len(sinks) == 1 or self.conn.dialect.name != "postgresql":
            for sink in sinks:
                sink.flush()
        elif sinks:
            _flush_pg(self.conn, sinks)
        for sink in sinks:
            self.stored(sink.run_pk, sink.res)


def _flush_pg(conn: Connection, sinks: list[_PointSink]) -> None:
    """Store the points of several runs' batches (one batch per run) in one statement that
    answers, per key, how many of its points were stored already (none, mostly); then the
    key counts, the step summaries and the runs' progress."""
    from runwatch.store.summaries import update_summaries

    rows = [row for sink in sinks for row in sink.rows]
    kids: list[int] = []
    counts: list[int] = []
    for sink in sinks:
        for name, cols in sink.res.points.items():
            kids.append(sink.keys[name])
            counts.append(len(cols.seqs))
    short: dict[int, int] = {}
    if rows:
        short = dict(conn.exec_driver_sql(_PG_INSERT_COUNTED, (
            *_pg_columns(rows), _array(map(str, kids)), _array(map(str, counts)))).all())
    exact: dict[int, int] = {}
    again: dict[int, int] = {}
    whole: list[tuple[_PointSink, bool]] = []
    for sink in sinks:
        res = sink.res
        if not res.points:
            continue
        ids = {sink.keys[name]: len(cols.seqs) for name, cols in res.points.items()}
        missed = sum(short.get(kid, 0) for kid in ids)
        res.rows = sum(ids.values()) - missed
        (again if missed else exact).update(ids)
        whole.append((sink, not missed))
    if exact:
        update_key_stats(conn, exact, True)
    if again:
        update_key_stats(conn, again, False)
    for sink, all_new in whole:  # after the counts: a key not summarised yet reads its own
        update_summaries(conn, sink.keys, sink.res.points, exact=all_new)
    moved = [sink for sink in sinks if sink.max_step >= 0]
    if moved:
        conn.exec_driver_sql(_PG_ADVANCE, ([sink.run_pk for sink in moved],
                                           [sink.max_step for sink in moved],
                                           [sink.max_ts for sink in moved],
                                           [sink.first_ts() for sink in moved]))


def _first_of_each_seq(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    seen: set[Any] = set()
    add = seen.add
    for rec in records:
        seq = rec.get("seq")
        if type(seq) is int:  # anything else is refused later, with its line
            if seq in seen:
                continue
            add(seq)
        yield rec


class _PointSink:
    """Collects the points of one ingest call, then stores them and the key statistics."""

    def __init__(self, conn: Connection, run_pk: int, res: IngestResult,
                 keys: dict[str, int] | None = None) -> None:
        self.conn = conn
        self.run_pk = run_pk
        self.res = res
        # the run's keys by name: `keys` when the caller read them (and shares them)
        self.keys = metric_keys(conn, run_pk) if keys is None else keys
        self.sqlite = conn.dialect.name == "sqlite"
        # per SQLite statement, the records (seq, step, ts, values...) it stores
        self.by_statement: dict[str, list[tuple[Any, ...]]] = {}
        self.rows: list[tuple[Any, ...]] = []  # single points (id, step, ts, value)
        self.max_step = -1
        self.max_ts = 0.0
        self.min_ts = math.inf  # of the points with a time: when a QUEUED run started

    def _key_id(self, key: str) -> int:
        kid = self.keys.get(key)
        if kid is None:
            self._new_keys([key])
            kid = self.keys[key]
        return kid

    def _new_keys(self, names: list[str]) -> None:
        """Create metric keys of the run in one statement, and learn their ids."""
        self.conn.execute(s.metric_keys.insert(),
                          [{"run_pk": self.run_pk, "key": k, "points": 0} for k in names])
        self.keys.update(metric_keys(self.conn, self.run_pk))

    def fill(self, records: Iterable[dict[str, Any]]) -> None:
        """Check and queue `records`: each run of one shape as columns, else by record."""
        for shape, group in groupby(_first_of_each_seq(records), key=tuple):
            block = list(group)
            if not self.add_block(shape, block):
                for rec in block:
                    self.add_record(rec)

    def add_block(self, shape: tuple[str, ...], block: list[dict[str, Any]]) -> bool:
        """Store records of one shape as columns; False if they need the record path."""
        if "seq" not in shape or "step" not in shape or "ts" not in shape:
            return False
        names = [k for k in shape if k not in RECORD_FIELDS]
        if len(names) > MAX_KEYS_PER_RECORD:
            return False
        new = [k for k in names if k not in self.keys]
        if new and (len(self.keys) + len(new) > MAX_KEYS_PER_RUN
                    or any(fmt.validate_key(k) for k in new)):
            return False
        parts = []
        for i in range(0, max(len(names), 1), KEYS_PER_STATEMENT):
            part = names[i:i + KEYS_PER_STATEMENT]
            params = list(map(itemgetter("seq", "step", "ts", *part), block))
            cols = list(zip(*params, strict=True))
            if not _valid(cols):
                return False
            parts.append((part, params, cols))
        if new:
            self._new_keys(new)
        self.max_step = max(self.max_step, max(parts[0][2][1]))
        self.max_ts = max(self.max_ts, max(parts[0][2][2]))
        first = min(parts[0][2][2])
        if not first:  # a record with no time (0) says nothing of when the run started
            first = min((t for t in parts[0][2][2] if t), default=math.inf)
        self.min_ts = min(self.min_ts, first)
        for part, params, cols in parts:
            self._store(part, params, cols)
        self.res.records += len(block)
        return True

    def _store(self, names: list[str], params: list[tuple[Any, ...]],
               cols: list[tuple[Any, ...]]) -> None:
        """Queue a block's points for storing, and add them to the key columns."""
        if not names:
            return
        seqs, steps, tss = cols[0], cols[1], cols[2]
        bases = [key_base(self._key_id(k)) for k in names]
        if self.sqlite:
            self.by_statement.setdefault(_record_sql(tuple(bases)), []).extend(params)
        points = self.res.points
        for name, base, values in zip(names, bases, cols[3:], strict=True):
            if not _FLOAT.issuperset(map(type, values)):
                values = tuple(map(float, values))
            if not self.sqlite:
                self.rows.extend(zip([base + q for q in seqs], steps, tss, values, strict=True))
            col = points.get(name)
            if col is None:
                points[name] = PointColumns(list(seqs), list(steps), list(tss), list(values))
            else:
                col[0].extend(seqs)
                col[1].extend(steps)
                col[2].extend(tss)
                col[3].extend(values)

    def add_record(self, rec: dict[str, Any]) -> None:
        """The record path: check one record field by field; problems name its line."""
        place = where(fmt.METRICS, rec)
        rec = dict(rec)
        step = rec.pop("step", None)
        seq = rec.pop("seq", None)
        ts = rec.pop("ts", None)
        rec.pop("_line", None)
        if len(rec) > MAX_KEYS_PER_RECORD:
            self.res.problem(f"{place}: the record has {len(rec)} metrics, and a record may "
                             f"have at most {MAX_KEYS_PER_RECORD}; skipped (log fewer "
                             "metrics per record)")
            return
        problem = fmt.validate_step(step)
        if problem:
            self.res.problem(f"{place}: {problem}; skipped")
            return
        if type(seq) is not int or not 0 <= seq < SEQ_LIMIT:
            self.res.problem(f"{place}: 'seq' must be an integer in 0..{SEQ_LIMIT - 1}")
            return
        # a missing or unusable wall time must not cost the record its metrics
        ts = finite(ts) or 0.0
        self.res.records += 1
        self.max_step = max(self.max_step, step)
        self.max_ts = max(self.max_ts, ts)
        if ts:
            self.min_ts = min(self.min_ts, ts)
        points = self.res.points
        for key, raw in rec.items():
            value = to_float(raw)
            if value is None:
                what = ("an integer too large for a float" if type(raw) is int else
                        f"{type(raw).__name__} {preview(raw)!r}, not a number")
                self.res.problem(f"{place}: {key!r} is {what}; skipped")
                continue
            if key not in self.keys:
                problem = fmt.validate_key(key)
                if not problem and len(self.keys) >= MAX_KEYS_PER_RUN:
                    problem = (f"{key!r} is a new metric key, and the run has "
                               f"{MAX_KEYS_PER_RUN} metric keys, the most a run may have")
                if problem:
                    self.res.problem(f"{place}: {problem}; skipped")
                    continue
            self.rows.append((key_base(self._key_id(key)) + seq, step, ts, value))
            col = points.get(key)
            if col is None:
                col = points[key] = PointColumns([], [], [], [])
            col[0].append(seq)
            col[1].append(step)
            col[2].append(ts)
            col[3].append(value)

    def flush(self) -> None:
        """Store everything queued, then the key statistics and the run's progress."""
        conn = self.conn
        attempted = sum(len(c[0]) for c in self.res.points.values())
        stored = 0
        for sql, params in self.by_statement.items():
            points = len(params) * (len(params[0]) - 3)
            stored += _rowcount(conn.exec_driver_sql(sql, params), points)
        if self.rows and conn.dialect.name == "postgresql":
            stored += _rowcount(conn.exec_driver_sql(_PG_INSERT, _pg_columns(self.rows)),
                                len(self.rows))
        elif self.rows:  # SQLite (it stores a bound NaN as NULL)
            sql = insert_ignore_sql(s.metric_points, conn.dialect.name, conn.dialect)
            stored += _rowcount(conn.exec_driver_sql(sql, self.rows), len(self.rows))
        self.res.rows = stored
        if attempted:
            self._key_stats(exact=stored == attempted)
            # imported here: numpy is not every command's to pay for at start
            from runwatch.store.summaries import update_summaries

            update_summaries(conn, self.keys, self.res.points, exact=stored == attempted)
        if self.max_step >= 0:
            _advance_run(conn, self.run_pk, self.max_step, self.max_ts, self.first_ts())

    def first_ts(self) -> float:
        """The time of the earliest point that has one (else now): when the run started,
        if it is still QUEUED (runwatch.ingest.lifecycle.started_by_records)."""
        return self.min_ts if self.min_ts != math.inf else time.time()

    def _key_stats(self, exact: bool) -> None:
        """Each touched key's point count and newest stored (step, value)."""
        update_key_stats(self.conn, {self.keys[name]: len(cols.seqs)
                                     for name, cols in self.res.points.items()}, exact)


# PostgreSQL: every point of a call in one statement, the columns bound as four arrays (an
# executemany sends one statement per point, which cost most of a small batch's time).
_PG_INSERT = ("INSERT INTO metric_points (id, step, ts, value) SELECT * FROM "
              "unnest(%s::bigint[], %s::bigint[], %s::float8[], %s::float8[]) "
              "ON CONFLICT DO NOTHING")


# The same for several runs' points, answering (key id, points not stored) for each key whose
# points were not all new (bound: the keys' ids and how many points each was sent).
_PG_INSERT_COUNTED = (
    "WITH ins AS (INSERT INTO metric_points (id, step, ts, value) SELECT * FROM "
    "unnest(%s::bigint[], %s::bigint[], %s::float8[], %s::float8[]) "
    f"ON CONFLICT DO NOTHING RETURNING id >> {SEQ_BITS} AS kid), "
    "got AS (SELECT kid, count(*) AS n FROM ins GROUP BY kid) "
    "SELECT u.kid, u.n - coalesce(got.n, 0) FROM unnest(%s::bigint[], %s::bigint[]) "
    "AS u(kid, n) LEFT JOIN got USING (kid) WHERE got.n IS DISTINCT FROM u.n")
# Several runs' observed step and last update moved forward (never back), and a QUEUED
# one started, as _advance_run.
_PG_ADVANCE = (
    "UPDATE runs AS r SET "
    "observed_step = CASE WHEN r.observed_step IS NULL OR r.observed_step < u.step "
    "THEN u.step ELSE r.observed_step END, "
    "updated_at = CASE WHEN r.updated_at IS NULL OR r.updated_at < u.ts "
    "THEN u.ts ELSE r.updated_at END, "
    "status = CASE WHEN r.status = 'QUEUED' AND NOT EXISTS (SELECT 1 FROM events e "
    "WHERE e.run_pk = r.pk AND e.phase = 'QUEUED' AND e.ts > u.first) "
    "THEN 'RUNNING' ELSE r.status END, "
    "started_at = CASE WHEN (r.status = 'QUEUED' OR (r.status = 'PREPARING' AND "
    "r.started_at IS NULL)) AND NOT EXISTS (SELECT 1 FROM events e WHERE e.run_pk = r.pk "
    "AND e.phase = 'QUEUED' AND e.ts > u.first) THEN u.first ELSE r.started_at END "
    "FROM unnest(%s::integer[], %s::bigint[], %s::float8[], %s::float8[]) "
    "AS u(pk, step, ts, first) "
    "WHERE r.pk = u.pk AND (r.observed_step IS NULL OR r.observed_step < u.step "
    "OR r.updated_at IS NULL OR r.updated_at < u.ts OR r.status = 'QUEUED' "
    "OR (r.status = 'PREPARING' AND r.started_at IS NULL))")


def _pg_columns(rows: list[tuple[Any, ...]]) -> tuple[str, ...]:
    """Rows (id, step, ts, value) as four PostgreSQL array literals; NaN stored as NULL, as
    SQLite does. Text the server parses: psycopg binds a list item by item in Python
    (about 10 µs a point for the four columns), `str` and `repr` of a number are C."""
    ids, steps, tss, values = zip(*rows, strict=True)
    return (_array(map(str, ids)), _array(map(str, steps)), _array(map(repr, tss)),
            _array("NULL" if v != v else repr(v) for v in values))


def _array(items: Iterable[str]) -> str:
    # repr of a float is its shortest exact text (inf, -inf: PostgreSQL reads them too)
    return "{" + ",".join(items) + "}"


def _valid(cols: list[tuple[Any, ...]]) -> bool:
    """Columns (seq, step, ts, values...) with integer seq and step, finite float ts and
    number values (an int value must fit the 64 bits SQLite binds it in)."""
    seqs, steps, tss = cols[0], cols[1], cols[2]
    if not (_INT.issuperset(map(type, seqs)) and _INT.issuperset(map(type, steps))
            and _FLOAT.issuperset(map(type, tss)) and math.isfinite(sum(tss))):
        return False
    if min(steps) < 0 or max(steps) > fmt.MAX_STEP or min(seqs) < 0 or max(seqs) >= SEQ_LIMIT:
        return False
    for col in cols[3:]:
        types = set(map(type, col))
        if not _NUMERIC.issuperset(types):
            return False
        if int in types and not all(INT64_MIN <= v <= INT64_MAX
                                    for v in col if type(v) is int):
            return False
    return True


def _rowcount(result: Any, default: int) -> int:
    count = result.rowcount
    return int(count) if count is not None and count >= 0 else default


@lru_cache(maxsize=512)
def _record_sql(bases: tuple[int, ...]) -> str:
    """One statement storing every point of a record: ?1 seq, ?2 step, ?3 ts, ?4.. values."""
    values = ",".join(f"({base}+?1,?2,?3,?{i + 4})" for i, base in enumerate(bases))
    # OR IGNORE, not ON CONFLICT DO NOTHING: with the table's NOT NULL columns SQLite
    # runs a multi-row upsert about five times slower (measured on 3.40). The two differ
    # only on a NULL step or ts, which the caller has already ruled out.
    return f"INSERT OR IGNORE INTO metric_points (id, step, ts, value) VALUES {values}"


def _advance_statement() -> Update:
    r = s.runs.c
    max_step = bindparam("to_step", type_=r.observed_step.type)
    max_ts = bindparam("to_ts", type_=r.updated_at.type)
    first_ts = bindparam("first_ts", type_=r.started_at.type)
    step = case((or_(r.observed_step.is_(None), r.observed_step < max_step), max_step),
                else_=r.observed_step)
    ts = case((or_(r.updated_at.is_(None), r.updated_at < max_ts), max_ts), else_=r.updated_at)
    restored = predates_queueing(r.pk, first_ts)  # put back by a resume: they start nothing
    queued = and_(r.status == "QUEUED", ~restored)  # SET reads the row as it was
    starts = or_(queued, and_(r.status == "PREPARING", r.started_at.is_(None), ~restored))
    return update(s.runs).where(
        r.pk == bindparam("at_run"), or_(r.observed_step.is_(None), r.observed_step < max_step,
                                         r.updated_at.is_(None), r.updated_at < max_ts, starts)
    ).values(observed_step=step, updated_at=ts,
             status=case((queued, "RUNNING"), else_=r.status),
             started_at=case((starts, first_ts), else_=r.started_at))


# built once: made anew for each batch it cost more than running it (about 2 ms)
_ADVANCE = _advance_statement()


def _advance_run(conn: Connection, run_pk: int, max_step: int, max_ts: float,
                 first_ts: float) -> None:
    """The run's observed step and last update move forward, never back, and a run still
    QUEUED has started at `first_ts` (runwatch.ingest.lifecycle.started_by_records; one
    PREPARING with no start yet started then, and stays PREPARING): one statement that
    writes the row only when one of them moves."""
    conn.execute(_ADVANCE, {"at_run": run_pk, "to_step": max_step, "to_ts": max_ts,
                            "first_ts": first_ts})
