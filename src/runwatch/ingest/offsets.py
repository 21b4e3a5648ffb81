"""Where the indexer stopped in each file of a run (the `ingest_offsets` rows): byte
offset, line, last seq, and tail and mtime as read (ingest/replaced.py) of a record file;
mtime of a whole file."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, bindparam, select, update

from runwatch.ingest.marks import NOT_READ, Stopped
from runwatch.store import schema as s
from runwatch.store.dialect import conflict_insert

# Built once: the indexer runs these for every file of every run it looks at, and making
# a statement anew cost more than running it (about 0.5 ms each, most of a pass over a
# run that grew by one line).
_o = s.ingest_offsets.c
# A record file's tail (ingest/marks.tail_of) is kept in the row's `last_error` column,
# which nothing else uses: a column of its own would cost every index a migration.
_TAIL = _o.last_error
# (bound names other than the columns': an UPDATE keeps those for its SET clause)
_THIS_FILE = (_o.run_pk == bindparam("at_run"), _o.file == bindparam("at_file"))
_FIND = select(_o.offset, _o.line_no, _o.last_seq, _o.mtime, _TAIL.label("tail")
               ).where(*_THIS_FILE)
_STOPPED = select(_o.offset, _TAIL, _o.mtime).where(*_THIS_FILE)
_SET_MTIME = update(s.ingest_offsets).where(*_THIS_FILE).values(mtime=bindparam("to_mtime"))
_LOCK = update(s.ingest_offsets).where(*_THIS_FILE).values(offset=_o.offset)
_MOVE = update(s.ingest_offsets).where(*_THIS_FILE).values(
    offset=bindparam("to_offset"), line_no=bindparam("to_line"), last_seq=bindparam("to_seq"),
    bad_lines=_o.bad_lines + bindparam("more_bad", type_=_o.bad_lines.type),
    last_error=bindparam("to_tail", type_=_TAIL.type),
    mtime=bindparam("to_mtime", type_=_o.mtime.type))
_RESTART = update(s.ingest_offsets).where(*_THIS_FILE).values(
    offset=0, line_no=0, last_seq=-1, bad_lines=0, last_error=None, mtime=None)




class Purged(Exception):
    """A file's ingest offsets vanished while it was read: a new attempt of the run was
    indexed meanwhile (by another indexer), so what was read belongs to the old one."""


def offset_row(conn: Connection, run_pk: int, name: str) -> dict[str, Any]:
    """The file's offset, line_no, last_seq, mtime and tail; a new row at the start if
    none."""
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
                 last_seq: int, bad_lines: int, mark: tuple[str | None, float | None]
                 ) -> bool:
    """Where a record file's indexing stopped (and its mark there: the tail of the bytes
    before it and the file's mtime, ingest/marks.stop_mark), after a slice with
    `bad_lines` more lines refused; False when its row is gone (Purged)."""
    return conn.execute(_MOVE, {"at_run": run_pk, "at_file": name, "to_offset": offset,
                                "to_line": line_no, "to_seq": last_seq, "more_bad": bad_lines,
                                "to_tail": mark[0], "to_mtime": mark[1]}).rowcount > 0


def restart_offsets(conn: Connection, run_pk: int, name: str) -> None:
    """A record file is read again from its start (it was replaced: ingest/replaced.py)."""
    conn.execute(_RESTART, {"at_run": run_pk, "at_file": name})


def offsets_of(conn: Connection, run_pk: int) -> dict[str, Stopped]:
    """Where the indexer stopped in each of a run's files (offset 0 for a whole file)."""
    return {f: Stopped(int(off or 0), tail, mtime) for f, off, tail, mtime in conn.execute(
        select(_o.file, _o.offset, _TAIL, _o.mtime).where(_o.run_pk == bindparam("at_run")),
        {"at_run": run_pk})}


def stopped_at(conn: Connection, run_pk: int, name: str) -> Stopped:
    """Where the indexer stopped in a record file, as the index says now."""
    row = conn.execute(_STOPPED, {"at_run": run_pk, "at_file": name}).first()
    return NOT_READ if row is None else Stopped(int(row[0] or 0), row[1], row[2])


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
