"""Migration 0018 (the run keys) on an index at 0017 with runs in it: every row and foreign
key is kept, a sent run's name becomes its own within its project, and a run's pk is never
given to another run after it is deleted (the indexer forgetting a run whose folder is
gone), on SQLite (AUTOINCREMENT, the table rebuilt) as on PostgreSQL (serial)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import IntegrityError

import runwatch
from runwatch.ingest import Indexer
from runwatch.store import queries as q
from runwatch.store import schema as s
from runwatch.store.db import MIGRATIONS_DIR
from runwatch.store.runs import upsert_run
from tests.server.apiclient import manifest
from tests.support.migrations import downgrade, reopened

A, B = "proj-alpha", "proj-bravo"


def write_run(runs_dir: Path, name: str) -> None:
    run = runwatch.init("p", name=name, dir=runs_dir)
    for step in range(3):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
    run.finish()


def to_0017(engine: Engine) -> None:
    """Take the index back to 0017 as 0017 made it: on SQLite with foreign keys off, as
    runwatch migrates, so that `runs` is rebuilt without AUTOINCREMENT (with them on the
    downgrade leaves it, since a rebuild would delete every run's records)."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            conn.commit()
        with conn.begin():
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0017")
    engine.dispose()  # no pooled connection keeps foreign keys off


def pk_of(engine: Engine, name: str) -> int:
    with engine.connect() as conn:
        return int(q.resolve_run(conn, name).pk)


def counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t: conn.execute(select(func.count()).select_from(s.metadata.tables[t])).scalar()
                or 0 for t in ("runs", "metric_keys", "metric_points", "events")}


def test_a_forgotten_runs_pk_is_never_given_to_a_new_run(engine: Engine, runs_dir: Path
                                                          ) -> None:
    for name in ("first", "last"):
        write_run(runs_dir, name)
    Indexer(engine, runs_dir).index_once()
    gone = pk_of(engine, "last")
    shutil.rmtree(runs_dir / "last")
    Indexer(engine, runs_dir).index_once()  # forgets it
    write_run(runs_dir, "new")
    Indexer(engine, runs_dir).index_once()
    assert pk_of(engine, "new") > gone


def test_an_index_at_0017_keeps_every_row_and_key_and_takes_the_new_rules(
        engine: Engine, db_url: str, runs_dir: Path) -> None:
    for name in ("first", "last"):
        write_run(runs_dir, name)
    Indexer(engine, runs_dir).index_once()
    with engine.begin() as conn:
        upsert_run(conn, manifest("a" * 32, "sent", project=A), None)
    to_0017(engine)
    before = counts(engine)
    with engine.connect() as conn:
        held = conn.execute(select(s.runs).order_by(s.runs.c.pk)).all()
        if conn.dialect.name == "sqlite":  # the table as 0017 had it: pks may be reused
            assert "AUTOINCREMENT" not in conn.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE name = 'runs'").scalar_one()
    assert before["metric_points"] == 6
    engine.dispose()

    with reopened(db_url) as upgraded:
        with upgraded.connect() as conn:
            assert conn.execute(select(s.runs).order_by(s.runs.c.pk)).all() == held
        assert counts(upgraded) == before
        # a name is a run's own within its project: another project may send it too
        with upgraded.begin() as conn:
            upsert_run(conn, manifest("b" * 32, "sent", project=B), None)
        with pytest.raises(IntegrityError), upgraded.begin() as conn:
            upsert_run(conn, manifest("c" * 32, "sent", project=A), None)
        # the highest pk, deleted: the next run takes a new one, and the tables that name
        # runs.pk still cascade (SQLite kept their foreign keys through the rebuild)
        last = pk_of(upgraded, "b" * 32)
        with upgraded.begin() as conn:
            conn.execute(s.metric_keys.insert().values(run_pk=last, key="loss", points=0))
            conn.execute(s.runs.delete().where(s.runs.c.pk == last))
            assert conn.execute(select(func.count()).select_from(s.metric_keys)
                                .where(s.metric_keys.c.run_pk == last)).scalar() == 0
            new, _ = upsert_run(conn, manifest("d" * 32, "later", project=B), None)
        assert new > last
        Indexer(upgraded, runs_dir).index_once()  # the upgraded index goes on working
        assert counts(upgraded)["metric_points"] == before["metric_points"]


def test_going_back_to_0017_renames_a_name_two_projects_hold_and_loses_nothing(
        engine: Engine) -> None:
    with engine.begin() as conn:
        for run_id, project in (("a" * 32, A), ("b" * 32, B)):
            upsert_run(conn, manifest(run_id, "twin", project=project), None)
    downgrade(engine, "0017")
    with engine.connect() as conn:
        names = dict(conn.execute(select(s.runs.c.run_id, s.runs.c.name)).all())
    assert names == {"a" * 32: "twin", "b" * 32: f"twin.{'b' * 32}"}


def test_a_downgrade_with_foreign_keys_on_keeps_every_runs_records(engine: Engine,
                                                                   runs_dir: Path) -> None:
    write_run(runs_dir, "kept")
    Indexer(engine, runs_dir).index_once()
    before = counts(engine)
    downgrade(engine, "0017")  # in a transaction, foreign keys on (SQLite): no rebuild
    assert counts(engine) == before
