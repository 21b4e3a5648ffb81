"""The series cache reads only new points and applies restores (a re-logged step wins)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import Engine, text

from runwatch.ingest import ingest_records
from runwatch.server.series_cache import SeriesCache
from runwatch.store.db import open_engine
from runwatch.store.keys import run_keys
from runwatch.store.points import SEQ_LIMIT
from runwatch.store.runs import upsert_run


def _points(seq0: int, steps: list[int], value: float) -> list[dict[str, Any]]:
    return [{"seq": seq0 + i, "step": s, "ts": 1.0, "loss": value + s} for i, s in enumerate(steps)]


def _store(engine: Engine, records: list[dict[str, Any]]) -> int:
    with engine.begin() as conn:
        pk, _ = upsert_run(conn, {"schema_version": 1, "run_id": "r1", "name": "r1"}, None)
        ingest_records(conn, pk, "metrics.jsonl", records)
    return pk


def test_cache_extends_with_new_points_only(engine: Engine) -> None:
    cache = SeriesCache()
    pk = _store(engine, _points(0, list(range(10)), 0.0))
    with engine.connect() as conn:
        first = cache.get(conn, pk, run_keys(conn, pk)[0])
    assert first.size == 10
    _store(engine, _points(10, list(range(10, 15)), 0.0))
    with engine.connect() as conn:
        second = cache.get(conn, pk, run_keys(conn, pk)[0])
    assert second.size == 15 and second.loaded == 15
    assert np.array_equal(second.step, np.arange(15))


def test_relogged_steps_supersede_the_old_tail(engine: Engine) -> None:
    cache = SeriesCache()
    pk = _store(engine, _points(0, list(range(10)), 0.0))
    with engine.connect() as conn:
        cache.get(conn, pk, run_keys(conn, pk)[0])
    # the run restored from step 5 and logged 5..7 again, with other values
    _store(engine, _points(10, [5, 6, 7], 100.0))
    with engine.connect() as conn:
        s = cache.get(conn, pk, run_keys(conn, pk)[0])
        fresh = SeriesCache().get(conn, pk, run_keys(conn, pk)[0])
    assert s.step.tolist() == [0, 1, 2, 3, 4, 5, 6, 7]
    assert s.value.tolist()[-3:] == [105.0, 106.0, 107.0]
    # a cold read of the same rows agrees with the incremental one
    assert fresh.step.tolist() == s.step.tolist() and fresh.value.tolist() == s.value.tolist()


def test_nan_values_come_back_as_nan(engine: Engine) -> None:
    pk = _store(engine, [{"seq": 0, "step": 0, "loss": float("nan")},
                         {"seq": 1, "step": 1, "loss": 1.0}])
    with engine.connect() as conn:
        s = SeriesCache().get(conn, pk, run_keys(conn, pk)[0])
    assert np.isnan(s.value[0]) and s.value[1] == 1.0


def test_cache_is_bounded(engine: Engine) -> None:
    cache = SeriesCache(max_points=15)
    with engine.begin() as conn:
        pk, _ = upsert_run(conn, {"schema_version": 1, "run_id": "r1", "name": "r1"}, None)
        ingest_records(conn, pk, "metrics.jsonl",
                       [{"seq": i, "step": i, "a": 1.0, "b": 2.0} for i in range(10)])
    with engine.connect() as conn:
        for k in run_keys(conn, pk):
            cache.get(conn, pk, k)
    assert cache.held_points <= 15


def test_saved_series_are_reused_and_checked(engine: Engine, tmp_path: Any,
                                             monkeypatch: Any) -> None:
    monkeypatch.setattr("runwatch.server.series_cache.SAVE_MIN_POINTS", 5)
    disk = tmp_path / "series"
    pk = _store(engine, _points(0, list(range(10)), 0.0))
    with engine.connect() as conn:
        SeriesCache(disk_dir=disk).get(conn, pk, run_keys(conn, pk)[0])
    assert len(list(disk.glob("*.npz"))) == 1
    _store(engine, _points(10, list(range(10, 12)), 0.0))
    # a new process: the file gives the first 10 points, the database the 2 after them
    with engine.connect() as conn:
        s = SeriesCache(disk_dir=disk).get(conn, pk, run_keys(conn, pk)[0])
    assert s.step.tolist() == list(range(12)) and s.loaded == 12
    # a file that does not match the database's data is ignored
    with engine.begin() as conn:
        conn.execute(text(
            f"UPDATE metric_points SET step = step + 100 WHERE id % {SEQ_LIMIT} = 0"))
    with engine.connect() as conn:
        s = SeriesCache(disk_dir=disk).get(conn, pk, run_keys(conn, pk)[0])
    # (the changed first row, step 100, is itself superseded by the later steps 1..11)
    assert s.step.tolist() == list(range(1, 12))


def test_a_saved_series_of_an_index_made_again_is_not_used(tmp_path: Any,
                                                           monkeypatch: Any) -> None:
    """An index file removed and made again numbers runs and keys from 1 again: a series
    saved for the old index's run is not taken for the new run at the same ids (it
    starts at the same seq and step), but read from the index, and saved again."""
    monkeypatch.setattr("runwatch.server.series_cache.SAVE_MIN_POINTS", 5)
    disk = tmp_path / "series"
    answers = []
    for name, run_id, value in (("old.db", "r1", 0.0), ("new.db", "r2", 50.0)):
        engine = open_engine(tmp_path / name)
        try:
            with engine.begin() as conn:
                pk, _ = upsert_run(conn, {"schema_version": 1, "run_id": run_id,
                                          "name": run_id}, None)
                ingest_records(conn, pk, "metrics.jsonl", _points(0, list(range(10)), value))
            with engine.connect() as conn:
                answers.append(SeriesCache(disk_dir=disk).get(conn, pk, run_keys(conn, pk)[0]))
        finally:
            engine.dispose()
    assert answers[0].value.tolist() == [float(s) for s in range(10)]
    assert answers[1].value.tolist() == [50.0 + s for s in range(10)]
    assert len(list(disk.glob("*.npz"))) == 1, "the same ids: one file, saved again"
