"""Where a metric point lives in `metric_points`: one integer id per (key, seq).

A point's id is `key_id * 2**SEQ_BITS + seq`. Metric keys belong to one run, so the
id says the run, the key and the record the point came from, and all points of a key
are one range of ids in seq order: a series is one range scan of the primary key.

Why not a (run_pk, key_id, seq) primary key: in SQLite an integer primary key is the
table's rowid, and inserting by rowid skips the composite-key comparisons and the
second B-tree of a WITHOUT ROWID table; with the ingest statement of
`runwatch.ingest.records` it more than halves the cost of storing a point (see
docs/benchmarks.md). PostgreSQL stores the same BIGINT key in an ordinary index.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from sqlalchemy import Connection, func, select

from runwatch.store import schema as s

SEQ_BITS = 36
# A record file may hold up to 2**36 (about 68.7 billion) records ...
SEQ_LIMIT = 1 << SEQ_BITS
# ... and an index up to 2**27 (about 134 million) metric keys, so ids fit 63 bits.
KEY_LIMIT = 1 << (63 - SEQ_BITS)
SEQ_MASK = SEQ_LIMIT - 1


class PointIdError(ValueError):
    """A seq or key id that does not fit a point id."""


def key_base(key_id: int) -> int:
    """The id of a key's point at seq 0; its points are base .. base + SEQ_MASK."""
    if not 0 < key_id < KEY_LIMIT:
        raise PointIdError(f"metric key id {key_id} is outside 1..{KEY_LIMIT - 1}: this index "
                           "holds more metric keys than it can address; start a new index "
                           "(--db) for new runs")
    return key_id << SEQ_BITS


def seq_of(point: int) -> int:
    return point & SEQ_MASK


def key_of(point: int) -> int:
    return point >> SEQ_BITS


def id_range(key_id: int, after_seq: int = -1, upto_seq: int | None = None) -> tuple[int, int]:
    """Inclusive (low, high) ids of `key_id`'s points with after_seq < seq <= upto_seq."""
    base = key_id << SEQ_BITS
    high = SEQ_MASK if upto_seq is None else min(upto_seq, SEQ_MASK)
    return base + max(after_seq + 1, 0), base + high


def in_key(column: Any, key_id: int, after_seq: int = -1, upto_seq: int | None = None) -> Any:
    """`column BETWEEN low AND high` for the points of one key (a range of the primary key)."""
    low, high = id_range(key_id, after_seq, upto_seq)
    return column.between(low, high)


def newest_seq(conn: Connection, key_ids: Iterable[int]) -> int | None:
    """The highest seq stored for any of `key_ids` (one index probe per key)."""
    p = s.metric_points.c
    best: int | None = None
    for kid in key_ids:
        top = conn.execute(select(func.max(p.id)).where(in_key(p.id, kid))).scalar()
        if top is not None and (best is None or seq_of(top) > best):
            best = seq_of(int(top))
    return best


def read_points(conn: Connection, key_id: int, after_seq: int = -1,
                step_min: int | None = None, step_max: int | None = None
                ) -> list[tuple[int, int, float, float | None]]:
    """(seq, step, ts, value) of a key's points after `after_seq`, in seq order.

    Read with the driver's own cursor: for millions of points that is about twice as
    fast as SQLAlchemy rows. A NULL value is NaN.
    """
    m = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    low, high = id_range(key_id, after_seq)
    sql = (f"SELECT id - {key_id << SEQ_BITS}, step, ts, value FROM metric_points "
           f"WHERE id BETWEEN {m} AND {m}")
    params: list[int] = [low, high]
    if step_min is not None:
        sql += f" AND step >= {m}"
        params.append(step_min)
    if step_max is not None:
        sql += f" AND step <= {m}"
        params.append(step_max)
    cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cur.execute(sql + " ORDER BY id", params)
        return cast(list[tuple[int, int, float, float | None]], cur.fetchall())
    finally:
        cur.close()
