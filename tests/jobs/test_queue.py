"""The queue's claim state (runwatch.store.jobs) on a real SQLite file: each job is
claimed once however many processes and threads race for it, in priority order, only
when it fits the free devices; workers, heartbeats, stale claims and draining; and
migration 0004 that adds it all to an older index."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from sqlalchemy import Engine, inspect, text

from runwatch.ingest import Indexer
from runwatch.store import jobs as q
from runwatch.store.db import HEAD_REVISION, open_engine
from runwatch.store.jobs import WorkerRow
from tests.support.jobs import claim_race, job, record_attempt, run_row, submit_command
from tests.support.migrations import downgrade


def claim(engine: Engine, worker: str = "w", free: int = 1, now: float = 100.0) -> str | None:
    with engine.begin() as conn:
        got = q.claim(conn, worker, free, now)
    return None if got is None else got.name


def test_racing_processes_and_threads_claim_each_job_exactly_once(
        tmp_path: Path, runs_dir: Path) -> None:
    engine = open_engine(tmp_path / "race.db")
    pks = [submit_command(engine, runs_dir, f"job{i:02d}").run_pk for i in range(40)]
    engine.dispose()
    claimed = claim_race(str(tmp_path / "race.db"), processes=4, threads=3)
    twice = [pk for pk, n in Counter(claimed).items() if n > 1]
    assert not twice, f"claimed more than once: {twice}"
    assert sorted(claimed) == sorted(pks)


def test_claims_go_by_priority_then_age_and_fit_the_free_devices(engine: Engine,
                                                                 runs_dir: Path) -> None:
    submit_command(engine, runs_dir, "low", priority=0)
    submit_command(engine, runs_dir, "high-old", priority=5)
    submit_command(engine, runs_dir, "high-new", priority=5)
    submit_command(engine, runs_dir, "two", priority=-1, devices=2)
    submit_command(engine, runs_dir, "four", priority=9, devices=4)
    assert claim(engine, free=0) is None
    assert [claim(engine) for _ in range(4)] == ["high-old", "high-new", "low", None]
    assert claim(engine, free=3) == "two"
    assert claim(engine, free=4) == "four"
    assert claim(engine, free=8) is None


def test_a_worker_of_a_profile_claims_only_that_profiles_jobs(engine: Engine,
                                                              runs_dir: Path) -> None:
    submit_command(engine, runs_dir, "gpu", device_profile="a100", priority=9)
    submit_command(engine, runs_dir, "cpu", device_profile="cpu")
    with engine.connect() as conn:
        assert (q.queue_depth(conn, "cpu"), q.queue_depth(conn, "a100"),
                q.queue_depth(conn)) == (1, 1, 2)
    with engine.begin() as conn:
        got = q.claim(conn, "w", 1, 0.0, device_profile="cpu")
        assert got is not None and got.name == "cpu"
        assert q.claim(conn, "w", 1, 0.0, device_profile="cpu") is None
    assert claim(engine) == "gpu", "without a profile a claim takes any"


def test_a_worker_claims_only_the_jobs_in_its_runs_folder(engine: Engine,
                                                         tmp_path: Path) -> None:
    """On a shared index a worker must not take a job whose folder it cannot see; a
    folder name with LIKE's wildcards in it matches only itself."""
    mine, other = tmp_path / "my_runs", tmp_path / "myXruns"
    submit_command(engine, other, "theirs", priority=9)
    submit_command(engine, mine, "ours")
    with engine.begin() as conn:
        assert q.queue_depth(conn, runs_dir=str(mine.resolve())) == 1
        got = q.claim(conn, "w", 1, 0.0, runs_dir=str(mine.resolve()))
        assert got is not None and got.name == "ours"
        assert q.claim(conn, "w", 1, 0.0, runs_dir=str(mine.resolve())) is None


def test_a_claim_carries_what_the_worker_starts(engine: Engine, runs_dir: Path) -> None:
    sub = submit_command(engine, runs_dir, "what", ["python", "train.py"], devices=2,
                         device_profile="a100", startup_timeout_s=30)
    with engine.begin() as conn:
        got = q.claim(conn, "w1", 2, 123.0)
    assert got is not None
    assert (got.run_pk, got.run_id, got.name, got.dir, got.attempt, got.argv, got.cwd,
            got.devices, got.device_profile, got.startup_timeout_s) == \
        (sub.run_pk, sub.run_id, "what", str(sub.dir), 1, ["python", "train.py"],
         str(runs_dir.resolve()), 2, "a100", 30.0)
    row = job(engine, "what")
    assert row is not None and (row["worker_id"], row["claimed_at"], row["heartbeat_at"]) == \
        ("w1", 123.0, 123.0)


def test_only_queued_jobs_without_a_cancel_request_are_claimed(engine: Engine,
                                                               runs_dir: Path) -> None:
    cancelled = submit_command(engine, runs_dir, "cancelled")
    ended = submit_command(engine, runs_dir, "ended")
    submit_command(engine, runs_dir, "waiting")
    with engine.begin() as conn:
        assert q.queue_depth(conn) == 3
        assert q.request_cancel(conn, cancelled.run_pk, 1.0) is True
        conn.execute(text("UPDATE runs SET status = 'FAILED' WHERE pk = :pk"),
                     {"pk": ended.run_pk})
        assert q.queue_depth(conn) == 1
    assert [claim(engine), claim(engine)] == ["waiting", None]
    with engine.begin() as conn:
        assert q.queue_depth(conn) == 0
        assert q.cancel_requested(conn, cancelled.run_pk)
        waiting = run_row(engine, "waiting").pk
        assert q.request_cancel(conn, waiting, 2.0) is False, "a worker holds it"
        assert q.cancel_requested(conn, waiting)


