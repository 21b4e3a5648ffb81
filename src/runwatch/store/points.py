"""Where a metric point lives in `metric_points`: one integer id per (key, seq).

A point's id is `key_id * 2**SEQ_BITS + seq`. Metric keys belong to one run, so the
id says the run, the key and the record the point came from, and all points of a key
are one range of ids in seq order: a series is one range scan of the primary key.

Every read of `metric_points` is here: a key's points (`scan_points`, `read_points`),
the first of them, the keys' statistics after a write (`update_key_stats`), and the
points of all of a run's keys in a seq window (`run_points`, for live streams).
`PointColumns` is how new points travel from ingest to its hooks (the health engine,
the server's series cache).

Why not a (run_pk, key_id, seq) primary key: in SQLite an integer primary key is the
table's rowid, and inserting by rowid skips the composite-key comparisons and the
second B-tree of a WITHOUT ROWID table; with the ingest statement of
`runwatch.ingest.points` it more than halves the cost of storing a point (see
docs/benchmarks.md). PostgreSQL stores the same BIGINT key in an ordinary index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar
from typing import cast as cast_type

from sqlalchemy import BigInteger, Connection, Row, bindparam, cast, select

from runwatch.store import schema as s

SEQ_BITS = 36
# A record file may hold up to 2**36 (about 68.7 billion) records ...
SEQ_LIMIT = 1 << SEQ_BITS
# ... and an index up to 2**27 (about 134 million) metric keys, so ids fit 63 bits.
KEY_LIMIT = 1 << (63 - SEQ_BITS)
SEQ_MASK = SEQ_LIMIT - 1


T = TypeVar("T")
PointRow = tuple[int, int, float, float | None]  # seq, step, ts, value (None is NaN)


class PointColumns(NamedTuple):
    """New points of one metric key as columns, in seq order (a NaN value is NaN)."""

    seqs: list[int]
    steps: list[int]
    ts: list[float]
    values: list[float]


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
    """The highest seq stored for any of `key_ids` (one primary-key probe per key, one
    statement for up to 400 keys: SQLite caps a compound SELECT at 500 parts)."""
    ids = list(key_ids)
    m = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    best: int | None = None
    for i in range(0, len(ids), 400):
        chunk = ids[i:i + 400]
        sql = " UNION ALL ".join(
            f"SELECT MAX(id) FROM metric_points WHERE id BETWEEN {m} AND {m}" for _ in chunk)
        params = tuple(bound for kid in chunk for bound in id_range(kid))
        for (top,) in conn.exec_driver_sql(sql, params):
            if top is not None and (best is None or seq_of(int(top)) > best):
                best = seq_of(int(top))
    return best


def scan_points(conn: Connection, key_id: int, consume: Callable[[Iterable[Any]], T],
                after_seq: int = -1, *, with_ts: bool = True, null: float | None = None,
                step_min: int | None = None, step_max: int | None = None) -> T:
    """Hand `consume` the rows (seq, step, [ts,] value) of a key's points after
    `after_seq`, in seq order, straight from the driver's own cursor.

    For millions of points the driver's plain tuples are about twice as fast as
    SQLAlchemy rows, and numpy can read them without a Python object per row. A NULL
    value (NaN) comes as `null`.
    """
    m = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    low, high = id_range(key_id, after_seq)
    value = "value" if null is None else f"COALESCE(value, {null!r})"
    sql = (f"SELECT id - {key_id << SEQ_BITS}, step, {'ts, ' if with_ts else ''}{value} "
           f"FROM metric_points WHERE id BETWEEN {m} AND {m}")
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
        return consume(cast_type(Iterable[Any], cur))
    finally:
        cur.close()


def read_points(conn: Connection, key_id: int, after_seq: int = -1,
                step_min: int | None = None, step_max: int | None = None) -> list[PointRow]:
    """(seq, step, ts, value) of a key's points after `after_seq`, in seq order."""
    rows: list[PointRow] = scan_points(conn, key_id, list, after_seq,
                                       step_min=step_min, step_max=step_max)
    return rows


