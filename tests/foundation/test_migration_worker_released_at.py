"""Migration 0017 (workers.released_at) on an index made before it: a worker registered
then has none, and its spend still ends where it was found lost; once a reaper lets go of
a job it held, its spend runs until then."""

from __future__ import annotations

from sqlalchemy import Engine, inspect, text

from runwatch.analysis.workers import workers_view
from runwatch.jobs.cost import load_profiles
from runwatch.jobs.reaper import released
from runwatch.store import jobs as store_jobs
from runwatch.store.db import HEAD_REVISION, open_engine
from tests.support.migrations import downgrade

RATE = 3600.0  # per device-hour: a spend of 1.0 per second up


def test_a_worker_from_before_0017_has_no_release_and_its_spend_ends_where_it_was_lost(
        engine: Engine, db_url: str) -> None:
    downgrade(engine, "0016")
    with engine.connect() as conn:
        assert "released_at" not in {c["name"] for c in inspect(conn).get_columns("workers")}
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO workers (id, host, pid, devices, device_profile, "
                          "started_at, heartbeat_at, draining, executor, "
                          "heartbeat_timeout_s, hourly_rate) VALUES ('old', 'h', 2, 1, "
                          "'cpu', 100.0, 110.0, false, 'local', 30.0, :rate)"),
                     {"rate": RATE})
    engine.dispose()
    upgraded = open_engine(db_url)
    profiles = load_profiles()
    try:
        with upgraded.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == \
                HEAD_REVISION
            [old] = store_jobs.list_workers(conn)
            assert old["released_at"] is None
            [shown] = workers_view(conn, profiles, 1000.0)["workers"]
        # lost at its last heartbeat and its timeout: 110 + 30, 40 s after its start
        assert (shown["status"], shown["spend"]) == ("lost", 40.0)
        with upgraded.begin() as conn:
            released(conn, "old", 200.0)  # a reaper let go of a job it held
            released(conn, "old", 150.0)  # never moved back
        with upgraded.connect() as conn:
            [shown] = workers_view(conn, profiles, 1000.0)["workers"]
        assert shown["spend"] == 100.0
    finally:
        upgraded.dispose()