def test_workers_heartbeat_drain_and_leave_stale_claims(engine: Engine,
                                                        runs_dir: Path) -> None:
    submit_command(engine, runs_dir, "a", devices=2)
    submit_command(engine, runs_dir, "b")
    submit_command(engine, runs_dir, "c")
    with engine.begin() as conn:
        q.register_worker(conn, WorkerRow("w1", "host1", 11, 4, "cpu", 100.0))
        q.register_worker(conn, WorkerRow("w2", "host2", 22, 1, "cpu", 101.0))
    assert claim(engine, "w1", 4, 100.0) == "a"
    assert claim(engine, "w1", 2, 100.0) == "b"
    assert claim(engine, "w2", 1, 101.0) == "c"
    with engine.begin() as conn:
        q.set_pid(conn, run_row(engine, "a").pk, 4242, "w1")
        q.heartbeat(conn, "w2", 140.0)
        stale = q.stale_claims(conn, 140.0)
        assert sorted(c.name for c in stale) == ["a", "b"], "w1 stopped stamping at 100"
        assert q.stale_claims(conn, 129.0) == []
        workers = {w["id"]: w for w in q.list_workers(conn)}
        assert [w["id"] for w in q.list_workers(conn)] == ["w2", "w1"], "newest first"
        assert workers["w1"]["devices_used"] == 3 and workers["w2"]["heartbeat_at"] == 140.0
        assert [j["name"] for j in workers["w1"]["jobs"]] == ["a", "b"]
        assert workers["w1"]["jobs"][0]["status"] == "QUEUED"
        assert not q.draining(conn, "w1")
        assert q.set_draining(conn, "w1", True) and q.draining(conn, "w1")
        assert q.set_draining(conn, "nobody", True) is False
        q.release(conn, run_row(engine, "a").pk)
        q.stop_worker(conn, "w2", 150.0)
        workers = {w["id"]: w for w in q.list_workers(conn)}
        assert workers["w1"]["devices_used"] == 1 and workers["w2"]["stopped_at"] == 150.0
        assert workers["w1"]["draining"] is True
    row = job(engine, "a")
    assert row is not None and (row["worker_id"], row["pid"]) == (None, None)
    assert claim(engine, "w3", 2) == "a", "a released job is claimable again"


def test_migration_0004_adds_the_queue_to_an_older_index_and_takes_it_away(
        tmp_path: Path, runs_dir: Path) -> None:
    """Down to 0003 and up again: the queue's tables and columns go and come back, and
    every point, key and finding stays."""
    path = tmp_path / "old.db"
    engine = open_engine(path)
    before = submit_command(engine, runs_dir, "before")
    record_attempt(before.dir, 1, "FAILED", steps=5)
    Indexer(engine, runs_dir).index_once()
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO findings (run_pk, rule_id, severity, status, evidence, "
                          "message, advice, opened_ts, updated_ts) VALUES (:pk, 'r', 'warn', "
                          "'open', '{}', 'm', 'a', 0, 0)"), {"pk": before.run_pk})
    downgrade(engine, "0003")
    with engine.connect() as conn:
        assert {"jobs", "workers"}.isdisjoint(inspect(conn).get_table_names())
        assert "attempt" not in {c["name"] for c in inspect(conn).get_columns("runs")}
    engine.dispose()
    upgraded = open_engine(path)
    with upgraded.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == \
            HEAD_REVISION
        assert conn.execute(text("SELECT attempt FROM runs")).scalar() == 1
        assert conn.execute(text("SELECT count(*) FROM metric_points")).scalar() == 5
        assert conn.execute(text("SELECT count(*) FROM metric_keys")).scalar() == 1
        assert conn.execute(text("SELECT count(*) FROM findings")).scalar() == 1
        sql = conn.execute(text(
            "SELECT sql FROM sqlite_master WHERE name = 'metric_keys'")).scalar()
        assert sql is not None
        assert "AUTOINCREMENT" in sql
    Indexer(upgraded, runs_dir).index_once()
    assert job(upgraded, "before") is None, "job.json was indexed before: not read again"
    (runs_dir / "before" / "job.json").touch()
    Indexer(upgraded, runs_dir).index_once()
    assert job(upgraded, "before") is not None
    upgraded.dispose()


def test_metric_key_ids_are_never_reused(engine: Engine) -> None:
    """A new attempt's keys must not take a purged key's id: the server's series cache
    is keyed by (run, key id) and would serve the old attempt's series."""
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO runs (run_id, name, project, tags, created_at, "
                          "status, manifest, problems) VALUES ('r', 'r', 'p', '[]', 0, "
                          "'QUEUED', '{}', 0)"))
        conn.execute(text("INSERT INTO metric_keys (run_pk, key, points) VALUES (1, 'a', 0)"))
        first = conn.execute(text("SELECT max(id) FROM metric_keys")).scalar()
        assert first is not None
        conn.execute(text("DELETE FROM metric_keys"))
        conn.execute(text("INSERT INTO metric_keys (run_pk, key, points) VALUES (1, 'a', 0)"))
        assert conn.execute(text("SELECT max(id) FROM metric_keys")).scalar() == first + 1

