"""Where the indexer stopped in each file of a run (the `ingest_offsets` rows): byte
offset, line and last seq of a record file, mtime of a whole file."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, bindparam, select, update

from runwatch.store import schema as s
from runwatch.store.dialect import conflict_insert

# Built once: the indexer runs these for every file of every run it looks at, and making
# a statement anew cost more than running it (about 0.5 ms each, most of a pass over a
# run that grew by one line).
_o = s.ingest_offsets.c
# (bound names other than the columns': an UPDATE keeps those for its SET clause)
_THIS_FILE = (_o.run_pk == bindparam("at_run"), _o.file == bindparam("at_file"))
_FIND = select(_o.offset, _o.line_no, _o.last_seq, _o.mtime).where(*_THIS_FILE)
_OFFSET = select(_o.offset).where(*_THIS_FILE)
_SET_MTIME = update(s.ingest_offsets).where(*_THIS_FILE).values(mtime=bindparam("to_mtime"))
_LOCK = update(s.ingest_offsets).where(*_THIS_FILE).values(offset=_o.offset)
_MOVE = update(s.ingest_offsets).where(*_THIS_FILE).values(
    offset=bindparam("to_offset"), line_no=bindparam("to_line"), last_seq=bindparam("to_seq"),
    bad_lines=_o.bad_lines + bindparam("more_bad", type_=_o.bad_lines.type))


class Purged(Exception):
    """A file's ingest offsets vanished while it was read: a new attempt of the run was
    indexed meanwhile (by another indexer), so what was read belongs to the old one."""


def offset_row(conn: Connection, run_pk: int, name: str) -> dict[str, Any]:
    """The file's offset, line_no, last_seq and mtime; a new row at the start if none."""
    this = {"at_run": run_pk, "at_file": name}
    row = conn.execute(_FIND, this).first()
    if row is None:
        _insert_row(conn, run_pk, name)
        row = conn.execute(_FIND, this).one()
    return dict(row._mapping)


def _insert_row(conn: Connection, run_pk: int, name: str) -> None:
    """A file's row at its start, unless there is one (another indexer, `runwatch submit`'s
    or a server's, may insert it first)."""
    conn.execute(conflict_insert(conn.dialect.name, s.ingest_offsets).values(
        run_pk=run_pk, file=name, offset=0, line_no=0, last_seq=-1, bad_lines=0,
    ).on_conflict_do_nothing())


def set_mtime(conn: Connection, run_pk: int, name: str, mtime: float) -> bool:
    """Record the mtime a whole file was read at; False when its row is gone (Purged)."""
    return conn.execute(_SET_MTIME, {"at_run": run_pk, "at_file": name, "to_mtime": mtime}
                        ).rowcount > 0


def move_offsets(conn: Connection, run_pk: int, name: str, offset: int, line_no: int,
                 last_seq: int, bad_lines: int) -> bool:
    """Where a record file's indexing stopped, after a slice with `bad_lines` more lines
    refused; False when its row is gone (Purged)."""
    return conn.execute(_MOVE, {"at_run": run_pk, "at_file": name, "to_offset": offset,
                                "to_line": line_no, "to_seq": last_seq, "more_bad": bad_lines}
                        ).rowcount > 0


def offsets_of(conn: Connection, run_pk: int) -> dict[str, int]:
    """Where the indexer stopped in each of a run's files (bytes; 0 for a whole file)."""
    return {f: int(off or 0) for f, off in conn.execute(
        select(_o.file, _o.offset).where(_o.run_pk == bindparam("at_run")), {"at_run": run_pk})}


def grown(conn: Connection, run_pk: int, name: str, size: int) -> bool:
    """Whether a record file of `size` bytes holds bytes past where the indexer stopped."""
    offset = conn.execute(_OFFSET, {"at_run": run_pk, "at_file": name}).scalar()
    return size > (offset or 0)


def lock_offsets(conn: Connection, run_pk: int, name: str) -> None:
    """Take the write lock (SQLite) or the file's offsets row (PostgreSQL) first thing in a
    slice's transaction, so two indexers of one run (a server's, a worker's, a CLI's) read
    a file one after the other, each from where the other stopped, instead of both storing
    the same records (new metric keys then collide).

    A file with no row yet gets one first, so the lock is held either way: locking only a
    row that was there let an indexer that found none read unlocked, and on PostgreSQL two
    indexers of a new run (a submit's and the server's) stored the same events in turns and
    deadlocked."""
    this = {"at_run": run_pk, "at_file": name}
    if conn.execute(_LOCK, this).rowcount == 0:
        # waits for another transaction inserting the row, then locks what it committed
        _insert_row(conn, run_pk, name)
        conn.execute(_LOCK, this)
