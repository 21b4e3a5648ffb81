"""The SQLite index's write-ahead log does not keep the size of the largest transaction
ever written (a first index of a long run writes hundreds of MB in a few): once the log
restarts after a checkpoint it is cut back to `WAL_LIMIT_BYTES`, while the server, its
workers and the CLI keep connections open."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from runwatch.store.db import WAL_LIMIT_BYTES, open_engine


def test_the_log_is_cut_back_after_a_large_transaction(tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    wal = tmp_path / "index.db-wal"
    engine = open_engine(db)
    try:
        mib = 1024 * 1024
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE scratch (x BLOB)"))
            for _ in range(WAL_LIMIT_BYTES // mib + 16):
                conn.execute(text(f"INSERT INTO scratch VALUES (randomblob({mib}))"))
        assert wal.stat().st_size > WAL_LIMIT_BYTES
        # the next commits checkpoint it and start the log again from its beginning
        for _ in range(3):
            with engine.begin() as conn:
                conn.execute(text("INSERT INTO scratch VALUES (randomblob(100))"))
        assert wal.stat().st_size <= WAL_LIMIT_BYTES
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM scratch")).scalar() == 83
    finally:
        engine.dispose()
