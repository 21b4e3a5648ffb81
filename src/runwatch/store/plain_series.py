"""A metric key's whole series read over a plain DB-API connection (store/plain.Reader):
steps and values only, in step order, as store/series reads them with SQLAlchemy (a test
keeps the two equal); and series saved beside a SQLite index (`saved_folder`) for the
next comparison, the command line's (`runwatch runs compare`) and the server's
(GET /api/compare) alike: one set of files, checked against the index the same way. The
command line's first compare of two runs reads the second's in a forked process meanwhile
(`SavedSeries.read_ahead`)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from runwatch.store.plain import Key, Reader, connect_sqlite

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Pair = tuple[IntArray, FloatArray]
NO_POINTS: Pair = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))

# store/points.SEQ_BITS: a point's id is key_id * 2**36 + seq (a test keeps them equal).
SEQ_BITS = 36
# NULL (NaN) values cross the driver as this sentinel, as in store/series.
_NULL = -1.7976931348623157e308
_ROW = np.dtype([("step", np.int64), ("value", np.float64)])
_PAIR = np.dtype([("step", np.int64), ("a", np.float64), ("b", np.float64)])
# Series shorter than this are quick to read from the index and are not saved (as the
# server's series cache, server/series_cache.SAVE_MIN_POINTS).
SAVE_MIN_POINTS = 20_000


def saved_folder(index: Path) -> Path:
    """Where the series compared over the SQLite index file `index` are saved."""
    return index.parent / f"{index.stem}.compare"


def _id_range(key_id: int) -> tuple[int, int]:
    base = key_id << SEQ_BITS
    return base, base + (1 << SEQ_BITS) - 1


def read_series(db: Reader, key_id: int) -> Pair:
    """A key's points as (steps, values) in step order, a point superseded by a later one
    of the same or an earlier step left out (store/series.read_series without the wall
    times, which a third fewer columns makes quicker to read)."""
    cur = db.cursor(f"SELECT step, COALESCE(value, {_NULL!r}) FROM metric_points "
                    "WHERE id BETWEEN ? AND ? ORDER BY id", _id_range(key_id))
    try:
        rows = np.fromiter(cur, dtype=_ROW)
    finally:
        cur.close()
    keep = _kept(rows["step"])
    return np.ascontiguousarray(rows["step"][keep]), _nan(rows["value"][keep])


def read_pair(db: Reader, a: Key, b: Key) -> tuple[IntArray, FloatArray, FloatArray] | None:
    """Two keys logged in the same records (a run's loss and gradient norm, as trainers log
    them) read in one query, as (steps, values of a, values of b): a third fewer values
    cross the driver than reading each. None where their points are not one for one."""
    if a.points != b.points or a.id == b.id:
        return None
    low, high = _id_range(a.id)
    cur = db.cursor(f"SELECT p.step, COALESCE(p.value, {_NULL!r}), COALESCE(q.value, "
                    f"{_NULL!r}) FROM metric_points p JOIN metric_points q ON q.id = p.id + ? "
                    "WHERE p.id BETWEEN ? AND ? ORDER BY p.id",
                    ((b.id - a.id) << SEQ_BITS, low, high))
    try:
        rows = np.fromiter(cur, dtype=_PAIR)
    finally:
        cur.close()
    if rows.size != a.points:  # some point of one has none of the other at its record
        return None
    step, value_a, value_b = rows["step"], rows["a"], rows["b"]
    keep = _kept(step)
    return (np.ascontiguousarray(step[keep]), _nan(value_a[keep]), _nan(value_b[keep]))


def _kept(step: IntArray) -> npt.NDArray[np.bool_]:
    """The points (in seq order) before which no later point goes back to their step or
    earlier: a step logged again supersedes them (store/series.keep_mask)."""
    if not step.size:
        return np.ones(0, dtype=bool)
    later_min = np.minimum.accumulate(step[::-1])[::-1]
    return np.append(step[:-1] < later_min[1:], True)


def _nan(value: FloatArray) -> FloatArray:
    out = np.ascontiguousarray(value)
    out[out == _NULL] = np.nan
    return out


def _run_id(db: Reader, run_pk: int) -> str:
    found = db.rows("SELECT run_id FROM runs WHERE pk = ?", run_pk)
    return str(found[0][0]) if found else ""


def _nothing() -> None:
    pass


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _ends(db: Reader, key_id: int) -> list[int]:
    """(seq, step, value's 64 bits) of a key's first and last point: with the run's id and
    the key's name and count, what tells a saved series from the one the index holds now."""
    low, high = _id_range(key_id)
    out: list[int] = []
    for order in ("", " DESC"):
        found = db.rows(f"SELECT id, step, value FROM metric_points WHERE id BETWEEN ? AND ? "
                        f"ORDER BY id{order} LIMIT 1", low, high)
        if not found:
            out += [-1, -1, 0]
            continue
        seq, step, value = found[0]
        bits = np.array(np.nan if value is None else value, dtype=np.float64).view(np.int64)
        out += [int(seq) - low, int(step), int(bits)]
    return out


class SavedSeries:
    """Whole series saved beside a SQLite index (`folder`/RUNPK-KEYID.npz: steps, values,
    the run's id, the key's name, count and end points), so the next command reads one
    file per series instead of a row per point. A file is used only while the index holds
    the points it was saved from: the same run (its id: an index made again numbers runs
    and keys from 1 again), key, count, and first and last point with their values; the
    index stays the record."""

    def __init__(self, folder: Path | None, min_points: int | None = None) -> None:
        self.folder = folder
        self.min_points = SAVE_MIN_POINTS if min_points is None else min_points

    def get(self, db: Reader, run_pk: int, keys: list[Key]) -> dict[int, Pair]:
        """The series of each of a run's `keys`, by key id."""
        out: dict[int, Pair] = {}
        missing: list[tuple[Key, list[int]]] = []
        run_id = _run_id(db, run_pk) if any(self._path(run_pk, key) for key in keys) else ""
        for key in keys:
            meta = [key.points, *_ends(db, key.id)] if self._path(run_pk, key) else []
            saved = self._load(run_pk, run_id, key, meta)
            if saved is not None:
                out[key.id] = saved
            else:
                missing.append((key, meta))
        pair = read_pair(db, missing[0][0], missing[1][0]) if len(missing) == 2 else None
        if pair is not None:
            out[missing[0][0].id] = pair[0], pair[1]
            out[missing[1][0].id] = pair[0], pair[2]
        for key, meta in missing:
            if key.id not in out:
                out[key.id] = read_series(db, key.id)
            self._save(run_pk, run_id, key, meta, out[key.id])
        return out

    def _path(self, run_pk: int, key: Key) -> Path | None:
        if self.folder is None or key.points < self.min_points:
            return None
        return self.folder / f"{run_pk}-{key.id}.npz"

    def read_ahead(self, db: Reader, run_pk: int, keys: list[Key]) -> Callable[[], None]:
        """Start reading and saving the series of a run's `keys` that are to be saved and
        are not (or not as the index holds them now) in a process of their own, forked,
        over its own connection to the same SQLite index, while this one reads another
        run's; the function returned waits for it. `get` then loads the files it saved,
        or reads the index itself where it saved none, so the answer is the same either
        way. The first compare of two long runs reads them on two cores at once (their
        rows cross the driver at about a microsecond each, most of that compare's time).

        Only a process with no other thread forks (a server's request reads as before),
        and only on Linux."""
        if (self.folder is None or not sys.platform.startswith("linux")
                or not isinstance(db.conn, sqlite3.Connection)
                or threading.active_count() > 1):
            return _nothing
        index = next((str(r[2]) for r in db.rows("PRAGMA database_list") if r[1] == "main"),
                     "")
        run_id = _run_id(db, run_pk)
        stale = [key for key in keys if self._path(run_pk, key) is not None
                 and not self._holds(run_pk, run_id, key, [key.points, *_ends(db, key.id)])]
        if not index or not stale:
            return _nothing
        try:
            pid = os.fork()
        except OSError:
            return _nothing
        if pid == 0:  # the child: never back into the command's code
            code = 1
            try:
                conn = connect_sqlite(Path(index))
                try:
                    SavedSeries(self.folder, self.min_points).get(Reader(conn), run_pk, stale)
                finally:
                    conn.close()
                code = 0
            finally:
                os._exit(code)
        return lambda: _reap(pid)

    def _holds(self, run_pk: int, run_id: str, key: Key, meta: list[int]) -> bool:
        """Whether the file of `key` holds the series the index holds (by its `meta`)."""
        return self._load(run_pk, run_id, key, meta, check_only=True) is not None

    def _load(self, run_pk: int, run_id: str, key: Key, meta: list[int],
              check_only: bool = False) -> Pair | None:
        path = self._path(run_pk, key)
        if path is None or not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as f:
                if (str(f["run"]) == run_id and str(f["key"]) == key.key
                        and f["meta"].tolist() == meta):
                    return NO_POINTS if check_only else (f["step"], f["value"])
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):
            pass  # unreadable: read from the index and saved again
        return None

    def _save(self, run_pk: int, run_id: str, key: Key, meta: list[int], series: Pair
              ) -> None:
        path = self._path(run_pk, key)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # this process's and thread's own name: two commands may save one series at once
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            with open(tmp, "wb") as f:
                np.savez(f, step=series[0], value=series[1], run=np.array(run_id),
                         key=np.array(key.key), meta=np.array(meta, dtype=np.int64))
            os.replace(tmp, path)
        except OSError:
            return  # an optimisation: the index stays the record
