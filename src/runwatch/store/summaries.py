"""Step summaries of metric series, so a whole series is read from a few thousand rows.

A summarised key has, for each level from its `base` up, the buckets of 2**level steps
(bucket = step >> level) that are closed, i.e. that a later point lies beyond: each
with its point count, min, max and last point (step, seq, wall time, value). Tables:
`metric_summaries` and `metric_summary_state` (runwatch.store.schema).

Writing (`update_summaries`, in the ingest transaction that stores the points): a key
is summarised once it has SUMMARY_MIN_POINTS points, with a base level whose buckets
hold about POINTS_PER_BUCKET points then. Each bucket is written once, when it closes:
the base level from the points, each level above from the two buckets below it. A
point that does not simply follow the summarised ones (a step logged again below the
frontier, as a restored run does; a seq at or below the summarised ones; a batch
whose points were partly stored already) makes the key be summarised again from its
points (`rebuild`). A key of an index made before summaries existed is summarised on
the first read of its whole series (`ensure_summaries`) or when its next points arrive.

Packing: the buckets of a level come in chunks of 2**CHUNK_BITS. A chunk whose every
bucket is closed is stored as one row of `metric_summary_packs` (its buckets as packed
little-endian records), the open chunk's buckets as rows of `metric_summaries`; so a
whole series crosses the driver as a few blobs and at most a chunk of rows a level,
not a row a bucket (the driver's cost is per row and column).

Reading (`read_units`): the buckets of one level plus the points after its last one, as
`Units` that `runwatch.analysis.downsample.reduce_units` turns into the same buckets
the points themselves give with aligned edges.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, delete, insert, select, update

from runwatch.analysis.downsample import Downsampled, Edges, Units, reduce_units
from runwatch.store import schema as s
from runwatch.store.points import SEQ_BITS, PointColumns, id_range
from runwatch.store.series import ROW, keep_mask, read_rows

# a key is summarised from this many points on (fewer are read whole in no time)
SUMMARY_MIN_POINTS = 64
# the base level's buckets hold about this many points when the key is first summarised
POINTS_PER_BUCKET = 16
MIN_BASE = 4
MAX_LEVEL = 62
# levels stored: base, base + LEVEL_STEP, ...; a read of level L uses the stored level at
# or below it (at most 2**LEVEL_STEP rows a bucket); every other level stores a third
# fewer rows than every level
LEVEL_STEP = 2

# a pack holds the buckets of one chunk of 2**CHUNK_BITS buckets of a level
CHUNK_BITS = 6

_NULL = -1.7976931348623157e308  # NULL (NaN) crosses the driver as this, as in store.series
# little-endian explicitly: a bucket of a pack is stored as this record
_FIELDS: list[tuple[str, Any]] = [
    ("bucket", "<i8"), ("n", "<i8"), ("last_step", "<i8"), ("last_seq", "<i8"),
    ("last_ts", "<f8"), ("min", "<f8"), ("max", "<f8"), ("last", "<f8")]
_NAMES = [name for name, _ in _FIELDS]
_LEVEL = np.dtype(_FIELDS)
_SELECT = ("bucket, n, last_step, last_seq, last_ts, "
           f"COALESCE(min, {_NULL!r}), COALESCE(max, {_NULL!r}), COALESCE(last, {_NULL!r})")
_TAIL = np.dtype([("key_id", np.int64), *ROW.descr])
_PART_ROW = np.dtype([("part", np.int64), *_FIELDS])
_ROW_OUT = np.dtype([("key_id", np.int64), ("level", np.int64), *_FIELDS])
_COLUMNS = ("key_id", "level", "bucket", "n", "last_step", "last_seq", "last_ts", "min",
            "max", "last")

Rows = npt.NDArray[np.void]


@dataclass(frozen=True)
class State:
    """Where a summarised key stands (a row of metric_summary_state)."""

    base: int
    frontier: int  # every step below is in the stored buckets
    last_seq: int  # seq of the last point below the frontier (-1: none)
    first_step: int
    # of the finite values below the frontier: least, greatest (None: none) and sum
    fin_min: float | None = None
    fin_max: float | None = None
    fin_sum: float = 0.0


def summary_states(conn: Connection, key_ids: Iterable[int]) -> dict[int, State]:
    """The state of each summarised key among `key_ids`."""
    ids = list(key_ids)
    if not ids:
        return {}
    c = s.metric_summary_state.c
    rows = conn.execute(select(c.key_id, c.base, c.frontier, c.last_seq, c.first_step,
                               c.fin_min, c.fin_max, c.fin_sum).where(c.key_id.in_(ids)))
    return {r.key_id: State(r.base, r.frontier, r.last_seq, r.first_step, r.fin_min, r.fin_max,
                            r.fin_sum) for r in rows}


def finite_stats(conn: Connection, key_id: int) -> tuple[float | None, float | None, float] | None:
    """The least, greatest and sum of a summarised key's finite values (None when the key
    is not summarised): its state's, with the points after the frontier."""
    state = summary_states(conn, [key_id]).get(key_id)
    if state is None:
        return None
    tail = read_rows(conn, key_id, state.last_seq)
    return _finite(tail[keep_mask(tail["step"])]["value"], state)


