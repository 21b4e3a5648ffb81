"""Indexing is idempotent, incremental, and tolerant of bad input."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import pytest
from sqlalchemy import func, select

import runwatch
from runwatch.ingest import Indexer, ingest_records
from runwatch.ingest.indexer import READ_BYTES, SLICE_BYTES
from runwatch.store import open_engine
from runwatch.store import queries as q
from runwatch.store import schema as s
from runwatch.store.db import HEAD_REVISION, MIGRATIONS_DIR
from tests.support import manifest, wait_for


def count(engine, table) -> int:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar() or 0)


def make_run(runs_dir: Path, name: str, steps: int, keys: int = 3) -> None:
    with runwatch.init(name=name, dir=runs_dir, method="sft") as run:
        for step in range(steps):
            run.log({f"k{i}": step + i / 10 for i in range(keys)}, step=step)
        run.log_checkpoint(steps - 1, "training", f"ckpt-{steps - 1}")
        run.log_text("done")


def test_index_twice_changes_nothing_and_growth_adds_only_new(runs_dir: Path,
                                                              tmp_path: Path) -> None:
    make_run(runs_dir, "a", 100)
    engine = open_engine(tmp_path / "i.db")
    first = Indexer(engine, runs_dir).index_once()
    assert (first.runs, first.new_runs, first.problems) == (1, 1, [])
    assert count(engine, s.metric_points) == 300
    again = Indexer(engine, runs_dir).index_once()
    assert again.rows == 0 and count(engine, s.metric_points) == 300
    with runwatch.init(name="a", dir=runs_dir, resume=True) as run:
        run.log({"k0": -1.0}, step=100)
    grown = Indexer(engine, runs_dir).index_once()
    assert grown.new_runs == 0
    assert count(engine, s.metric_points) == 301
    with engine.connect() as conn:
        row = q.resolve_run(conn, "a")
        assert row.observed_step == 100 and row.saved_step == 99 and row.status == "SUCCEEDED"
        hist = q.history(conn, row.pk, ["k0"])
        assert len(hist) == 101 and hist[-1].values["k0"] == -1.0


def test_ingest_records_is_idempotent_on_seq(runs_dir: Path, tmp_path: Path) -> None:
    make_run(runs_dir, "b", 5)
    engine = open_engine(tmp_path / "i.db")
    Indexer(engine, runs_dir).index_once()
    before = count(engine, s.metric_points)
    with engine.begin() as conn:
        pk = q.resolve_run(conn, "b").pk
        recs = [{"seq": 2, "step": 2, "ts": 1.0, "k0": 99.0}, {"seq": 5, "step": 5, "ts": 1.0,
                                                                "k0": 5.0}]
        first = ingest_records(conn, pk, "metrics.jsonl", recs)
        again = ingest_records(conn, pk, "metrics.jsonl", recs)
        hist = q.history(conn, pk, ["k0"])
        counted = conn.execute(select(s.metric_keys.c.points).where(
            s.metric_keys.c.run_pk == pk, s.metric_keys.c.key == "k0")).scalar()
    assert (first.rows, again.rows) == (1, 0)
    assert count(engine, s.metric_points) == before + 1
    assert hist[2].values["k0"] == pytest.approx(2.0), "a repeated seq keeps the stored value"
    assert counted == 6, "a key's point count counts what is stored, not what was sent"


def test_nan_and_infinity_survive_the_index(runs_dir: Path, tmp_path: Path) -> None:
    with runwatch.init(name="n", dir=runs_dir) as run:
        run.log({"x": math.nan, "y": math.inf, "z": -math.inf}, step=0)
    engine = open_engine(tmp_path / "i.db")
    Indexer(engine, runs_dir).index_once()
    with engine.connect() as conn:
        v = q.history(conn, q.resolve_run(conn, "n").pk)[0].values
    assert math.isnan(v["x"]) and v["y"] == math.inf and v["z"] == -math.inf


def test_bad_input_is_reported_with_file_and_line_and_the_rest_indexed(runs_dir: Path,
                                                                       tmp_path: Path) -> None:
    make_run(runs_dir, "good", 3)
    (runs_dir / "nomanifest").mkdir()
    (runs_dir / "nomanifest" / "metrics.jsonl").write_text('{"seq":0,"step":0,"a":1}\n')
    future = runs_dir / "future"
    future.mkdir()
    (future / "manifest.json").write_text(json.dumps({"schema_version": 99, "run_id": "f"}))
    d = runs_dir / "good"
    (d / "notes.txt").write_text("foreign")
    with open(d / "metrics.jsonl", "a") as f:
        f.write("garbage\n")
        f.write(json.dumps({"seq": 10, "step": 3, "ts": 1.0, "": 1.0, "k" * 300: 2.0,
                            "s": "a string", "k0": 7.0}) + "\n")
        f.write(json.dumps({"seq": 11, "step": 4, "ts": 1.0, "k0": 8.0}) + "\n")
    engine = open_engine(tmp_path / "i.db")
    report = Indexer(engine, runs_dir).index_once()
    text = "\n".join(report.problems)
    assert "nomanifest has no manifest.json" in text
    assert "schema_version 99" in text
    assert "notes.txt: not a file of run format v1" in text
    assert "metrics.jsonl: line 4: not JSON" in text
    assert "metrics.jsonl line 5: a metric key is empty" in text
    assert "longer than 256 characters" in text
    assert "'s' is str 'a string', not a number" in text
    with engine.connect() as conn:
        run = q.resolve_run(conn, "good")
        hist = q.history(conn, run.pk, ["k0"])
        assert [h.values["k0"] for h in hist][-2:] == [7.0, 8.0]
        assert run.problems >= 5
    assert Indexer(engine, runs_dir).index_once().problems == [], "each problem is told once"


def test_unfinished_run_and_lifecycle_state(runs_dir: Path, tmp_path: Path) -> None:
    run = runwatch.init(name="live", dir=runs_dir, phase="PREPARING")
    run.set_phase("PREPARING", stage="tokenizing", done=3, total=9)
    run.log({"a": 1.0}, step=0)
    assert isinstance(run, runwatch.Run)
    run._writer.flush_now()
    engine = open_engine(tmp_path / "i.db")

    def both_events_indexed() -> bool:
        Indexer(engine, runs_dir).index_once()
        return count(engine, s.events) >= 2

    wait_for(both_events_indexed, what="the run's two PREPARING events in the index",
             interval=0.05)
    with engine.connect() as conn:
        row = q.resolve_run(conn, "live")
        assert (row.status, row.stage, row.progress_done, row.progress_total) == (
            "PREPARING", "tokenizing", 3, 9)
        assert not q.process_gone(row), "this process is alive"
    run.fail("the training job was stopped")
    Indexer(engine, runs_dir).index_once()
    with engine.connect() as conn:
        row = q.resolve_run(conn, "live")
        assert (row.status, row.reason) == ("FAILED", "the training job was stopped")


def test_samples_are_indexed_and_reindexed_when_the_file_changes(runs_dir: Path,
                                                                 tmp_path: Path) -> None:
    run = runwatch.init(name="smp", dir=runs_dir)
    run.log_samples(2, [{"prompt": "p", "completion": "<script>x</script>", "reward": 0.5,
                         "advantage": -1.0, "group": 1, "truncated": True}])
    run.finish()
    engine = open_engine(tmp_path / "i.db")
    Indexer(engine, runs_dir).index_once()
    assert count(engine, s.samples) == 1
    run = runwatch.init(name="smp", dir=runs_dir, resume=True)
    run.log_samples(2, [{"prompt": "q", "completion": "c", "reward": 1.0}])
    run.finish()
    Indexer(engine, runs_dir).index_once()
    with engine.connect() as conn:
        rows = conn.execute(select(s.samples.c.completion, s.samples.c.truncated)
                            .order_by(s.samples.c.idx)).all()
    assert [r.completion for r in rows] == ["<script>x</script>", "c"]
    assert rows[0].truncated is True


def test_schema_head_matches_the_migrations(tmp_path: Path) -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    assert ScriptDirectory.from_config(cfg).get_current_head() == HEAD_REVISION
    engine = open_engine(tmp_path / "fresh.db")
    with engine.connect() as conn:
        from sqlalchemy import text

        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == \
            HEAD_REVISION
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"


def test_an_older_database_is_migrated_to_head(tmp_path: Path, runs_dir: Path) -> None:
    """A 0001 index (points keyed by run, key and seq; no threshold table) is brought to
    head, and every point it held comes through, NaN included."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import inspect, text

    from runwatch.store.db import MIGRATIONS_DIR

    run = runwatch.init("p", name="old", dir=runs_dir)
    for i in range(50):
        run.log({"loss": 1.0 / (i + 1), "acc": float("nan") if i == 7 else i / 50}, step=i)
    run.finish()
    path = tmp_path / "old.db"
    engine = open_engine(path)
    Indexer(engine, runs_dir).index_once()
    with engine.connect() as conn:
        before = q.history(conn, q.resolve_run(conn, "old").pk)
    with engine.begin() as conn:
        # back to 0003 with the migrations' own downgrades, then rebuild the points table
        # as revision 0001 had it
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0003")
        conn.execute(text(
            "CREATE TABLE old_points (run_pk INTEGER, key_id INTEGER, seq BIGINT, "
            "step BIGINT NOT NULL, ts FLOAT NOT NULL, value FLOAT, "
            "PRIMARY KEY (run_pk, key_id, seq)) WITHOUT ROWID"))
        conn.execute(text(
            "INSERT INTO old_points SELECT k.run_pk, k.id, p.id % 68719476736, p.step, p.ts, "
            "p.value FROM metric_points p JOIN metric_keys k ON k.id = p.id / 68719476736"))
        conn.execute(text("DROP TABLE metric_points"))
        conn.execute(text("ALTER TABLE old_points RENAME TO metric_points"))
        conn.execute(text("DROP TABLE health_thresholds"))
        conn.execute(text("UPDATE alembic_version SET version_num = '0001'"))
    engine.dispose()
    upgraded = open_engine(path)
    with upgraded.connect() as conn:
        assert "health_thresholds" in inspect(conn).get_table_names()
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == \
            HEAD_REVISION
        assert "id" in {c["name"] for c in inspect(conn).get_columns("metric_points")}
        after = q.history(conn, q.resolve_run(conn, "old").pk)
    assert len(after) == len(before) == 50
    for a, b in zip(after, before, strict=True):
        assert (a.step, a.ts, a.values["loss"]) == (b.step, b.ts, b.values["loss"])
        assert a.values["acc"] == b.values["acc"] or (math.isnan(a.values["acc"])
                                                      and math.isnan(b.values["acc"]))
    # and the migrated index keeps working: more points arrive after the old ones
    resumed = runwatch.init("p", name="old", dir=runs_dir, resume=True)
    resumed.log({"loss": 0.01}, step=50)
    resumed.finish()
    Indexer(upgraded, runs_dir).index_once()
    with upgraded.connect() as conn:
        assert len(q.history(conn, q.resolve_run(conn, "old").pk)) == 51


