"""The index's schema on SQLite and on PostgreSQL: a new index is exactly store/schema.py's,
and the migrations, run by Alembic, take an index down to the first revision and back to
head with the schema of a new index and every row that the first revision can hold."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, text

import runwatch
from runwatch.health import store as health_store
from runwatch.ingest import Indexer
from runwatch.store import queries as q
from runwatch.store.db import HEAD_REVISION, open_engine
from runwatch.store.schema import metadata
from tests.support.jobs import record_attempt, submit_command
from tests.support.migrations import downgrade

FIRST = "0001"


def drift(engine: Engine) -> list[Any]:
    """How the database's schema differs from store/schema.py (Alembic's autogenerate
    comparison: tables, columns, types, nullability, indexes, keys); [] when it does not."""
    with engine.connect() as conn:
        return list(compare_metadata(MigrationContext.configure(conn), metadata))


def version(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def columns(engine: Engine) -> dict[str, set[str]]:
    with engine.connect() as conn:
        insp = inspect(conn)
        return {t: {c["name"] for c in insp.get_columns(t)} for t in insp.get_table_names()
                if t != "alembic_version"}


def rows(engine: Engine) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table, NaN made comparable."""
    with engine.connect() as conn:
        return {t: [{k: "nan" if isinstance(v, float) and math.isnan(v) else v
                     for k, v in r._mapping.items()}
                    for r in conn.execute(text(f"SELECT * FROM {t}"))]
                for t in columns(engine)}


def project(tables: dict[str, list[dict[str, Any]]],
            cols: dict[str, set[str]]) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of the tables in `cols`, those columns only, sorted."""
    return {t: sorted((tuple(r[c] for c in sorted(cs)) for r in tables[t]), key=repr)
            for t, cs in cols.items()}


def test_a_new_index_has_exactly_the_schema_of_schema_py(engine: Engine) -> None:
    assert version(engine) == HEAD_REVISION
    assert drift(engine) == []


def test_migrations_go_down_to_the_first_revision_and_up_again_keeping_the_rows(
        engine: Engine, db_url: str, runs_dir: Path) -> None:
    run = runwatch.init("p", name="metrics", dir=runs_dir)
    for i in range(30):
        run.log({"loss": 1.0 / (i + 1), "acc": math.nan if i == 7 else i / 30}, step=i)
    run.log_text("a line of the run's log")
    run.finish()
    failed = submit_command(engine, runs_dir, "job")
    record_attempt(failed.dir, 1, "FAILED", steps=5)
    Indexer(engine, runs_dir).index_once()
    with engine.begin() as conn:
        for name in ("metrics", "job"):
            health_store.reevaluate(conn, q.resolve_run(conn, name).pk)
    head = columns(engine)
    before = rows(engine)
    assert before["metric_points"] and before["events"] and before["findings"]

    downgrade(engine, FIRST)
    assert version(engine) == FIRST
    first = columns(engine)
    assert set(first) < set(head), "the later revisions' tables are gone"
    kept = {t: head[t] & first[t] for t in first}  # what the first revision can hold
    assert project(rows(engine), kept) == project(before, kept)
    engine.dispose()

    upgraded = open_engine(db_url)  # as a newer runwatch opens an older index: Alembic
    try:
        assert version(upgraded) == HEAD_REVISION
        assert drift(upgraded) == []
        assert project(rows(upgraded), kept) == project(before, kept)
        with upgraded.connect() as conn:
            history = q.history(conn, q.resolve_run(conn, "metrics").pk)
        assert [h.values["loss"] for h in history] == [1.0 / (i + 1) for i in range(30)]
        run = runwatch.init("p", name="metrics", dir=runs_dir, resume=True)
        run.log({"loss": 0.01}, step=30)
        run.finish()
        Indexer(upgraded, runs_dir).index_once()  # and the migrated index goes on working
        with upgraded.connect() as conn:
            assert len(q.history(conn, q.resolve_run(conn, "metrics").pk)) == 31
    finally:
        upgraded.dispose()


def test_processes_that_open_an_older_index_together_all_open_it(
        engine: Engine, db_url: str) -> None:
    """A server and its workers restarted together after an upgrade: each finds the index
    one revision behind and upgrades it. They upgrade one after the other (a lock taken
    before the revision is read), the later ones finding it at head; before, all but one
    failed ("column … already exists … this runwatch may be older than the database")."""
    downgrade(engine, "0013")
    engine.dispose()
    code = ("import sys; from runwatch.store.db import open_engine; "
            "open_engine(sys.argv[1]).dispose(); print('opened')")
    procs = [subprocess.Popen([sys.executable, "-c", code, db_url], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(5)]
    said = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 5, [err[-600:] for _, err in said]
    assert all(out.strip() == "opened" for out, _ in said)
    reopened = open_engine(db_url)
    try:
        assert version(reopened) == HEAD_REVISION
        assert drift(reopened) == []
    finally:
        reopened.dispose()
