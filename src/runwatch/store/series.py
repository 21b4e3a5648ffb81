"""Metric series as arrays, read from the index and kept in a bounded in-memory cache.

The server downsamples and pages history from these arrays. A cached series is
brought up to date by reading only the points stored after it (seq above the
newest cached), so a live run costs its growth, not its length. With a `disk_dir`,
long series are also saved as .npz files, so a restarted server reads a run's
history from one file instead of row by row from the database.

A step logged again (a run restored from a checkpoint) supersedes every point of
the same or later step logged before it, as the trainer's own record does.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, Engine, select

from runwatch.store import schema as s
from runwatch.store.points import SEQ_BITS, id_range, in_key, seq_of

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# NULL (NaN) values cross the driver as this sentinel so rows load straight into numpy.
_NULL = -1.7976931348623157e308
_ROW = np.dtype([("seq", np.int64), ("step", np.int64), ("value", np.float64)])
DEFAULT_MAX_POINTS = 12_000_000
# Series shorter than this are quick to read from the database and are not saved.
SAVE_MIN_POINTS = 20_000


@dataclass(frozen=True)
class KeyInfo:
    """One metric key of a run, with the counts the ingest keeps current."""

    id: int
    key: str
    points: int
    last_step: int | None
    last_value: float | None


@dataclass
class Series:
    """One key's points in step order, with superseded points removed."""

    step: IntArray
    value: FloatArray
    loaded: int  # rows read from the index, superseded ones included
    max_seq: int
    first: tuple[int, int] = (-1, -1)  # (seq, step) of the first row: identifies the data

    @property
    def size(self) -> int:
        return int(self.step.size)


def default_disk_dir(engine: Engine) -> Path | None:
    """Where a SQLite index keeps its saved series: beside the database file."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return None
    path = Path(database)
    return path.parent / f"{path.stem}.series"


def run_keys(conn: Connection, run_pk: int) -> list[KeyInfo]:
    """The metric keys of a run, sorted by name."""
    k = s.metric_keys.c
    rows = conn.execute(
        select(k.id, k.key, k.points, k.last_step, k.last_value)
        .where(k.run_pk == run_pk).order_by(k.key)
    )
    return [KeyInfo(r.id, r.key, int(r.points or 0), r.last_step, r.last_value) for r in rows]


def _read_rows(conn: Connection, key_id: int, after_seq: int) -> npt.NDArray[np.void]:
    """(seq, step, value) rows of one key after `after_seq`, straight from the driver's cursor."""
    marker = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    low, high = id_range(key_id, after_seq)
    base = key_id << SEQ_BITS
    sql = (
        f"SELECT id - {base}, step, COALESCE(value, {_NULL!r}) FROM metric_points "
        f"WHERE id BETWEEN {marker} AND {marker} ORDER BY id"
    )
    # the DBAPI cursor yields plain tuples, which numpy reads without per-row Python objects
    cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cur.execute(sql, (low, high))
        return np.fromiter(cast(Iterable[tuple[int, int, float]], cur), dtype=_ROW)
    finally:
        cur.close()


def _keep_mask(step: IntArray) -> npt.NDArray[np.bool_]:
    """Points (in seq order) not superseded by a later point of the same or an earlier step."""
    if step.size == 0:
        return np.ones(0, dtype=bool)
    later_min = np.minimum.accumulate(step[::-1])[::-1]
    nxt = np.empty_like(later_min)
    nxt[:-1] = later_min[1:]
    nxt[-1] = np.iinfo(np.int64).max
    return step < nxt


def _from_rows(rows: npt.NDArray[np.void]) -> Series:
    seq = rows["seq"].astype(np.int64)
    step = rows["step"].astype(np.int64)
    value = rows["value"].astype(np.float64)
    value[value == _NULL] = np.nan
    keep = _keep_mask(step)
    max_seq = int(seq[-1]) if seq.size else -1
    first = (int(seq[0]), int(step[0])) if seq.size else (-1, -1)
    return Series(step[keep], value[keep], int(rows.size), max_seq, first)


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
        old.loaded + new.loaded,
        new.max_seq,
        old.first if old.loaded else new.first,
    )


def _first_row(conn: Connection, key_id: int) -> tuple[int, int]:
    p = s.metric_points.c
    row = conn.execute(select(p.id, p.step).where(in_key(p.id, key_id))
                       .order_by(p.id).limit(1)).first()
    return (-1, -1) if row is None else (seq_of(int(row.id)), int(row.step))