def first_point(conn: Connection, key_id: int) -> tuple[int, int]:
    """(seq, step) of a key's first point, or (-1, -1) when it has none."""
    p = s.metric_points.c
    row = conn.execute(select(p.id, p.step).where(in_key(p.id, key_id))
                       .order_by(p.id).limit(1)).first()
    return (-1, -1) if row is None else (seq_of(int(row.id)), int(row.step))


def update_key_stats(conn: Connection, added: dict[int, int], exact: bool) -> None:
    """Bring each key's count and newest stored (step, value) up to date after a write.

    `added` is how many points were written per key id. When every one was new
    (`exact`) the counts are added; otherwise they are counted again from the table.
    The newest point is read back, since a batch may arrive after one with higher seqs.
    One statement for all keys (a NaN value, stored as NULL, is a NULL last value).
    """
    if conn.dialect.name == "postgresql":
        _update_key_stats_pg(conn, added, exact)
        return
    m = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    newest = f"FROM metric_points WHERE id BETWEEN {m} AND {m} ORDER BY id DESC LIMIT 1"
    points = f"points + {m}" if exact else (
        f"(SELECT count(*) FROM metric_points WHERE id BETWEEN {m} AND {m})")
    sql = (f"UPDATE metric_keys SET points = {points}, last_step = (SELECT step {newest}), "
           f"last_value = (SELECT value {newest}) WHERE id = {m}")
    rows = []
    for kid, n in added.items():
        low, high = id_range(kid)
        rows.append((n if exact else low, *(() if exact else (high,)), low, high, low, high,
                     kid))
    if rows:
        conn.exec_driver_sql(sql, rows)


def _update_key_stats_pg(conn: Connection, added: dict[int, int], exact: bool) -> None:
    """update_key_stats in one statement on PostgreSQL: the keys bound as arrays (an
    executemany sends one statement per key)."""
    if not added:
        return
    newest = "FROM metric_points WHERE id BETWEEN u.lo AND u.hi ORDER BY id DESC LIMIT 1"
    points = "k.points + u.n" if exact else (
        "(SELECT count(*) FROM metric_points WHERE id BETWEEN u.lo AND u.hi)")
    kids = list(added)
    ranges = [id_range(kid) for kid in kids]
    conn.exec_driver_sql(
        f"UPDATE metric_keys AS k SET points = {points}, last_step = (SELECT step {newest}), "
        f"last_value = (SELECT value {newest}) FROM unnest(%s::bigint[], %s::bigint[], "
        "%s::bigint[], %s::bigint[]) AS u(id, n, lo, hi) WHERE k.id = u.id",
        ([*kids], [added[k] for k in kids], [lo for lo, _ in ranges],
         [hi for _, hi in ranges]))


def _run_points_statement() -> Any:
    # every key of the run, each a range of point ids (a key with nothing new costs one
    # index probe); one statement however many keys, with no list of them to bind
    p, k = s.metric_points.c, s.metric_keys.c
    base = cast(k.id, BigInteger) * SEQ_LIMIT  # BIGINT: PostgreSQL binds an INTEGER
    low, high = bindparam("low", type_=BigInteger), bindparam("high", type_=BigInteger)
    return (select(p.id, p.step, p.value)
            .select_from(s.metric_keys.join(s.metric_points,
                                            p.id.between(base + low, base + high)))
            .where(k.run_pk == bindparam("run_pk")))


_RUN_POINTS = _run_points_statement()  # built once: live streams run it several times a second


def run_points(conn: Connection, run_pk: int, after_seq: int, upto_seq: int
               ) -> Sequence[Row[Any, Any, Any]]:
    """(id, step, value) of every point of a run with after_seq < seq <= upto_seq.

    One statement reads every key, so a batch committed meanwhile is seen whole or not
    at all. The point id says the key and seq (`key_of`, `seq_of`).
    """
    low, high = max(after_seq + 1, 0), min(upto_seq, SEQ_MASK)
    return conn.execute(_RUN_POINTS, {"run_pk": run_pk, "low": low, "high": high}).all()