def test_a_foreign_database_is_refused(tmp_path: Path) -> None:
    import sqlite3

    from runwatch.store import StoreError

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE customers (id INTEGER)")
    with pytest.raises(StoreError, match="not a runwatch index"):
        open_engine(path)


def test_a_long_lived_indexer_sees_every_change(runs_dir: Path, tmp_path: Path) -> None:
    make_run(runs_dir, "live2", 3)
    engine = open_engine(tmp_path / "i.db")
    indexer = Indexer(engine, runs_dir)
    assert indexer.index_once().rows > 0
    assert indexer.index_once().rows == 0, "an unchanged folder adds nothing"
    with runwatch.init(name="live2", dir=runs_dir, resume=True) as run:
        run.log({"k0": 9.0}, step=3)
        run.log_samples(3, [{"prompt": "p", "reward": 1.0}])
    again = indexer.index_once()
    assert again.rows >= 2 and again.runs == 1
    assert count(engine, s.samples) == 1
    with runwatch.init(name="live2", dir=runs_dir, resume=True) as run:
        run.log_samples(3, [{"prompt": "q", "reward": 0.0}])
    indexer.index_once()
    assert count(engine, s.samples) == 2, "a samples file rewritten in place is read again"


def test_a_run_folder_being_created_is_not_reported(runs_dir: Path, tmp_path: Path) -> None:
    """Between mkdir and the manifest's rename, a run folder is empty or holds only
    manifest.json.tmp: the indexer looks again later rather than warn."""
    engine = open_engine(tmp_path / "i.db")
    starting = runs_dir / "starting"
    starting.mkdir()
    indexer = Indexer(engine, runs_dir)
    assert indexer.index_once().problems == []
    (starting / "manifest.json.tmp").write_text("{")
    assert indexer.index_once().problems == []
    (starting / "manifest.json.tmp").rename(starting / "manifest.json")
    (starting / "manifest.json").write_text(json.dumps(manifest("starting")))
    report = indexer.index_once()
    assert (report.runs, report.new_runs, report.problems) == (1, 1, [])