class SeriesCache:
    """Least-recently-used cache of series, bounded by the total number of points held."""

    def __init__(self, max_points: int = DEFAULT_MAX_POINTS, disk_dir: Path | None = None) -> None:
        self.max_points = max_points
        self.disk_dir = disk_dir
        self._items: OrderedDict[tuple[int, int], Series] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self._saved: dict[tuple[int, int], int] = {}  # rows loaded when last saved
        self._names: dict[tuple[int, int], str] = {}  # key names, for saving later

    def get(self, conn: Connection, run_pk: int, key: KeyInfo) -> Series:
        """The series of `key`, current as of `key.points` (read from metric_keys)."""
        ident = (run_pk, key.id)
        with self._lock:
            cached = self._items.get(ident)
            if cached is not None:
                self._items.move_to_end(ident)
        if cached is not None and cached.loaded >= key.points:
            return cached
        if cached is None and key.points >= SAVE_MIN_POINTS:
            cached = self._load(conn, run_pk, key)
        if cached is None:
            series = _from_rows(_read_rows(conn, key.id, -1))
        elif cached.loaded >= key.points:
            series = cached
        else:
            series = _extend(cached, _read_rows(conn, key.id, cached.max_seq))
        self._put(ident, series)
        self._save(ident, key, series)
        return series

    def _path(self, ident: tuple[int, int]) -> Path | None:
        return None if self.disk_dir is None else self.disk_dir / f"{ident[0]}-{ident[1]}.npz"

    def _load(self, conn: Connection, run_pk: int, key: KeyInfo) -> Series | None:
        """A saved series, if it is of this key and its data is still in the database."""
        path = self._path((run_pk, key.id))
        if path is None or not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as f:
                loaded, max_seq, first_seq, first_step = (int(x) for x in f["meta"])
                name = str(f["key"])
                series = Series(f["step"], f["value"], loaded, max_seq, (first_seq, first_step))
        except (OSError, ValueError, KeyError):
            return None
        # a rebuilt index can reuse ids: trust the file only for the same key and data
        if name != key.key or loaded > key.points or _first_row(conn, key.id) != (
                first_seq, first_step):
            return None
        self._saved[(run_pk, key.id)] = loaded
        return series

    def save_all(self) -> None:
        """Save every cached series that grew since it was saved (when the server stops)."""
        with self._lock:
            items = list(self._items.items())
        for ident, series in items:
            if series.loaded > self._saved.get(ident, 0) and self._names.get(ident):
                self._save(ident, self._names[ident], series, force=True)

    def _save(self, ident: tuple[int, int], key: KeyInfo | str, series: Series,
              force: bool = False) -> None:
        path = self._path(ident)
        last = self._saved.get(ident, 0)
        name = key if isinstance(key, str) else key.key
        self._names[ident] = name
        # a live series is saved again only once it has doubled, so writes stay rare
        if path is None or series.loaded < SAVE_MIN_POINTS or (
                not force and series.loaded < 2 * last):
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{threading.get_ident()}.tmp")
            with open(tmp, "wb") as f:
                np.savez(f, step=series.step, value=series.value, key=np.array(name),
                         meta=np.array([series.loaded, series.max_seq, *series.first]))
            os.replace(tmp, path)
            self._saved[ident] = series.loaded
        except OSError:
            return  # the cache on disk is an optimisation; the database stays the record

    def _put(self, ident: tuple[int, int], series: Series) -> None:
        with self._lock:
            old = self._items.pop(ident, None)
            if old is not None:
                self._held -= old.size
            self._items[ident] = series
            self._held += series.size
            while self._held > self.max_points and len(self._items) > 1:
                _, dropped = self._items.popitem(last=False)
                self._held -= dropped.size

    def warm(self, conn: Connection, run_pk: int, keys: Iterable[str]) -> None:
        """Bring the named keys of a run up to date (the indexer calls this as it stores points)."""
        wanted = set(keys)
        for info in run_keys(conn, run_pk):
            if info.key in wanted:
                self.get(conn, run_pk, info)

    def forget_run(self, run_pk: int) -> None:
        """Drop every cached series of a run (after its metrics were cleared)."""
        with self._lock:
            for ident in [i for i in self._items if i[0] == run_pk]:
                self._held -= self._items.pop(ident).size
        if self.disk_dir is not None and self.disk_dir.is_dir():
            for path in self.disk_dir.glob(f"{run_pk}-*.npz"):
                path.unlink(missing_ok=True)
            self._saved = {i: n for i, n in self._saved.items() if i[0] != run_pk}

    @property
    def held_points(self) -> int:
        return self._held
