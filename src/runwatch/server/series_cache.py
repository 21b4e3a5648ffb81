"""The server's bounded in-memory cache of metric series (`runwatch.store.series`).

A cached series is brought up to date by reading only the points stored after it,
so a live run costs its growth, not its length. With a `disk_dir`, long series are
also saved as .npz files, so a restarted server reads a run's history from one file
instead of row by row from the database; a file is used only for the same run (its id),
key and first point, so an index made again (runs and keys numbered from 1 again) does
not take an old run's file for a new one.

The series a comparison reads (GET /api/compare) are not this cache's: they are read
through `compared` (store/plain_series.SavedSeries), the files `runwatch runs compare`
reads and saves beside the index, so the server and the command line share one set of
saved compared series, checked against the index the same way.
"""

from __future__ import annotations

import contextlib
import os
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, Engine, select

from runwatch.store import schema as s
from runwatch.store.keys import KeyInfo, run_keys
from runwatch.store.plain_series import SavedSeries, saved_folder
from runwatch.store.points import first_point
from runwatch.store.series import Series, extend_series, read_series
from runwatch.store.summaries import finite_stats

DEFAULT_MAX_POINTS = 12_000_000
# Series shorter than this are quick to read from the database and are not saved.
SAVE_MIN_POINTS = 20_000