def test_a_run_that_fails_to_index_does_not_stop_the_others(runs_dir: Path,
                                                            tmp_path: Path) -> None:
    """A caller's hook that raises for one run: that run's slice is rolled back and
    reported once, every other run is indexed, and the failed one is tried again (after
    a wait, since its folder did not change)."""
    make_run(runs_dir, "a-breaks", 3)
    make_run(runs_dir, "b-fine", 3)
    engine = open_engine(tmp_path / "i.db")
    broken = {"on": True}

    def hook(conn: object, run_pk: int, points: object) -> None:
        with engine.connect() as c:
            name = c.execute(select(s.runs.c.name).where(s.runs.c.pk == run_pk)).scalar()
        if broken["on"] and name == "a-breaks":
            raise RuntimeError("the hook failed")

    indexer = Indexer(engine, runs_dir, hooks=[hook])
    report = indexer.index_once()
    assert sum("a-breaks: indexing failed (RuntimeError: the hook failed)" in p
               for p in report.problems) == 1
    with engine.connect() as conn:
        assert len(q.history(conn, q.resolve_run(conn, "b-fine").pk)) == 3
        assert q.history(conn, q.resolve_run(conn, "a-breaks").pk) == []
    assert indexer.index_once().problems == [], "told once"
    broken["on"] = False

    def indexed_again() -> bool:
        indexer.index_once()  # the failed run is tried again after a short wait
        with engine.connect() as conn:
            return len(q.history(conn, q.resolve_run(conn, "a-breaks").pk)) == 3

    wait_for(indexed_again, what="the run that failed to be indexed once it can be")


