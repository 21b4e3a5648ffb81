"""A server's index file replaced under it (store/db.IndexFile): no connection reads the new
file before it is opened again, and it is opened again only once every connection to the
old one has ended. SQLite leaves the old file's WAL and shared memory at the path; a
request's connection made through them between the replacement and the reopen held a lock
there that the reopened index waited out for 30 s (a CI run's request timed out)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from runwatch.store.db import IndexFile, IndexMoved, StoreError, open_engine


def probe(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return [row[0] for row in conn.exec_driver_sql("SELECT x FROM probe ORDER BY x")]


def put(engine: Engine, x: int) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql(f"INSERT INTO probe VALUES ({x})")


def other_process_reads(db: Path) -> list[int]:
    """What a second process (a CLI command) reads from the file at the path."""
    code = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
            "print(','.join(str(r[0]) for r in c.execute('SELECT x FROM probe ORDER BY x')))")
    out = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True,
                         text=True, check=True, timeout=60).stdout.strip()
    return [int(v) for v in out.split(",") if v]


def replaced_by_a_copy(tmp_path: Path, wait_s: float) -> tuple[Engine, IndexFile, Path]:
    """An index holding 1 and 2 whose file was replaced by a copy made when it held 1."""
    db = tmp_path / "index.db"
    engine = open_engine(db)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE probe (x INTEGER)")
    put(engine, 1)
    index_file = IndexFile(engine, wait_s=wait_s)
    copy = tmp_path / "copy.db"
    with engine.connect() as conn:
        conn.exec_driver_sql(f"VACUUM INTO '{copy}'")
    put(engine, 2)  # in the old file's WAL
    return engine, index_file, copy


def test_a_connection_asked_for_after_the_replacement_reads_the_new_file_once_reopened(
        tmp_path: Path) -> None:
    engine, index_file, copy = replaced_by_a_copy(tmp_path, wait_s=60)
    db = index_file.path
    assert db is not None
    held = engine.connect()  # a request's connection, given back only later
    assert [r[0] for r in held.exec_driver_sql("SELECT x FROM probe")] == [1, 2]
    os.replace(copy, db)
    assert index_file.moved() == "was replaced by another file"

    got: list[list[int]] = []
    request = threading.Thread(target=lambda: got.append(probe(engine)))
    request.start()
    request.join(1.0)
    assert request.is_alive(), "a connection was opened to the new file before its reopen"

    reopen_error: list[BaseException] = []

    def reopen() -> None:
        try:
            index_file.reopen()
        except BaseException as exc:  # said by the assertion below
            reopen_error.append(exc)

    reopening = threading.Thread(target=reopen)
    reopening.start()
    reopening.join(1.0)
    assert reopening.is_alive(), "the reopen did not wait for the connection still out"
    assert request.is_alive()

    held.close()  # given back: closed, not kept in the pool
    reopening.join(60)
    request.join(60)
    assert not reopening.is_alive() and not reopen_error
    assert got == [[1]]  # the copy's rows, not the old file's pages read through its WAL
    assert index_file.moved() is None

    put(engine, 3)  # through the new file's WAL, which other processes share
    assert other_process_reads(db) == [1, 3]
    assert probe(engine) == [1, 3]
    engine.dispose()


def test_a_connection_kept_past_the_wait_holds_the_reopen_back_and_is_said(
        tmp_path: Path) -> None:
    engine, index_file, copy = replaced_by_a_copy(tmp_path, wait_s=0.3)
    db = index_file.path
    assert db is not None
    held = engine.connect()
    held.exec_driver_sql("SELECT x FROM probe").all()
    os.replace(copy, db)

    with pytest.raises(StoreError, match=r"1 of this server's connections to the old file are "
                                         r"still in use after 0.3 s; it is opened again once"):
        index_file.reopen()
    assert index_file.moved() == "was replaced by another file"
    with pytest.raises(OperationalError, match="was deleted or replaced and is being opened "
                                               "again; retry in a few seconds"):
        probe(engine)

    held.close()
    index_file.reopen()
    assert index_file.moved() is None
    assert probe(engine) == [1]
    put(engine, 4)
    assert other_process_reads(db) == [1, 4]
    engine.dispose()


def test_a_deleted_index_is_made_again_with_no_connection_to_the_old_file_left(
        tmp_path: Path) -> None:
    engine, index_file, copy = replaced_by_a_copy(tmp_path, wait_s=60)
    db = index_file.path
    assert db is not None
    copy.unlink()
    db.unlink()
    assert index_file.moved() == "was deleted"
    index_file.reopen()
    with engine.connect() as conn:  # a new index at head: the probe table went with the file
        tables = {r[0] for r in conn.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "runs" in tables and "probe" not in tables
    engine.dispose()


def test_the_thread_that_opens_it_again_is_told_at_once_instead_of_waiting_for_itself(
        tmp_path: Path) -> None:
    # a server's indexer meets the replacement within a pass; it is the thread that
    # reopens the index, so waiting for the reopen would wait out its bound for nothing
    engine, index_file, copy = replaced_by_a_copy(tmp_path, wait_s=600)
    assert index_file.path is not None
    index_file.owner = threading.get_ident()
    os.replace(copy, index_file.path)
    engine.dispose()  # no idle connection to the old file left: the next one is new
    with pytest.raises(IndexMoved, match="was deleted or replaced; it is opened again "
                                         "before the next pass"):
        probe(engine)
    index_file.reopen()
    assert probe(engine) == [1]
    engine.dispose()
