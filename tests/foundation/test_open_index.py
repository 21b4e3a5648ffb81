"""Opening one new index from several processes at once: each gets a whole index.

`runwatch ui runs &` then `runwatch submit` on a new folder open the same new SQLite file
at the same moment; SQLite shows each table as it is created, so the later opener used to
see a half-made index and refuse it as "not a runwatch index".
"""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from runwatch.store.db import HEAD_REVISION, StoreError, ensure_schema, open_engine
from tests.support import cli_here

OPENERS = 6
# Rounds of the race, each on a new file, run by the same processes (a spawned process
# spends a second or more importing the store before its first open).
ROUNDS = 3


def _open(paths: list[str], start: mp.synchronize.Barrier, out: mp.Queue) -> None:
    for round_, path in enumerate(paths):
        start.wait(30)
        try:
            engine = open_engine(path)
            with engine.connect() as conn:
                got = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            engine.dispose()
        except Exception as exc:  # reported to the test, which names it
            got = f"{type(exc).__name__}: {exc}"
        out.put((round_, got))


def test_processes_opening_a_new_index_at_once_all_get_it_whole(tmp_path: Path) -> None:
    paths = [str(tmp_path / f"index-{round_}.db") for round_ in range(ROUNDS)]
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(OPENERS), ctx.Queue()
    procs = [ctx.Process(target=_open, args=(paths, start, out)) for _ in range(OPENERS)]
    for p in procs:
        p.start()
    try:
        got = sorted(out.get(timeout=120) for _ in range(OPENERS * ROUNDS))
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    assert got == [(round_, HEAD_REVISION) for round_ in range(ROUNDS) for _ in procs]


def test_a_database_of_other_tables_is_still_refused_at_once(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "other.db", migrate=False)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE accounts (id INTEGER PRIMARY KEY)"))
    engine.dispose()
    with pytest.raises(StoreError, match="not a runwatch index"):
        open_engine(tmp_path / "other.db")


def test_a_half_made_index_nothing_finishes_is_named_as_such(tmp_path: Path) -> None:
    # runwatch's own tables, not stamped, and no process making them: it said the tables
    # were "not a runwatch index"
    engine = open_engine(tmp_path / "half.db", migrate=False)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE runs (pk INTEGER PRIMARY KEY)"))
    with pytest.raises(StoreError, match="part of a runwatch index that nothing finished"):
        ensure_schema(engine, wait_s=0.2)
    engine.dispose()


def test_opening_a_new_file_another_process_is_making_waits_for_it(tmp_path: Path) -> None:
    # A new file stays in rollback mode until its maker's first write commits; switching it
    # to WAL against the maker's write lock was answered "database is locked" at once, not
    # after the busy timeout (seen in CI: 1 of 18 openers). The opener now waits.
    path = tmp_path / "index.db"
    maker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    maker.execute("BEGIN IMMEDIATE")
    held = threading.Event()

    def release() -> None:
        held.wait(30)
        maker.execute("ROLLBACK")

    releaser = threading.Thread(target=release)
    releaser.start()
    try:
        conn = sqlite3.connect(path, timeout=0.1, isolation_level=None)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            conn.execute("PRAGMA journal_mode=WAL")  # what SQLite answers on its own
        conn.close()
        threading.Timer(0.3, held.set).start()
        engine = open_engine(path)
        with engine.connect() as c:
            version = c.execute(text("SELECT version_num FROM alembic_version")).scalar()
            assert version == HEAD_REVISION
            assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        engine.dispose()
    finally:
        held.set()
        releaser.join(30)
        maker.close()


@pytest.mark.parametrize("url", ["postgressql://alice:hunter2@db/runwatch",
                                 "mysql://alice:hunter2@db/runwatch",
                                 "postgresql+psycopg2://alice:hunter2@db/runwatch"])
def test_a_database_runwatch_cannot_keep_its_index_in_is_named_with_what_to_pass(
        url: str) -> None:
    # a misspelt scheme said "Can't load plugin: sqlalchemy.dialects:postgressql", and
    # mysql:// "No module named 'MySQLdb'"
    listed = cli_here("runs", "list", "--db", url, check=False)
    assert listed.returncode == 2, listed.stdout + listed.stderr
    said = " ".join(listed.stderr.split())
    assert "runwatch keeps its index in SQLite (a file path, or sqlite:///PATH) or " \
        "PostgreSQL (postgresql://USER@HOST/DB); pass one of these" in said, said
    assert "hunter2" not in said and "alice:***@db" in said
    assert "Traceback" not in listed.stderr


def test_a_scheme_is_read_in_any_case(tmp_path: Path) -> None:
    engine = open_engine(f"SQLite:///{tmp_path / 'index.db'}")
    engine.dispose()
    assert (tmp_path / "index.db").is_file()
