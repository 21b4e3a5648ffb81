"""A transaction that reads and then writes on what it read (`store.db.writing`) sees no
other writer in between, on SQLite and on PostgreSQL: concurrent read-then-increment
transactions lose no update."""

from __future__ import annotations

import threading
import time

from sqlalchemy import Engine, text

from runwatch.store.db import writing

THREADS = 3
EACH = 12


def _count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT n FROM counter_test")).scalar_one())


def test_read_then_write_transactions_lose_no_update(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE counter_test (n INTEGER NOT NULL)"))
        conn.execute(text("INSERT INTO counter_test (n) VALUES (0)"))
    errors: list[BaseException] = []

    def bump() -> None:
        try:
            for _ in range(EACH):
                with writing(engine) as conn:
                    n = conn.execute(text("SELECT n FROM counter_test")).scalar_one()
                    time.sleep(0.002)  # another writer would slip in here
                    conn.execute(text("UPDATE counter_test SET n = :n"), {"n": n + 1})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=bump) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _count(engine) == THREADS * EACH


def test_a_write_transaction_that_fails_leaves_nothing(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE counter_test (n INTEGER NOT NULL)"))
        conn.execute(text("INSERT INTO counter_test (n) VALUES (0)"))
    try:
        with writing(engine) as conn:
            conn.execute(text("UPDATE counter_test SET n = 5"))
            raise KeyError("stop")
    except KeyError:
        pass
    assert _count(engine) == 0
    with writing(engine) as conn:  # the lock was let go
        conn.execute(text("UPDATE counter_test SET n = 7"))
    assert _count(engine) == 7
