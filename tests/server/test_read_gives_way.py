"""A long read of a key's rows in a thread that reads for nobody waiting (the server's
start-up warming) gives way between pieces, so a request's own read need not wait for
the warming's whole series: the pieces make the same series as one read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sqlalchemy import Engine

from runwatch.ingest import Indexer
from runwatch.store.keys import run_keys
from runwatch.store.series import pausing, read_series
from tests.support.rundirs import sdk_run


def _key(engine: Engine, name: str) -> int:
    with engine.connect() as conn:
        infos = [i for pk in conn.exec_driver_sql("SELECT pk FROM runs").scalars()
                 for i in run_keys(conn, pk) if i.key == name]
    assert len(infos) == 1
    return int(infos[0].id)


def test_a_read_gives_way_between_pieces_and_reads_the_same(tmp_path: Path,
                                                            engine: Engine) -> None:
    runs = tmp_path / "runs"
    steps = 2 * 7 + 5
    sdk_run(runs, "long", steps=steps)
    Indexer(engine, runs).index_once()
    key = _key(engine, "loss")
    with engine.connect() as conn:
        whole = read_series(conn, key)
        calls: list[int] = []
        with pausing(lambda: calls.append(1), every=7):
            pieces = read_series(conn, key)
        after = read_series(conn, key)
    assert whole.size == steps
    assert len(calls) == 2  # after each full piece of 7 rows, not after the last
    for a, b in ((whole, pieces), (whole, after)):
        assert np.array_equal(a.step, b.step) and np.array_equal(a.ts, b.ts)
        assert np.array_equal(a.value, b.value, equal_nan=True)
        assert (a.loaded, a.max_seq, a.first) == (b.loaded, b.max_seq, b.first)