def _finite(values: npt.NDArray[np.float64], state: State | None = None
            ) -> tuple[float | None, float | None, float]:
    """(least, greatest, sum) of the finite `values`, with `state`'s."""
    fin = values[np.isfinite(values)]
    lows: list[float] = [float(fin.min())] if fin.size else []
    highs: list[float] = [float(fin.max())] if fin.size else []
    if state is not None and state.fin_min is not None and state.fin_max is not None:
        lows.append(state.fin_min)
        highs.append(state.fin_max)
    return (min(lows) if lows else None, max(highs) if highs else None,
            _bounded(_bounded(float(fin.sum())) + (state.fin_sum if state else 0.0)))


# the largest finite double: a sum of finite values past it is held there
_LARGEST = float(np.finfo(np.float64).max)


def _bounded(total: float) -> float:
    """A running sum kept finite: one that overflowed stays at the largest double of its
    sign, and one that overflowed both ways (values near ±1.8e308) is 0, so the stored
    sum is never NaN (metric_summary_state.fin_sum is NOT NULL: a NaN there, stored as
    NULL, failed the pass and left the run unindexed). Such a sum is no true total, but
    no double holds that."""
    if math.isnan(total):
        return 0.0
    return max(-_LARGEST, min(_LARGEST, total))


# --- reading ---

def stored_level(state: State, level: int) -> int | None:
    """The stored level whose buckets make up buckets of `level` (None: finer than the
    key's base)."""
    if level < state.base:
        return None
    return state.base + (level - state.base) // LEVEL_STEP * LEVEL_STEP


@dataclass(frozen=True)
class UnitsRead:
    """One key's series to read as units (`read_units`): its state and the stored level."""

    key_id: int
    state: State
    level: int


# parts of one statement at most (SQLite's compound SELECT limit is 500)
_MAX_PARTS = 400


def read_units(conn: Connection, reads: list[UnitsRead], with_ts: bool = False,
               bands: bool = True) -> dict[int, Units]:
    """Keys' series as units, by key id: of each, the stored buckets of its `level` (a
    stored level) below the frontier of its `state`, the finer stored buckets up to the
    frontier, and the points after it (superseded ones removed). `with_ts`: the units'
    times too (else NaN); `bands=False`: no min and max are read (they are `last`).

    One statement reads the buckets of many keys and one their points after the frontier,
    rather than two a key; the rows cross the driver straight into arrays.
    Only what `state` covers is read from the buckets, so buckets a newer ingest wrote
    meanwhile are not counted twice: the points after `state`'s frontier cover them.
    """
    reads = list({r.key_id: r for r in reads}.values())  # a run named twice reads once
    parts: list[tuple[int, int, int, int]] = []  # key id, level, first and end bucket
    firsts: list[int] = []  # each read's first part: its parts follow in step order
    for r in reads:
        frontier = r.state.frontier
        firsts.append(len(parts))
        parts.append((r.key_id, r.level, 0, frontier >> r.level))
        for finer in range(r.level - LEVEL_STEP, r.state.base - 1, -LEVEL_STEP):
            parts.append((r.key_id, finer, (frontier >> (finer + LEVEL_STEP)) << LEVEL_STEP,
                          frontier >> finer))
    part, rows = _ranges(conn, parts)
    starts = np.searchsorted(part, [*firsts, len(parts)])
    tails = _tails(conn, [(r.key_id, r.state.last_seq) for r in reads])
    points = _by_key(tails["key_id"], [r.key_id for r in reads])
    # every key's buckets then its points kept, in one index over the buckets and the
    # points; each column is gathered once and each key's units are slices of it (a
    # concatenation per key and column cost more than the read's numpy work besides)
    pieces: list[npt.NDArray[np.int64]] = []
    ends = [0]
    for i, r in enumerate(reads):
        span = points[r.key_id]
        kept = np.flatnonzero(keep_mask(tails["step"][span])) + (span.start + rows.size)
        pieces += [np.arange(starts[i], starts[i + 1]), kept]
        ends.append(ends[-1] + int(starts[i + 1] - starts[i]) + kept.size)
    at = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
    value = tails["value"]

    def column(bucket: npt.NDArray[Any], point: npt.NDArray[Any]) -> npt.NDArray[Any]:
        return np.concatenate([bucket, point])[at]

    last = column(rows["last"], value)
    step = column(rows["last_step"], tails["step"])
    n = column(rows["n"], np.ones(tails.size, dtype=np.int64))
    low = column(rows["min"], value) if bands else last
    high = column(rows["max"], value) if bands else last
    ts = column(rows["last_ts"] if with_ts else np.full(rows.size, np.nan), tails["ts"])
    return {r.key_id: Units(step=step[a:b], n=n[a:b], min=low[a:b], max=high[a:b],
                            last=last[a:b], ts=ts[a:b])
            for r, a, b in zip(reads, ends, ends[1:], strict=False)}


