"""Migration 0012: an index written before it gets each run's open findings by severity,
as listed, counted from the findings it holds; /metrics then reports what the API lists."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, inspect, text

from runwatch.store.db import HEAD_REVISION, open_engine
from tests.health.test_open_counts import counted, index, listed, resolve_truncation, write_runs
from tests.support.migrations import downgrade

COLUMNS = {"open_info", "open_warning", "open_critical"}


def state_columns(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return {c["name"] for c in inspect(conn).get_columns("health_state")}


def test_migration_0012_counts_the_open_findings_an_older_index_holds(
        engine: Engine, db_url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    names = write_runs(runs)
    resolve_truncation(runs)  # a run whose findings are all resolved reads 0
    index(engine, runs)
    want = listed(engine, names)
    assert want["critical"] == 1 and want["warning"], want
    with engine.connect() as conn:
        findings = conn.execute(text("SELECT count(*) FROM findings")).scalar()
    downgrade(engine, "0011")
    assert COLUMNS.isdisjoint(state_columns(engine))
    engine.dispose()

    upgraded = open_engine(db_url)  # as a newer runwatch opens an older index
    try:
        assert state_columns(upgraded) >= COLUMNS
        with upgraded.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == \
                HEAD_REVISION
            assert conn.execute(text("SELECT count(*) FROM findings")).scalar() == findings
        assert counted(upgraded) == listed(upgraded, names) == want
    finally:
        upgraded.dispose()