def test_resolve_run_within_projects_names_only_their_runs(runs_dir: Path,
                                                            tmp_path: Path) -> None:
    for name, project in (("alpha-1", "a"), ("alpha-2", "b"), ("beta", "b")):
        with runwatch.init(name=name, dir=runs_dir, project=project) as run:
            run.log({"loss": 1.0}, step=0)
    engine = open_engine(tmp_path / "i.db")
    Indexer(engine, runs_dir).index_once()
    with engine.connect() as conn:
        with pytest.raises(q.RunNotFound) as ambiguous:
            q.resolve_run(conn, "alpha")
        assert ambiguous.value.ambiguous
        # among project a's runs the prefix is unique
        assert q.resolve_run(conn, "alpha", projects=frozenset({"a"})).name == "alpha-1"
        with pytest.raises(q.RunNotFound) as other:
            q.resolve_run(conn, "beta", projects=frozenset({"a"}))
        assert not other.value.ambiguous
        assert all("beta" not in c and "alpha-2" not in c for c in other.value.candidates)
        assert any("alpha-1" in c for c in other.value.candidates)


def test_a_pass_asked_to_stop_ends_after_the_run_under_way(runs_dir: Path,
                                                          tmp_path: Path) -> None:
    """A stopping server waits for its indexer's pass; the pass ends after the folder it is
    on, not after every folder (each can wait 30 s behind another process's write lock)."""
    for name in ("a", "b", "c"):
        make_run(runs_dir, name, 3)
    engine = open_engine(tmp_path / "i.db")
    stop = threading.Event()
    indexer = Indexer(engine, runs_dir, hooks=[lambda conn, pk, points: stop.set()])
    first = indexer.index_once(stop)
    assert (first.runs, first.new_runs) == (1, 1)
    with engine.connect() as conn:
        assert conn.execute(select(s.runs.c.name)).scalars().all() == ["a"]
    stop.clear()
    rest = Indexer(engine, runs_dir).index_once(stop)
    assert (rest.runs, rest.new_runs) == (3, 2)