def reduce_reads(series: list[Units], edges: Edges) -> list[Downsampled]:
    """`reduce_units` of each of several series over the same `edges`, in one pass over
    all their units (the overlay's 200 series: 8 ms, against 60 ms a series at a time at
    load 5); each result is the one `reduce_units` gives. A unit before the first edge is
    in the first bucket and one past the last in the last, as there."""
    counts = np.array([u.step.size for u in series], dtype=np.int64)
    if not series or not counts.sum():
        return [reduce_units(u, edges) for u in series]
    step = np.concatenate([u.step for u in series])
    # a unit's bucket as `reduce_units` finds it: the edges at or below its step
    bounds = edges.lo + edges.width * np.arange(1, edges.buckets)
    bucket = np.searchsorted(bounds, step, side="right")
    owner = np.repeat(np.arange(len(series), dtype=np.int64), counts)
    group = owner * edges.buckets + bucket  # non-decreasing: each series is in step order
    starts = np.flatnonzero(np.diff(group, prepend=-1))
    ends = np.append(starts[1:], group.size) - 1
    with np.errstate(invalid="ignore"):
        lo_v = np.fmin.reduceat(np.concatenate([u.min for u in series]), starts)
        hi_v = np.fmax.reduceat(np.concatenate([u.max for u in series]), starts)
    last = np.concatenate([u.last for u in series])[ends]
    ts = np.concatenate([u.ts for u in series])[ends]
    cut = np.searchsorted(owner[starts], np.arange(len(series) + 1))
    out = []
    for i, u in enumerate(series):
        a, b = int(cut[i]), int(cut[i + 1])
        end = ends[a:b]
        out.append(Downsampled(False, u.count, step[end], last[a:b], lo_v[a:b], hi_v[a:b],
                               ts[a:b]))
    return out


def _tails(conn: Connection, after: list[tuple[int, int]]) -> Rows:
    """The points of each (key id, seq) after that seq (superseded ones included), as
    `_TAIL` rows in (key id, seq) order: one primary-key range per key, many a statement."""
    if _sqlite(conn) and after:
        # json_each has columns id and value too: the points' are named by their table
        sql = (f"SELECT m.id >> {SEQ_BITS}, m.id & {(1 << SEQ_BITS) - 1}, m.step, m.ts, "
               f"{_value('m.value')} FROM json_each(?) AS p CROSS JOIN metric_points AS m "
               f"WHERE m.id BETWEEN {_PART.format(0)} AND {_PART.format(1)} ORDER BY 1, 2")
        ranges = [list(id_range(kid, seq)) for kid, seq in after]
        return _query(conn, sql, [json.dumps(ranges)], _TAIL)
    chunks = []
    for i in range(0, len(after), _MAX_PARTS):
        chunk = after[i:i + _MAX_PARTS]
        sql = " UNION ALL ".join(
            f"SELECT id >> {SEQ_BITS}, id & {(1 << SEQ_BITS) - 1}, step, ts, "
            f"{_value('value')} FROM metric_points WHERE id BETWEEN {{m}} AND {{m}}"
            for _ in chunk)
        params = [bound for kid, seq in chunk for bound in id_range(kid, seq)]
        chunks.append(_query(conn, f"{sql} ORDER BY 1, 2", params, _TAIL))
    return np.concatenate(chunks) if chunks else np.empty(0, dtype=_TAIL)


def _by_key(key_ids: npt.NDArray[np.int64], wanted: list[int]) -> dict[int, slice]:
    """The slice of each wanted key's rows in rows sorted by key id (`key_ids`: their key
    id column)."""
    column = np.ascontiguousarray(key_ids)  # a field of rows: searched once, not per key
    lo = np.searchsorted(column, wanted, side="left")
    hi = np.searchsorted(column, wanted, side="right")
    return {k: slice(int(a), int(b)) for k, a, b in zip(wanted, lo, hi, strict=True)}


def ensure_summaries(conn: Connection, key_id: int) -> State | None:
    """Summarise a key that has no summaries yet (an index made before them), in the
    caller's transaction; its state, or None when it is too short to summarise.

    The first statement locks the key's row (and in SQLite takes the write lock), so an
    ingest of the same key waits, and a second caller finds the first one's work.
    """
    k = s.metric_keys.c
    conn.execute(update(s.metric_keys).where(k.id == key_id).values(points=k.points))
    state = summary_states(conn, [key_id]).get(key_id)
    return state if state is not None else rebuild(conn, key_id)


# --- writing ---

