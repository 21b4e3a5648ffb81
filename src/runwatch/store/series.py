"""A metric key's points as arrays in step order, read from the index.

The server downsamples and pages history from these arrays (its cache of them is
`runwatch.server.series_cache`). A series is brought up to date by reading only the
points stored after it (seq above its newest), so a live run costs its growth.

A step logged again (a run restored from a checkpoint) supersedes every point of
the same or later step logged before it, as the trainer's own record does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection

from runwatch.store.keys import KeyInfo
from runwatch.store.points import id_range, scan_points

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# NULL (NaN) values cross the driver as this sentinel so rows load straight into numpy.
_NULL = -1.7976931348623157e308
ROW = np.dtype([("seq", np.int64), ("step", np.int64), ("ts", np.float64),
                ("value", np.float64)])

# A thread that reads for nobody waiting (the server's start-up warming) gives way between
# pieces of this many rows of a long read: the driver gives up the interpreter at every
# row, so a whole 100,000-point read beside a request's own read made the two alternate
# row by row, and the request waited for the warming's series to end.
PAUSE_ROWS = 8192
_this_thread = threading.local()


@contextmanager
def pausing(give_way: Callable[[], None], every: int = PAUSE_ROWS) -> Iterator[None]:
    """Within the block, this thread's reads of a key's rows call `give_way` after each
    `every` rows (it returns when the thread may go on)."""
    before = getattr(_this_thread, "pause", None)
    _this_thread.pause = (give_way, every)
    try:
        yield
    finally:
        _this_thread.pause = before


@dataclass
class Series:
    """One key's points in step order, with superseded points removed; `ts` is the wall
    time each was logged (unix seconds)."""

    step: IntArray
    value: FloatArray
    ts: FloatArray
    loaded: int  # rows read from the index, superseded ones included
    max_seq: int
    first: tuple[int, int] = (-1, -1)  # (seq, step) of the first row: identifies the data

    @property
    def size(self) -> int:
        return int(self.step.size)


def read_series(conn: Connection, key_id: int) -> Series:
    """Every point of a key as a series."""
    return _from_rows(read_rows(conn, key_id, -1))


class IndexValues:
    """`runwatch.analysis.results.SeriesValues` over the index alone, for a process that
    holds no series (the command line's run detail): called with a key, its values, read
    whole; `stat(key, how)` is the least ("min"), greatest ("max") or sum ("sum") of its
    finite values (None when it has none), from its step summaries where they give
    exactly what the values would, so the detail of a long run reads no whole series."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def __call__(self, key: KeyInfo) -> FloatArray:
        return read_series(self.conn, key.id).value

    def stat(self, key: KeyInfo, how: str) -> float | None:
        # imported here: runwatch.store.summaries reads its points with this module
        from runwatch.store.summaries import finite_stats

        found = finite_stats(self.conn, key.id)  # None: the key has no summaries
        if found is not None:
            low, high, total = found
            if low is None or high is None:
                return None
            stat = low if how == "min" else high if how == "max" else total
            # summed in another order, a sum is the same only when every partial sum is
            # exact; and the sign of a zero may differ
            if stat != 0 and (how != "sum" or self._whole(key, max(-low, high))):
                return stat
        values = self(key)
        fin = values[np.isfinite(values)]
        if not fin.size:
            return None
        return float(fin.min() if how == "min" else fin.max() if how == "max" else fin.sum())

    def _whole(self, key: KeyInfo, largest: float) -> bool:
        """Whether every value of the key is a whole number, and `largest` (the greatest
        magnitude) times its point count below 2**53: then every partial sum, in any
        order, is a float exactly (one scan of its points by the database)."""
        if largest * key.points >= 2**53:
            return False
        m = "?" if self.conn.dialect.paramstyle == "qmark" else "%s"
        return self.conn.exec_driver_sql(
            f"SELECT 1 FROM metric_points WHERE id BETWEEN {m} AND {m} "
            "AND value <> ROUND(value) LIMIT 1", id_range(key.id)).first() is None


def extend_series(conn: Connection, key_id: int, old: Series) -> Series:
    """`old` (a series of `key_id`) with the points stored after it."""
    return _extend(old, read_rows(conn, key_id, old.max_seq))


def read_rows(conn: Connection, key_id: int, after_seq: int) -> npt.NDArray[np.void]:
    """(seq, step, ts, value) rows (`ROW`) of one key after `after_seq`, in seq order,
    from the driver's cursor; a NaN value is NaN."""

    pause: tuple[Callable[[], None], int] | None = getattr(_this_thread, "pause", None)

    def load(cur: Iterable[Any]) -> npt.NDArray[np.void]:
        if pause is None:
            return np.fromiter(cur, dtype=ROW)
        give_way, every = pause
        rows = iter(cur)
        parts = [np.fromiter(islice(rows, every), dtype=ROW)]
        while parts[-1].size == every:
            give_way()
            parts.append(np.fromiter(islice(rows, every), dtype=ROW))
        return np.concatenate(parts)

    rows = scan_points(conn, key_id, load, after_seq, null=_NULL)
    rows["value"][rows["value"] == _NULL] = np.nan
    return rows


def keep_mask(step: IntArray) -> npt.NDArray[np.bool_]:
    """Points (in seq order) not superseded by a later point of the same or an earlier step."""
    if step.size == 0:
        return np.ones(0, dtype=bool)
    later_min = np.minimum.accumulate(step[::-1])[::-1]
    keep = np.ones(step.size, dtype=bool)  # the last point: nothing comes after it
    # (a sentinel of int64's largest would drop a last point at step 2**63-1, a valid step)
    keep[:-1] = step[:-1] < later_min[1:]
    return keep


def _from_rows(rows: npt.NDArray[np.void]) -> Series:
    seq = rows["seq"]
    step = rows["step"]
    keep = keep_mask(step)
    max_seq = int(seq[-1]) if seq.size else -1
    first = (int(seq[0]), int(step[0])) if seq.size else (-1, -1)
    return Series(step[keep], rows["value"][keep], rows["ts"][keep], int(rows.size), max_seq,
                  first)


def _extend(old: Series, rows: npt.NDArray[np.void]) -> Series:
    new = _from_rows(rows)
    if new.loaded == 0:
        return old
    # drop old points superseded by the first new one (and so by all after it)
    first_step = int(rows["step"].min())
    cut = int(np.searchsorted(old.step, first_step, side="left"))
    return Series(
        np.concatenate([old.step[:cut], new.step]),
        np.concatenate([old.value[:cut], new.value]),
        np.concatenate([old.ts[:cut], new.ts]),
        old.loaded + new.loaded,
        new.max_seq,
        old.first if old.loaded else new.first,
    )
