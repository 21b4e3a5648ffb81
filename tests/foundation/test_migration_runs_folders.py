"""Migration 0019 (the runs folders an index was indexed from) on an index at 0018 with runs
in it: every row is kept, the table starts empty and each runs folder's next pass records
it, so a run moved afterwards into a runs folder the index holds no run of is found; and
going back to 0018 loses nothing but the table. On SQLite and on PostgreSQL."""

from __future__ import annotations

import shutil
from pathlib import Path

from sqlalchemy import Engine, func, inspect, select

from runwatch.ingest import Indexer
from runwatch.store import schema as s
from tests.support import sdk_run
from tests.support.migrations import downgrade, reopened

TABLES = ("runs", "metric_keys", "metric_points", "events", "ingest_offsets")


def counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t: int(conn.execute(select(func.count()).select_from(s.metadata.tables[t]))
                       .scalar_one()) for t in TABLES}


def test_an_index_at_0018_keeps_its_runs_and_learns_its_runs_folders(
        engine: Engine, db_url: str, tmp_path: Path) -> None:
    a, new = tmp_path / "runs-a", tmp_path / "runs-new"
    for name in ("x", "stay"):
        sdk_run(a, name, steps=3)
    new.mkdir()
    Indexer(engine, a).index_once()
    downgrade(engine, "0018")
    with engine.connect() as conn:
        assert "runs_folders" not in inspect(conn).get_table_names()
        held = conn.execute(select(s.runs).order_by(s.runs.c.pk)).all()
    before = counts(engine)
    assert before["metric_points"] == 12
    engine.dispose()

    with reopened(db_url) as upgraded:
        with upgraded.connect() as conn:
            assert conn.execute(select(s.runs).order_by(s.runs.c.pk)).all() == held
            assert conn.execute(select(s.runs_folders)).all() == []
        assert counts(upgraded) == before
        for d in (a, new):  # each runs folder's next pass records it
            Indexer(upgraded, d).index_once()
        with upgraded.connect() as conn:
            assert sorted(conn.execute(select(s.runs_folders.c.path)).scalars()) == sorted(
                str(d.resolve()) for d in (a, new))
        x = next(row.pk for row in held if row.name == "x")
        shutil.move(str(a / "x"), str(new / "x"))
        assert Indexer(upgraded, a).index_once().forgotten == []
        with upgraded.connect() as conn:
            assert conn.execute(select(s.runs.c.dir).where(s.runs.c.pk == x)).scalar_one() \
                == str((new / "x").resolve())
        assert counts(upgraded) == before


def test_going_back_to_0018_loses_only_the_runs_folders(engine: Engine,
                                                         tmp_path: Path) -> None:
    sdk_run(tmp_path / "runs", "kept", steps=3)
    Indexer(engine, tmp_path / "runs").index_once()
    before = counts(engine)
    downgrade(engine, "0018")
    assert counts(engine) == before
    with engine.connect() as conn:
        assert "runs_folders" not in inspect(conn).get_table_names()