def update_summaries(conn: Connection, key_ids: Mapping[str, int],
                     points: Mapping[str, PointColumns], exact: bool) -> None:
    """Bring the summaries of the keys in `points` (just stored, in seq order) up to date.

    `exact` says that every point was new to the index; otherwise the keys touched are
    summarised again from their points.
    """
    ids = {name: key_ids[name] for name in points if name in key_ids}
    if not ids:
        return
    states = summary_states(conn, ids.values())
    # only keys not summarised yet need their point count (one more statement per batch)
    fresh = [kid for kid in ids.values() if kid not in states]
    k = s.metric_keys.c
    counts = (dict(conn.execute(select(k.id, k.points).where(k.id.in_(fresh))).all())
              if fresh else {})
    plans: list[tuple[int, State, Rows]] = []
    batches = _Batches()
    for name, kid in ids.items():
        state = states.get(kid)
        if state is None:
            if (counts.get(kid) or 0) >= SUMMARY_MIN_POINTS:
                rebuild(conn, kid)
            continue
        batch = batches.rows(points[name])
        seqs, steps = batch["seq"], batch["step"]
        if (not exact or seqs[0] <= state.last_seq or bool(np.any(np.diff(seqs) <= 0))
                or int(steps.min()) < state.frontier):
            rebuild(conn, kid)
        elif _frontier(batch, state.base) > state.frontier:
            plans.append((kid, state, batch))
    if plans:
        _advance(conn, plans)


def rebuild(conn: Connection, key_id: int) -> State | None:
    """Summarise a key again from all its points; its new state (None: too few points)."""
    conn.execute(delete(s.metric_summaries).where(s.metric_summaries.c.key_id == key_id))
    conn.execute(delete(s.metric_summary_packs)
                 .where(s.metric_summary_packs.c.key_id == key_id))
    conn.execute(delete(s.metric_summary_state)
                 .where(s.metric_summary_state.c.key_id == key_id))
    rows = read_rows(conn, key_id, -1)
    rows = rows[keep_mask(rows["step"])]
    if rows.size < SUMMARY_MIN_POINTS:
        return None
    steps = rows["step"]
    spacing = max(float(steps[-1] - steps[0]) / (steps.size - 1), 1.0)
    base = min(max(math.ceil(math.log2(spacing * POINTS_PER_BUCKET)), MIN_BASE), MAX_LEVEL)
    frontier = (int(steps[-1]) >> base) << base
    below = rows[steps < frontier]
    state = State(base, frontier, int(below["seq"][-1]) if below.size else -1, int(steps[0]),
                  *_finite(below["value"]))
    levels = [(base, _base_buckets(below, base))]
    for level in range(base + LEVEL_STEP, MAX_LEVEL + 1, LEVEL_STEP):
        up = _parents(levels[-1][1])
        up = up[up["bucket"] < frontier >> level]
        if not up.size:
            break
        levels.append((level, up))
    _store(conn, [(key_id, 0, frontier, levels)])
    conn.execute(insert(s.metric_summary_state).values(
        key_id=key_id, base=state.base, frontier=state.frontier, last_seq=state.last_seq,
        first_step=state.first_step, fin_min=state.fin_min, fin_max=state.fin_max,
        fin_sum=state.fin_sum))
    return state


def _advance(conn: Connection, plans: list[tuple[int, State, Rows]]) -> None:
    """Write the buckets the new points closed, for keys whose points simply follow."""
    writes: list[_Write] = []
    states: list[tuple[Any, ...]] = []
    for kid, state, batch in plans:
        old, new = state.frontier, _frontier(batch, state.base)
        # points after the frontier stored by earlier batches, then this batch's
        low, high = id_range(kid, state.last_seq, int(batch["seq"][0]) - 1)
        stored = _query(conn, f"SELECT id - {kid << SEQ_BITS}, step, ts, {_value('value')} "
                        "FROM metric_points WHERE id BETWEEN {m} AND {m} ORDER BY id",
                        [low, high], ROW)
        rows = np.concatenate([stored, batch]) if stored.size else batch
        rows = rows[keep_mask(rows["step"])]
        below = rows[rows["step"] < new]
        levels = [(state.base, _base_buckets(below, state.base))]
        siblings = _siblings(conn, kid, state.base, old, new)
        for level in range(state.base + LEVEL_STEP, MAX_LEVEL + 1, LEVEL_STEP):
            if new >> level <= old >> level:
                break
            children = levels[-1][1]
            left = siblings.get(level - LEVEL_STEP)
            if left is not None and left.size:
                children = np.concatenate([left, children])
            up = _parents(children)
            up = up[(up["bucket"] >= old >> level) & (up["bucket"] < new >> level)]
            levels.append((level, up))
        writes.append((kid, old, new, levels))
        states.append((new, int(below["seq"][-1]) if below.size else state.last_seq,
                       *_finite(below["value"], state), kid))
    _store(conn, writes)
    m = _marker(conn)
    conn.exec_driver_sql(f"UPDATE metric_summary_state SET frontier = {m}, last_seq = {m}, "
                         f"fin_min = {m}, fin_max = {m}, fin_sum = {m} WHERE key_id = {m}",
                         states)


