"""Two indexers of one runs folder at once (a server's or a worker's, and a CLI's): each
file is read by one of them at a time, so no record is stored twice, no key is created
twice, and neither fails.

Before, both could read the same new records from the same offset; the second then hit
UNIQUE(metric_keys.run_pk, key) on a new key and its pass failed (seen in `runwatch demo`).
"""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, insert, select
from sqlalchemy.exc import OperationalError

import runwatch
from runwatch.ingest import Indexer
from runwatch.ingest.offsets import lock_offsets
from runwatch.store import schema as s
from runwatch.store.db import open_engine

STEPS = 120


def _index_until(db: str, runs: str, stop: mp.synchronize.Event, out: mp.Queue) -> None:
    engine = open_engine(db)
    indexer = Indexer(engine, Path(runs))
    problems: list[str] = []
    out.put("ready")
    while not stop.is_set():
        problems += indexer.index_once().problems
    problems += indexer.index_once().problems
    engine.dispose()
    out.put(problems)


def test_two_indexers_of_one_growing_run_store_each_record_once(tmp_path: Path) -> None:
    runs, db = tmp_path / "runs", str(tmp_path / "index.db")
    open_engine(db).dispose()
    run = runwatch.init(name="grow", dir=runs, flush_interval=0.01)
    ctx = mp.get_context("spawn")
    stop, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_index_until, args=(db, str(runs), stop, out))
             for _ in range(2)]
    for p in procs:
        p.start()
    try:
        assert [out.get(timeout=120) for _ in procs] == ["ready"] * len(procs)
        for step in range(STEPS):  # a new key every step, as a run adding metrics does
            run.log({"loss": 1.0 / (step + 1), f"k/{step}": float(step)}, step=step)
            time.sleep(0.01)  # the file grows over many passes of both indexers
        run.finish()
        stop.set()
        problems = [p for _ in procs for p in out.get(timeout=120)]
    finally:
        stop.set()
        for p in procs:
            p.join(60)
            if p.is_alive():
                p.kill()
    assert problems == []
    engine = open_engine(db)
    with engine.connect() as conn:
        points = conn.execute(select(func.count()).select_from(s.metric_points)).scalar()
        counted = conn.execute(select(func.sum(s.metric_keys.c.points))).scalar()
        keys = conn.execute(select(func.count()).select_from(s.metric_keys)).scalar()
    engine.dispose()
    assert (points, counted, keys) == (2 * STEPS, 2 * STEPS, STEPS + 1)


def test_the_lock_of_a_file_with_no_row_yet_is_held_too(engine: Engine) -> None:
    # An indexer that found no row for a file read it unlocked: on PostgreSQL a submit's
    # indexer and the server's then stored a new run's events in turns and deadlocked (POST
    # /api/jobs answered 500). Taking the lock makes the row, so the second indexer waits.
    with engine.begin() as conn:
        conn.execute(insert(s.runs).values(run_id="r1", name="r1", dir="/nowhere",
                                           created_at=1.0, status="RUNNING"))
        run_pk = int(conn.execute(select(s.runs.c.pk)).scalar_one())
    first = engine.connect()
    try:
        with first.begin():
            lock_offsets(first, run_pk, "events.jsonl")
            with engine.connect() as second, second.begin():
                if engine.dialect.name == "postgresql":
                    second.exec_driver_sql("SET LOCAL lock_timeout = '300ms'")
                    with pytest.raises(OperationalError, match="lock timeout"):
                        lock_offsets(second, run_pk, "events.jsonl")
                else:  # SQLite: the first holds the write lock
                    second.exec_driver_sql("PRAGMA busy_timeout = 300")
                    with pytest.raises(OperationalError, match="locked"):
                        lock_offsets(second, run_pk, "events.jsonl")
    finally:
        first.close()
