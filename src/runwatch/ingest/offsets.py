"""Where the indexer stopped in each file of a run (the `ingest_offsets` rows): byte
offset, line and last seq of a record file, mtime of a whole file."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select, update

from runwatch.store import schema as s
from runwatch.store.dialect import conflict_insert


class Purged(Exception):
    """A file's ingest offsets vanished while it was read: a new attempt of the run was
    indexed meanwhile (by another indexer), so what was read belongs to the old one."""


def offset_row(conn: Connection, run_pk: int, name: str) -> dict[str, Any]:
    """The file's offset, line_no, last_seq and mtime; a new row at the start if none."""
    o = s.ingest_offsets.c
    find = select(o.offset, o.line_no, o.last_seq, o.mtime).where(o.run_pk == run_pk,
                                                                  o.file == name)
    row = conn.execute(find).first()
    if row is None:
        # another indexer (`runwatch submit`'s, a server's) may insert the row first
        conn.execute(conflict_insert(conn.dialect.name, s.ingest_offsets).values(
            run_pk=run_pk, file=name, offset=0, line_no=0, last_seq=-1, bad_lines=0,
        ).on_conflict_do_nothing())
        row = conn.execute(find).one()
    return dict(row._mapping)


def set_mtime(conn: Connection, run_pk: int, name: str, mtime: float) -> bool:
    """Record the mtime a whole file was read at; False when its row is gone (Purged)."""
    return conn.execute(update(s.ingest_offsets).where(
        s.ingest_offsets.c.run_pk == run_pk, s.ingest_offsets.c.file == name).values(mtime=mtime)
    ).rowcount > 0


def grown(conn: Connection, run_pk: int, name: str, size: int) -> bool:
    """Whether a record file of `size` bytes holds bytes past where the indexer stopped."""
    o = s.ingest_offsets.c
    offset = conn.execute(select(o.offset).where(o.run_pk == run_pk, o.file == name)).scalar()
    return size > (offset or 0)


def lock_offsets(conn: Connection, run_pk: int, name: str) -> None:
    """Take the write lock (SQLite) or the file's offsets row (PostgreSQL) first thing in a
    slice's transaction, so two indexers of one run (a server's, a worker's, a CLI's) read
    a file one after the other, each from where the other stopped, instead of both storing
    the same records (new metric keys then collide)."""
    conn.execute(update(s.ingest_offsets).where(
        s.ingest_offsets.c.run_pk == run_pk, s.ingest_offsets.c.file == name
    ).values(offset=s.ingest_offsets.c.offset))