def _siblings(conn: Connection, key_id: int, base: int, old: int, new: int
              ) -> dict[int, Rows]:
    """The stored left siblings of the first parent each stored level above `base`
    closes as the frontier moves from `old` to `new` (closed before it moved), by the
    level of the siblings."""
    wanted: list[tuple[int, int, int]] = []  # child level, first and end bucket
    for level in range(base + LEVEL_STEP, MAX_LEVEL + 1, LEVEL_STEP):
        if new >> level <= old >> level:
            break
        child = level - LEVEL_STEP
        first, end = (old >> level) << LEVEL_STEP, old >> child
        if end > first:
            wanted.append((child, first, end))
    part, rows = _ranges(conn, [(key_id, *w) for w in wanted])
    spans = _spans(part, len(wanted))
    return {child: rows[span] for (child, *_), span in zip(wanted, spans, strict=True)}


def _ranges(conn: Connection, parts: list[tuple[int, int, int, int]]
            ) -> tuple[npt.NDArray[np.int64], Rows]:
    """The buckets in each (key id, level, first bucket, end bucket) part, in (part,
    bucket) order: the index of each one's part, and the buckets (`_LEVEL`). They come
    from the packs of the closed chunks a part overlaps and the rows of its open chunk.
    One primary-key range a part, many parts a statement (an OR of ranges scans every
    bucket of the key in SQLite).

    The rows are read before the packs, each statement its own snapshot: an ingest that
    packs a chunk between the two leaves its buckets in both (kept once), where packs
    read first found them in neither."""
    wanted = [(i, p) for i, p in enumerate(parts) if p[3] > p[2]]
    if not wanted:  # the usual batch of an ingest closes no chunk
        return np.zeros(0, dtype=np.int64), np.empty(0, dtype=_LEVEL)
    blobs: list[bytes] = []
    owners: list[int] = []  # the part of each blob
    loose: list[Rows] = [np.empty(0, dtype=_PART_ROW)]
    for rows_sql, packs_sql, params in _part_statements(conn, wanted):
        loose.append(_query(conn, rows_sql, params, _PART_ROW))
        for j, data in _fetch(conn, packs_sql, params):
            blobs.append(data)
            owners.append(j)
    part, buckets = _joined(blobs, owners, np.concatenate(loose))
    bucket = buckets["bucket"]
    bounds = np.array(parts, dtype=np.int64).reshape(-1, 4)  # key id, level, first, end
    inside = (bucket >= bounds[part, 2]) & (bucket < bounds[part, 3])
    if inside.all() and _ordered(part, bucket):
        return part, buckets  # as read: no copy, no sort (the usual case)
    pick = np.flatnonzero(inside)
    pick = pick[np.lexsort((bucket[pick], part[pick]))]
    # a bucket read as a row and again in its pack (packed between the two statements)
    again = np.flatnonzero((part[pick][1:] == part[pick][:-1])
                           & (bucket[pick][1:] == bucket[pick][:-1])) + 1
    pick = np.delete(pick, again)
    return part[pick], buckets[pick]


def _part_statements(conn: Connection, wanted: list[tuple[int, tuple[int, int, int, int]]]
                     ) -> Iterator[tuple[str, str, list[Any]]]:
    """The statements that read the (part, (key id, level, first, end)) `wanted`: the open
    chunks' rows and the packs, with their parameters. On SQLite one pair whose text never
    changes, the parts one JSON parameter, so SQLite prepares each once a connection (a
    compound SELECT of 400 parts took about 20 ms to prepare, each request: most of its
    cost); elsewhere a compound SELECT of up to `_MAX_PARTS` parts a statement."""
    if _sqlite(conn):
        spec = json.dumps([[j, kid, lv, first, end] for j, (kid, lv, first, end) in wanted])
        yield _JSON_ROWS, _JSON_PACKS, [spec]
        return
    for i in range(0, len(wanted), _MAX_PARTS):
        chunk = wanted[i:i + _MAX_PARTS]
        rows = " UNION ALL ".join(
            f"SELECT {j}, {_SELECT} FROM metric_summaries WHERE key_id = {{m}} AND level = {lv} "
            f"AND bucket >= {first} AND bucket < {end}" for j, (_, lv, first, end) in chunk)
        packs = " UNION ALL ".join(
            f"SELECT {j}, data FROM metric_summary_packs WHERE key_id = {{m}} AND level = {lv} "
            f"AND chunk >= {first >> CHUNK_BITS} AND chunk <= {(end - 1) >> CHUNK_BITS}"
            for j, (_, lv, first, end) in chunk)
        yield rows, packs, [kid for _, (kid, *_) in chunk]