def long_run(runs_dir: Path) -> int:
    """Run "long", whose metrics file is over one slice and the piece a slice may read past
    its end (long lines: a slice of few points, quick to store); its number of lines."""
    run = runs_dir / "long"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps(manifest("long", method="sft")))
    key = "k" * 200
    lines = 0
    with open(run / "metrics.jsonl", "w", encoding="utf-8") as fh:
        while fh.tell() <= SLICE_BYTES + 2 * READ_BYTES:
            fh.write(json.dumps({"step": lines, "ts": 1e9 + lines, "seq": lines, key: 1.0})
                     + "\n")
            lines += 1
    return lines


def test_a_pass_asked_to_stop_ends_after_the_slice_under_way(runs_dir: Path,
                                                             tmp_path: Path) -> None:
    """A first read of a long metrics file is many slices: a stopping server waits for one
    of them, not for the whole file; the next pass reads on from where it stopped."""
    lines = long_run(runs_dir)
    engine = open_engine(tmp_path / "i.db")
    stop = threading.Event()
    first = Indexer(engine, runs_dir, hooks=[lambda conn, pk, points: stop.set()]).index_once(stop)
    assert first.unread == {"long"}
    assert 0 < count(engine, s.metric_points) < lines
    rest = Indexer(engine, runs_dir).index_once()
    assert rest.unread == set() and count(engine, s.metric_points) == lines


def test_events_stored_by_a_pass_asked_to_stop_are_judged_by_that_pass(
        runs_dir: Path, tmp_path: Path) -> None:
    """A pass that stored a run's events and was asked to stop in a long metrics file
    calls the events hooks (the health engine's check of a phase change, of a run's end)
    before it stops: the next pass finds no new event, and never called them."""
    lines = long_run(runs_dir)
    (runs_dir / "long" / "events.jsonl").write_text(
        json.dumps({"seq": 0, "ts": 1e9, "phase": "RUNNING"}) + "\n")
    engine = open_engine(tmp_path / "i.db")
    stop = threading.Event()
    judged: list[int] = []
    first = Indexer(engine, runs_dir, hooks=[lambda conn, pk, points: stop.set()],
                    events_hooks=[lambda conn, pk: judged.append(pk)]).index_once(stop)
    assert first.unread == {"long"} and len(judged) == 1
    rest = Indexer(engine, runs_dir, events_hooks=[lambda conn, pk: judged.append(pk)]
                   ).index_once()
    assert rest.unread == set() and count(engine, s.metric_points) == lines
    assert len(judged) == 1, "no new event: the second pass calls no hook"