def default_disk_dir(engine: Engine) -> Path | None:
    """Where a SQLite index keeps its saved series: beside the database file."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return None
    path = Path(database)
    return path.parent / f"{path.stem}.series"


class SeriesCache:
    """Least-recently-used cache of series, bounded by the total number of points held."""

    def __init__(self, max_points: int = DEFAULT_MAX_POINTS, disk_dir: Path | None = None,
                 summaries: bool = True) -> None:
        self.max_points = max_points
        self.compared = SavedSeries(None)
        self.disk_dir = disk_dir
        # whole series are read from the index's step summaries (routes_metrics); False
        # reads every point as before them (the benchmark's side-by-side figure)
        self.summaries = summaries
        self._items: OrderedDict[tuple[int, int], Series] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self._saved: dict[tuple[int, int], int] = {}  # rows loaded when last saved
        # the run's id and the key's name of each series, for saving later
        self._names: dict[tuple[int, int], tuple[str, str]] = {}
        self._run_ids: dict[int, str] = {}
        # moved by `clear`: a series read from the index before it was made again (a
        # request under way then) is not kept, since its run's pk may be another run's now
        self._generation = 0

    def clear(self) -> None:
        """Forget every series, held and saved (the index was made again: its runs and
        keys are numbered anew, and a series of an old pk would be shown for a new run)."""
        with self._lock:
            self._generation += 1
            self._items.clear()
            self._held = 0
            self._saved.clear()
            self._names.clear()
            self._run_ids.clear()
        if self.disk_dir is not None:
            for path in self.disk_dir.glob("*.npz"):
                with contextlib.suppress(OSError):
                    path.unlink()

    @property
    def disk_dir(self) -> Path | None:
        return self._disk_dir

    @disk_dir.setter
    def disk_dir(self, folder: Path | None) -> None:
        """Where long series are saved; the compared ones go beside it, in the folder named
        as its index's (`index.series` -> `index.compare`), where `runs compare` saves."""
        self._disk_dir = folder
        self.compared = SavedSeries(None if folder is None else saved_folder(folder))

    def get(self, conn: Connection, run_pk: int, key: KeyInfo) -> Series:
        """The series of `key`, current as of `key.points` (read from metric_keys)."""
        ident = (run_pk, key.id)
        with self._lock:
            generation = self._generation
            cached = self._items.get(ident)
            if cached is not None:
                self._items.move_to_end(ident)
        if cached is not None and cached.loaded >= key.points:
            return cached
        # the run's id goes with a saved file: an index made again numbers runs from 1 again
        run_id = (self._run_id(conn, run_pk) if self.disk_dir is not None
                  and key.points >= SAVE_MIN_POINTS else "")
        if cached is None and run_id:
            cached = self._load(conn, run_pk, run_id, key)
        if cached is None:
            series = read_series(conn, key.id)
        elif cached.loaded >= key.points:
            series = cached
        else:
            series = extend_series(conn, key.id, cached)
        if self._put(ident, series, generation):
            self._save(ident, (run_id, key.key), series)
        return series

    def _run_id(self, conn: Connection, run_pk: int) -> str:
        """The id of the run at `run_pk` (read once: a run keeps its pk in this index)."""
        found = self._run_ids.get(run_pk)
        if found is None:
            found = str(conn.execute(select(s.runs.c.run_id)
                                     .where(s.runs.c.pk == run_pk)).scalar() or "")
            self._run_ids[run_pk] = found
        return found

    def _path(self, ident: tuple[int, int]) -> Path | None:
        return None if self.disk_dir is None else self.disk_dir / f"{ident[0]}-{ident[1]}.npz"

    def _load(self, conn: Connection, run_pk: int, run_id: str, key: KeyInfo
              ) -> Series | None:
        """A saved series, if it is of this run and key and its data is still in the
        database."""
        path = self._path((run_pk, key.id))
        if path is None or not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as f:
                loaded, max_seq, first_seq, first_step = (int(x) for x in f["meta"])
                name, run = str(f["key"]), str(f["run"])
                series = Series(f["step"], f["value"], f["ts"], loaded, max_seq,
                                (first_seq, first_step))
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):
            return None
        # a rebuilt index can reuse ids: trust the file only for the same key and data
        if run != run_id or name != key.key or loaded > key.points or first_point(
                conn, key.id) != (first_seq, first_step):
            return None
        self._saved[(run_pk, key.id)] = loaded
        return series

    def save_all(self) -> None:
        """Save every cached series that grew since it was saved (when the server stops)."""
        with self._lock:
            items = list(self._items.items())
        for ident, series in items:
            names = self._names.get(ident)
            if series.loaded > self._saved.get(ident, 0) and names and names[0]:
                self._save(ident, names, series, force=True)

    def _save(self, ident: tuple[int, int], names: tuple[str, str], series: Series,
              force: bool = False) -> None:
        """Save a series with its (run id, key name) (none without a run id)."""
        path = self._path(ident)
        last = self._saved.get(ident, 0)
        self._names[ident] = names
        run_id, name = names
        # a live series is saved again only once it has doubled, so writes stay rare
        if path is None or not run_id or series.loaded < SAVE_MIN_POINTS or (
                not force and series.loaded < 2 * last):
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # this process's and thread's own: a CLI command may save the same series
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            with open(tmp, "wb") as f:
                np.savez(f, step=series.step, value=series.value, ts=series.ts,
                         key=np.array(name), run=np.array(run_id),
                         meta=np.array([series.loaded, series.max_seq, *series.first]))
            os.replace(tmp, path)
            self._saved[ident] = series.loaded
        except OSError:
            return  # the cache on disk is an optimisation; the database stays the record

    def _put(self, ident: tuple[int, int], series: Series, generation: int) -> bool:
        """Hold `series`, read since `generation`; whether it is held (not when the cache
        was cleared since)."""
        with self._lock:
            if generation != self._generation:
                return False
            old = self._items.pop(ident, None)
            if old is not None:
                self._held -= old.size
            self._items[ident] = series
            self._held += series.size
            while self._held > self.max_points and len(self._items) > 1:
                _, dropped = self._items.popitem(last=False)
                self._held -= dropped.size
        return True

    def warm(self, conn: Connection, run_pk: int, keys: Iterable[str]) -> None:
        """Bring the named keys of a run up to date.

        This is also the indexer's hook (it is called with the new points by key): the
        series it stores are read into the cache as they arrive, so opening a run this
        server indexed never waits for a cold read of its whole history.
        """
        wanted = set(keys)
        for info in run_keys(conn, run_pk):
            if info.key in wanted:
                self.get(conn, run_pk, info)

    @property
    def held_points(self) -> int:
        return self._held

    def values(self, conn: Connection, run_pk: int) -> RunValues:
        """A run's series values by key (what the run detail's tiles read), with their
        least, greatest and sum answered from step summaries where nothing is cached."""
        return RunValues(self, conn, run_pk)

    def holds(self, run_pk: int, key: KeyInfo) -> bool:
        """Whether the cache holds `key`'s series as of `key.points`."""
        with self._lock:
            cached = self._items.get((run_pk, key.id))
        return cached is not None and cached.loaded >= key.points


class RunValues:
    """`runwatch.analysis.results.SeriesValues` of one run over the cache: called with a
    key, its values; `stat(key, how)` is the least ("min"), greatest ("max") or sum
    ("sum") of its finite values (None when it has none), from the key's step summaries
    when the cache does not hold the series, so a cold run detail reads no whole series."""

    def __init__(self, cache: SeriesCache, conn: Connection, run_pk: int) -> None:
        self.cache, self.conn, self.run_pk = cache, conn, run_pk

    def __call__(self, key: KeyInfo) -> npt.NDArray[np.float64]:
        return self.cache.get(self.conn, self.run_pk, key).value

    def stat(self, key: KeyInfo, how: str) -> float | None:
        if self.cache.summaries and not self.cache.holds(self.run_pk, key):
            found = finite_stats(self.conn, key.id)
            if found is not None:
                low, high, total = found
                if low is None:
                    return None
                return low if how == "min" else high if how == "max" else total
        values = self(key)
        fin = values[np.isfinite(values)]
        if not fin.size:
            return None
        return float(fin.min() if how == "min" else fin.max() if how == "max" else fin.sum())