def _joined(blobs: list[bytes], owners: list[int], rows: Rows
            ) -> tuple[npt.NDArray[np.int64], Rows]:
    """The packs' blobs and the rows (`_PART_ROW`) as one `_LEVEL` array, part by part, a
    part's packs (as read: in chunk order) before its rows (in bucket order), so that what
    was read is usually in (part, bucket) order already; and each bucket's part. The blobs
    are joined once and read as one array (a structured array per blob costs more)."""
    level = np.empty(rows.size, dtype=_LEVEL)
    for name in _NAMES:
        level[name] = rows[name]
    order = np.argsort(rows["part"], kind="stable")
    row_part, level = rows["part"][order], level[order]
    cuts = np.flatnonzero(np.diff(row_part)) + 1
    pieces = [(j, b) for j, b in zip(owners, blobs, strict=True)]
    pieces += [(int(g[0]), rs.tobytes()) for g, rs in zip(np.split(row_part, cuts),
                                                          np.split(level, cuts), strict=True)
               if g.size]
    pieces.sort(key=lambda piece: piece[0])  # stable: a part's packs stay before its rows
    buckets = np.frombuffer(b"".join(b for _, b in pieces), dtype=_LEVEL)
    part = np.repeat(np.asarray([j for j, _ in pieces], dtype=np.int64),
                     [len(b) // _LEVEL.itemsize for _, b in pieces])
    return part, buckets


def _ordered(part: npt.NDArray[np.int64], bucket: npt.NDArray[np.int64]) -> bool:
    """Whether (part, bucket) strictly rises throughout (no bucket twice in a part)."""
    return bool(np.all((part[1:] > part[:-1])
                       | ((part[1:] == part[:-1]) & (bucket[1:] > bucket[:-1]))))


def _spans(part: npt.NDArray[np.int64], count: int) -> list[slice]:
    """The slice of each of `count` parts' buckets (`part`: each bucket's, sorted)."""
    bounds = np.searchsorted(part, np.arange(count + 1)).tolist()
    return [slice(a, b) for a, b in pairwise(bounds)]


def _fetch(conn: Connection, sql: str, params: list[Any]) -> list[Any]:
    """The rows of `sql` ({m} is the driver's marker) as the driver gives them."""
    cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cur.execute(sql.replace("{m}", _marker(conn)), params)
        return list(cur.fetchall())
    finally:
        cur.close()


# `_ranges` on SQLite: each part of the JSON parameter ([part, key id, level, first bucket,
# end bucket]) is one primary-key range (CROSS JOIN: the parts are the outer loop)
_PART = "json_extract(p.value, '$[{}]')"
_JSON_ROWS = (f"SELECT {_PART.format(0)}, {_SELECT} FROM json_each(?) AS p "
              "CROSS JOIN metric_summaries "
              f"WHERE key_id = {_PART.format(1)} AND level = {_PART.format(2)} "
              f"AND bucket >= {_PART.format(3)} AND bucket < {_PART.format(4)}")
_JSON_PACKS = (f"SELECT {_PART.format(0)}, data FROM json_each(?) AS p "
               "CROSS JOIN metric_summary_packs "
               f"WHERE key_id = {_PART.format(1)} AND level = {_PART.format(2)} "
               f"AND chunk >= {_PART.format(3)} >> {CHUNK_BITS} "
               f"AND chunk <= ({_PART.format(4)} - 1) >> {CHUNK_BITS}")


def _sqlite(conn: Connection) -> bool:
    return conn.dialect.name == "sqlite"


def _marker(conn: Connection) -> str:
    return "?" if conn.dialect.paramstyle == "qmark" else "%s"


def _value(column: str) -> str:
    return f"COALESCE({column}, {_NULL!r})"


def _query(conn: Connection, sql: str, params: list[Any], dtype: np.dtype[Any]) -> Rows:
    """Rows of `sql` ({m} is the driver's marker) straight from the driver's cursor into
    an array of `dtype`; a NULL (NaN) value, selected through `_value`, is NaN."""
    cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cur.execute(sql.replace("{m}", _marker(conn)), params)
        rows = np.fromiter(cast(Iterable[Any], cur), dtype=dtype)
    finally:
        cur.close()
    for name in ("min", "max", "last", "value"):
        if name in (dtype.names or ()):
            rows[name][rows[name] == _NULL] = np.nan
    return rows


def _frontier(batch: Rows, base: int) -> int:
    return (int(batch["step"][-1]) >> base) << base


class _Batches:
    """New points as ROW rows. The keys of a record share its seq, step and time, so their
    columns are usually equal lists: those are converted once."""

    def __init__(self) -> None:
        self._last: tuple[list[int], list[int], list[float], Rows] | None = None

    def rows(self, cols: PointColumns) -> Rows:
        last = self._last
        if last is not None and last[0] == cols.seqs and last[1] == cols.steps and (
                last[2] == cols.ts):
            rows = last[3].copy()
        else:
            rows = np.empty(len(cols.seqs), dtype=ROW)
            rows["seq"] = cols.seqs
            rows["step"] = cols.steps
            rows["ts"] = cols.ts
            self._last = (cols.seqs, cols.steps, cols.ts, rows.copy())
        rows["value"] = cols.values
        return rows


def _base_buckets(points: Rows, base: int) -> Rows:
    """Points (in step order) reduced to buckets of 2**base steps."""
    bucket = points["step"] >> base
    return _reduce(bucket, points["step"], np.ones(points.size, dtype=np.int64),
                   points["seq"], points["ts"], points["value"], points["value"],
                   points["value"])


def _parents(children: Rows) -> Rows:
    """Buckets of one stored level (in bucket order) merged into the next stored one."""
    c = children
    return _reduce(c["bucket"] >> LEVEL_STEP, c["last_step"], c["n"], c["last_seq"], c["last_ts"],
                   c["min"], c["max"], c["last"])


def _reduce(bucket: npt.NDArray[np.int64], last_step: npt.NDArray[np.int64],
            n: npt.NDArray[np.int64], last_seq: npt.NDArray[np.int64],
            last_ts: npt.NDArray[np.float64], mins: npt.NDArray[np.float64],
            maxs: npt.NDArray[np.float64], last: npt.NDArray[np.float64]) -> Rows:
    if bucket.size == 0:
        return np.empty(0, dtype=_LEVEL)
    starts = np.flatnonzero(np.concatenate(([True], bucket[1:] != bucket[:-1])))
    out = np.empty(starts.size, dtype=_LEVEL)
    ends = np.append(starts[1:], bucket.size) - 1
    out["bucket"] = bucket[starts]
    out["n"] = np.add.reduceat(n, starts)
    out["last_step"] = last_step[ends]
    out["last_seq"] = last_seq[ends]
    out["last_ts"] = last_ts[ends]
    with np.errstate(invalid="ignore"):
        out["min"] = np.fmin.reduceat(mins, starts)
        out["max"] = np.fmax.reduceat(maxs, starts)
    out["last"] = last[ends]
    return out


# a key's new buckets, as its frontier moves from `old` to `new`: (key id, old, new,
# [(level, buckets of that level in bucket order)]); old 0: nothing stored before
_Write = tuple[int, int, int, list[tuple[int, Rows]]]


def _store(conn: Connection, writes: list[_Write]) -> None:
    """Store new buckets: those of the chunks the move of the frontier closed as packs
    (with the buckets of those chunks stored as rows while they were open), the others as
    rows."""
    opening = [(kid, level, (old >> level) >> CHUNK_BITS << CHUNK_BITS, old >> level)
               for kid, old, new, levels in writes for level, _ in levels
               if (new >> level) >> CHUNK_BITS > (old >> level) >> CHUNK_BITS]
    part, earlier = _ranges(conn, opening)
    starts = {(kid, level): i for i, (kid, level, *_) in enumerate(opening)}
    spans = _spans(part, len(opening))
    packs: list[tuple[int, int, int, bytes]] = []
    params: list[tuple[Any, ...]] = []
    for kid, _, new, levels in writes:
        for level, rows in levels:
            at = starts.get((kid, level))
            if at is not None:
                rows = np.concatenate([earlier[spans[at]], rows])
            packs += _packs(kid, level, rows, (new >> level) >> CHUNK_BITS)
            params += _params(conn, kid, [(level, rows[rows["bucket"] >> CHUNK_BITS >= (
                new >> level) >> CHUNK_BITS])])
    _pack(conn, opening, packs)
    _insert(conn, params)


def _pack(conn: Connection, ranges: list[tuple[int, int, int, int]],
          packs: list[tuple[int, int, int, bytes]]) -> None:
    """Delete the rows in the (key id, level, first, end bucket) ranges, and store the
    packs (key id, level, chunk, data) that hold them now."""
    m = _marker(conn)
    if ranges:
        conn.exec_driver_sql(f"DELETE FROM metric_summaries WHERE key_id = {m} AND level = {m} "
                             f"AND bucket >= {m} AND bucket < {m}", ranges)
    if packs:
        conn.exec_driver_sql("INSERT INTO metric_summary_packs (key_id, level, chunk, data) "
                             f"VALUES ({m}, {m}, {m}, {m})", packs)


def _packs(key_id: int, level: int, rows: Rows, closed: int
           ) -> list[tuple[int, int, int, bytes]]:
    """The packs of the chunks below `closed` among a level's buckets (in bucket order)."""
    chunk = rows["bucket"] >> CHUNK_BITS
    rows, chunk = rows[chunk < closed], chunk[chunk < closed]
    if not rows.size:
        return []
    starts = np.flatnonzero(np.concatenate(([True], chunk[1:] != chunk[:-1])))
    ends = np.append(starts[1:], rows.size)
    return [(key_id, level, int(chunk[a]), rows[a:b].tobytes())
            for a, b in zip(starts, ends, strict=True)]


def repack(conn: Connection) -> None:
    """Move the buckets of every closed chunk from rows into packs (an index made before
    packs: migration 0008)."""
    states = {r.key_id: r for r in conn.execute(select(s.metric_summary_state))}
    parts = [(kid, level, 0, (state.frontier >> level) >> CHUNK_BITS << CHUNK_BITS)
             for kid, state in states.items()
             for level in range(state.base, MAX_LEVEL + 1, LEVEL_STEP)]
    for i in range(0, len(parts), _MAX_PARTS):
        chunk = [p for p in parts[i:i + _MAX_PARTS] if p[3] > 0]
        part, rows = _ranges(conn, chunk)
        packs = [pack for (kid, level, _, end), span in zip(chunk, _spans(part, len(chunk)),
                                                             strict=True)
                 for pack in _packs(kid, level, rows[span], end >> CHUNK_BITS)]
        _pack(conn, chunk, packs)


def unpack(conn: Connection) -> None:
    """Move every pack's buckets back into rows (migration 0008 going down)."""
    params: list[tuple[Any, ...]] = []
    for kid, level, data in conn.exec_driver_sql(
            "SELECT key_id, level, data FROM metric_summary_packs"):
        params += _params(conn, kid, [(level, np.frombuffer(data, dtype=_LEVEL))])
    _insert(conn, params)


def _params(conn: Connection, key_id: int, levels: list[tuple[int, Rows]]
            ) -> list[tuple[Any, ...]]:
    """INSERT parameters of a key's buckets (SQLite stores a bound NaN as NULL; PostgreSQL
    is told)."""
    total = sum(rows.size for _, rows in levels)
    out = np.empty(total, dtype=_ROW_OUT)
    at = 0
    for level, rows in levels:
        part = out[at:at + rows.size]
        part["key_id"] = key_id
        part["level"] = level
        for name in _NAMES:
            part[name] = rows[name]
        at += rows.size
    params = cast(list[tuple[Any, ...]], out.tolist())
    if conn.dialect.name != "sqlite":
        params = [(*r[:7], None if r[7] != r[7] else r[7], None if r[8] != r[8] else r[8],
                   None if r[9] != r[9] else r[9]) for r in params]
    return params


def _insert(conn: Connection, params: list[tuple[Any, ...]]) -> None:
    if params:
        m = _marker(conn)
        conn.exec_driver_sql(f"INSERT INTO metric_summaries ({', '.join(_COLUMNS)}) "
                             f"VALUES ({', '.join([m] * len(_COLUMNS))})", params)


# --- history pages (the union of several keys' steps) ---

def retained_count(conn: Connection, key_id: int, state: State) -> int:
    """How many points a summarised key's series holds (superseded points not counted)."""
    below = _ranges(conn, [(key_id, state.base, 0, state.frontier >> state.base)])[1]["n"].sum()
    tail = read_rows(conn, key_id, state.last_seq)
    return int(below) + int(np.count_nonzero(keep_mask(tail["step"])))


def step_window(conn: Connection, key_id: int, state: State, step_min: int, step_max: int
                ) -> Rows:
    """A key's points (`ROW`, in seq order) with step_min <= step <= step_max, for a key
    with no superseded point (seq order is step order): only the seqs between the base
    buckets around the window are scanned, not the key's every point."""
    base, end = state.base, state.frontier >> state.base
    first, last = min(step_min >> base, end), min(step_max >> base, end)
    near = 1 << CHUNK_BITS  # a chunk's width: past a wider gap the level is read further
    before = _ranges(conn, [(key_id, base, max(first - near, 0), first)])[1]
    if not before.size:
        before = _ranges(conn, [(key_id, base, 0, first)])[1]
    after = _ranges(conn, [(key_id, base, last, min(last + near, end))])[1]
    if not after.size:
        after = _ranges(conn, [(key_id, base, last, end)])[1]
    low, high = id_range(key_id, int(before["last_seq"][-1]) if before.size else -1,
                         int(after["last_seq"][0]) if after.size else None)
    return _query(conn, f"SELECT id - {key_id << SEQ_BITS}, step, ts, {_value('value')} "
                  "FROM metric_points WHERE id BETWEEN {m} AND {m} AND step >= {m} "
                  "AND step <= {m} ORDER BY id", [low, high, step_min, step_max], ROW)


def distinct_steps(conn: Connection, key_ids: list[int]) -> npt.NDArray[np.int64]:
    """Every step any of the keys logged, sorted, counted once (by the database: no row of
    a point crosses the driver)."""
    if not key_ids:
        return np.zeros(0, dtype=np.int64)
    parts = " UNION ".join("SELECT step FROM metric_points WHERE id BETWEEN {m} AND {m}"
                           for _ in key_ids)
    params = [bound for kid in key_ids for bound in id_range(kid)]
    return _query(conn, f"SELECT step FROM ({parts}) AS steps ORDER BY step", params,
                  np.dtype([("step", np.int64)]))["step"]
