"""Opening the index database: SQLite (WAL) by default, PostgreSQL by URL, schema at head.

A new database is created from schema.py and stamped at the newest migration; an older
one is brought forward with Alembic, which is said once on stderr (the process's log) by
the process that does it, since an older runwatch cannot open the index after. Both paths
end at the same schema. A database a newer runwatch made is refused, saying what to do.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    MetaData,
    String,
    Table,
    create_engine,
    event,
    inspect,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DatabaseError, DBAPIError, OperationalError

from runwatch.rundir.jsonl import NUL_STANDIN
from runwatch.store.schema import metadata

log = logging.getLogger(__name__)

# The newest migration in store/migrations/versions (a test keeps the two in step).
HEAD_REVISION = "0021"
MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# The connection pool of a database file or server. A server's indexer uses one or two
# connections, its live streams at most four at once (server/pollers.py), and each API
# request one while it runs; the rest of the pool is for requests. A request that finds
# every connection busy gives up after POOL_TIMEOUT_S (the API answers 503 with a retry
# hint) instead of SQLAlchemy's default 30 s; open_engine(pool_timeout_s=...) sets another
# wait (tests use a short one to reach that 503 quickly).
POOL_SIZE = 10
POOL_OVERFLOW = 20
POOL_TIMEOUT_S = 5.0
# How long opening an index waits for another process that is creating it.
CREATE_WAIT_S = 30.0
# How long a server's request waits for its index opened again (IndexFile), and the reopen
# waits for the connections to the old file to end.
REOPEN_WAIT_S = 30.0


# The PostgreSQL advisory lock every `writing` transaction holds (the bytes of "rnwt").
WRITE_LOCK_KEY = 0x726E7774
# The one a schema upgrade holds (the bytes of "rnmg"): processes that open an older
# database together upgrade it one after the other, the later ones finding it at head.
MIGRATE_LOCK_KEY = 0x726E6D67


class StoreError(RuntimeError):
    """The index database cannot be opened or is of an unknown version."""


class IndexUnusable(StoreError):
    """The index database can no longer be written or read where it is: its disk is full,
    or its file is damaged. Its text says so and what to do, in one line; the runs folder
    is the record, so a new index anywhere holds it all again."""


class IndexMoved(IndexUnusable):
    """The index file was deleted or replaced while the thread that opens it again
    (IndexFile.owner) was at work in it: it stops and opens it again."""


# The words for each: the driver's own first line goes between the brackets.
INDEX_FULL = ("the index DB is on a full disk ({why}): free space, or point --db elsewhere; "
              "the runs folder is indexed again there")
INDEX_DAMAGED = ("the index DB is damaged ({why}): delete it (the runs folder is indexed "
                 "again into a new one) or point --db elsewhere")
# SQLite's primary result codes (an extended code's low byte) and PostgreSQL's SQLSTATEs
_SQLITE_FULL, _SQLITE_CORRUPT = 13, 11
_PG_FULL, _PG_DAMAGED = frozenset({"53100"}), frozenset({"XX001", "XX002"})


def unusable(exc: BaseException) -> IndexUnusable | None:
    """The IndexUnusable an error met in the index means (the driver's error, or SQLAlchemy's
    around it), if it means one. A plain OSError of a full disk is not the index's: the runs
    folder a route or the indexer writes may be on another disk (a server's retry that
    writes a run's events there is told that disk is full, not to move --db)."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, IndexUnusable):
            return e
        code = getattr(e, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        state = getattr(e, "sqlstate", None)
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if primary == _SQLITE_FULL or state in _PG_FULL:
            return IndexUnusable(INDEX_FULL.format(why=why))
        if primary == _SQLITE_CORRUPT or state in _PG_DAMAGED:
            return IndexUnusable(INDEX_DAMAGED.format(why=why))
        e = getattr(e, "orig", None) or e.__cause__ or e.__context__
    return None


def database_url(target: str | Path) -> str:
    """A SQLAlchemy URL for a URL or a plain file path (a SQLite database file)."""
    s = str(target)
    if "://" in s:
        # libpq's scheme (psql, DATABASE_URL), and a PostgreSQL URL with no driver:
        # SQLAlchemy knows neither as the driver runwatch installs (psycopg 3)
        scheme, rest = s.split("://", 1)
        scheme = scheme.lower()  # a scheme is case-insensitive; SQLAlchemy's names are not
        if scheme in ("postgres", "postgresql"):
            return f"postgresql+psycopg://{rest}"
        return f"{scheme}://{rest}"
    return f"sqlite:///{Path(s).expanduser().resolve()}"


# The URL schemes of the stores runwatch installs a driver for (database_url's output).
KNOWN_SCHEMES = ("sqlite", "postgresql+psycopg")


def _unknown_scheme(url: str) -> StoreError:
    """What a URL of a database runwatch cannot keep its index in says, and what to pass
    (its password left out)."""
    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except Exception:
        shown = url.split("://", 1)[0] + "://…"
    return StoreError(f"cannot open database {shown}: runwatch keeps its index in SQLite (a "
                      "file path, or sqlite:///PATH) or PostgreSQL "
                      "(postgresql://USER@HOST/DB); pass one of these")


def open_engine(target: str | Path, migrate: bool = True, *,
                pool_timeout_s: float = POOL_TIMEOUT_S) -> Engine:
    """An Engine for `target` (URL or SQLite path) whose schema is at head; a request for
    a connection waits at most `pool_timeout_s` for a free one."""
    url = database_url(target)
    if url.split("://", 1)[0] not in KNOWN_SCHEMES:
        raise _unknown_scheme(url)
    kwargs: dict[str, Any] = {}
    pooled = True
    made: Path | None = None  # the SQLite file this call makes, if it makes one
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[1] if ":///" in url else ""
        pooled = bool(path) and path != ":memory:"  # an in-memory database has no pool
        if pooled:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            made = None if Path(path).exists() else Path(path)
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
    if pooled:
        kwargs.update(pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW,
                      pool_timeout=pool_timeout_s)
    try:
        engine = create_engine(url, **kwargs)
    except Exception as exc:
        raise StoreError(f"cannot open database {url!r}: {exc}") from exc
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    elif engine.dialect.name == "postgresql":
        event.listen(engine, "before_cursor_execute", _no_nul, retval=True)
    if migrate:
        try:  # the first connection: no server, no such database or role
            engine.connect().close()
        except OperationalError as exc:
            engine.dispose()
            _unmake(made)
            # a disk too full to make the file in is told so, not to check permissions
            raise (unusable(exc) or StoreError(_cannot_connect(engine, exc))) from exc
        except DatabaseError:
            pass  # a file that is no SQLite database: ensure_schema names it
        try:
            ensure_schema(engine)  # its own errors (a lock held too long) are its own
        except DBAPIError as exc:
            found = unusable(exc)
            if found is None:
                raise
            engine.dispose()
            _unmake(made)
            raise found from exc
        if engine.dialect.name == "sqlite" and pooled:
            event.listen(engine, "do_connect", _existing_file_only)
    return engine


def _unmake(made: Path | None) -> None:
    """Remove the index file an open that failed made while it is still empty (a disk too
    full to write its first page), with its -wal and -shm files, so no 0-byte index.db is
    left behind; a file with anything in it, or one that was there before, stays."""
    with contextlib.suppress(OSError):
        if made is None or made.stat().st_size > 0:
            return
        for leftover in (made.with_name(made.name + "-wal"),
                         made.with_name(made.name + "-shm"), made):
            leftover.unlink(missing_ok=True)


def _existing_file_only(_dialect: Any, _record: Any, cargs: list[Any],
                        cparams: dict[str, Any]) -> None:
    """Open an index file made already, never a new empty one in its place: a connection
    opened once the file was deleted (a server's request) made an empty file there, which
    answered "no such table" until the index was made again (IndexFile.reopen)."""
    if not str(cargs[0]).startswith("file:"):
        cargs[0] = f"file:{quote(str(cargs[0]))}?mode=rw"
        cparams["uri"] = True


def _cannot_connect(engine: Engine, exc: OperationalError) -> str:
    """What a failed first connection says, and what to do: the driver's own first line
    (which names the cause: refused, no such database, no such role), the URL without
    its password."""
    said = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else str(exc)
    where = engine.url.render_as_string(hide_password=True)
    if engine.dialect.name == "sqlite":
        return (f"cannot open the index {engine.url.database}: {said}; check that its "
                "folder is writable, or point --db at another file")
    return (f"cannot connect to the database {where}: {said}; check that the server "
            "runs and takes connections there, that the database exists (create it: "
            "createdb NAME) and that this user may connect to it")


class IndexFile:
    """The SQLite file an engine's index is in, as it was when opened (its device and
    inode), for a process that keeps the engine open for long (a server's indexer): a file
    deleted at its path, or replaced by another, while the process writes on into the one it
    opened, is told by `moved`, and `reopen` opens the index at the path again. An index
    that is no file (PostgreSQL, in memory) is never moved.

    The engine's connections are watched so that none reads the new file through the old
    one's WAL and shared memory, which SQLite leaves at the path when a file is replaced:
    a connection opened once the file at the path is no longer the one opened (a request
    between the replacement and `reopen`) waits, up to `wait_s`, for `reopen` to finish
    (the `owner` thread, which calls it, is told IndexMoved at once), and `reopen` waits
    for every connection opened before it to close (each is closed as it is given back)
    before it removes those files and opens the new one. Without this a request's
    connection to the new file, made through the old shared memory, held a lock there
    that the reopened index waited out for 30 s."""

    def __init__(self, engine: Engine, wait_s: float = REOPEN_WAIT_S) -> None:
        self.engine = engine
        self.wait_s = wait_s
        database = engine.url.database if engine.dialect.name == "sqlite" else None
        # made absolute now: SQLAlchemy opens a relative path from the working folder of
        # the time, so a later chdir would make the file look deleted
        self.path = (Path(os.path.abspath(database)) if database and database != ":memory:"
                     else None)
        self.identity = self._identity()
        self._changed = threading.Condition()
        self._reopening = False
        self._stale = False  # the file was found moved and is not opened again yet
        self._open: set[int] = set()  # id() of every connection open to the index
        # the thread that calls `reopen` (a server's indexer): it does not wait for itself
        self.owner: int | None = None
        if self.path is not None:
            # the connections opened before the watch began are closed: every one is known
            engine.dispose()
            event.listen(engine, "connect", self._on_connect, insert=True)
            event.listen(engine, "checkin", self._on_checkin)
            event.listen(engine, "close", self._on_close)
            event.listen(engine, "close_detached", self._on_close_detached)

    def _identity(self) -> tuple[int, int] | None:
        if self.path is None:
            return None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def moved(self) -> str | None:
        """What became of the file since it was opened ("was deleted", "was replaced by
        another file"), or None while it is the one opened (one stat call)."""
        if self.path is None:
            return None
        now = self._identity()
        if now == self.identity:
            return None
        self._stale = True  # the connections given back from now on are closed
        return "was deleted" if now is None else "was replaced by another file"

    def _on_connect(self, dbapi_conn: Any, record: Any) -> None:
        # before the pragmas, whose first read opens the WAL and shared memory at the path:
        # the file the connection opened is the one at the path now (a stat after the open)
        deadline = time.monotonic() + self.wait_s
        with self._changed:
            while self._reopening or self._identity() != self.identity:
                if threading.get_ident() == self.owner:
                    dbapi_conn.close()
                    raise IndexMoved(f"the index {self.path} was deleted or replaced; it is "
                                     "opened again before the next pass")
                left = deadline - time.monotonic()
                if left <= 0:
                    dbapi_conn.close()
                    # "locked": the API answers 503, retry, as for a file locked too long
                    raise sqlite3.OperationalError(
                        f"database is locked: the index {self.path} was deleted or replaced "
                        "and is being opened again; retry in a few seconds")
                self._changed.wait(min(left, 0.5))  # a moved file is seen without a notify
            self._open.add(id(dbapi_conn))
            record.info["index_identity"] = self.identity

    def _on_checkin(self, dbapi_conn: Any, record: Any) -> None:
        # a connection to the old file is closed as it is given back, not kept in the pool,
        # once the file is known to have moved (no stat here: every request gives one back)
        if dbapi_conn is not None and (self._reopening or self._stale
                                       or record.info.get("index_identity") != self.identity):
            record.invalidate()

    def _on_close(self, dbapi_conn: Any, _record: Any) -> None:
        self._on_close_detached(dbapi_conn)

    def _on_close_detached(self, dbapi_conn: Any) -> None:
        with self._changed:
            self._open.discard(id(dbapi_conn))
            self._changed.notify_all()

    def reopen(self) -> None:
        """Wait for every connection to the old file to close, then open the index at the
        path: a new one made there (its folder too), or the file found there brought to
        head. Raises StoreError (IndexUnusable on a full disk) saying what to do; the file
        stays `moved` until a reopen succeeds."""
        assert self.path is not None
        with self._changed:
            self._reopening = self._stale = True
        try:
            self._reopen()
        finally:
            with self._changed:
                self._reopening = False
                self._changed.notify_all()

    def _reopen(self) -> None:
        assert self.path is not None
        try:
            # made whole beside it first: a request that opened the path while its tables
            # were being made found none ("no such table")
            fresh = None if self.path.exists() else self._made_aside()
            self.engine.dispose()  # the idle ones; the rest close as they are given back
            self._wait_closed()
            # the old file's WAL and shared memory, which SQLite leaves at the path when
            # its file is deleted or replaced: a file there would be read through them (the
            # old file's pages read as the new one's) and share them with the old file's
            # last connections (other processes' reads failed with "disk I/O error")
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self.path}{suffix}")
            if fresh is not None:
                try:
                    os.link(fresh, self.path)
                except FileExistsError:
                    pass  # another process made one there meanwhile: that one is opened
                finally:
                    os.unlink(fresh)
            # on an engine of its own: this one's connections wait until the reopen is done
            open_engine(self.path).dispose()
        except OSError as exc:
            raise StoreError(f"cannot make the index {self.path} again ({exc.strerror or exc}): "
                             "check that its folder is writable, or point --db elsewhere"
                             ) from exc
        except DBAPIError as exc:
            found = unusable(exc)
            if found is None:
                raise StoreError(f"cannot make the index {self.path} again ({exc.orig}): "
                                 "point --db elsewhere") from exc
            raise found from exc
        self.identity = self._identity()
        self._stale = False

    def _wait_closed(self) -> None:
        deadline = time.monotonic() + self.wait_s
        with self._changed:
            while self._open:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StoreError(
                        f"the index {self.path} was deleted or replaced, and {len(self._open)} "
                        "of this server's connections to the old file are still in use after "
                        f"{self.wait_s:g} s; it is opened again once they end")
                self._changed.wait(left)

    def _made_aside(self) -> Path:
        """A new index at head beside the path (its folder made again if it is gone)."""
        assert self.path is not None
        aside = self.path.with_name(f"{self.path.name}.{os.getpid()}.new")
        for suffix in ("", "-wal", "-shm"):  # left by a reopen that failed halfway
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{aside}{suffix}")
        open_engine(aside).dispose()  # its last connection leaves no WAL behind
        return aside


@contextmanager
def writing(engine: Engine) -> Iterator[Connection]:
    """A transaction for reading rows and then writing on what they said (a job row read,
    then requeued or let go). `engine.begin()` alone does not keep such reads true on
    SQLite: Python's sqlite3 begins a transaction only at the first write, so the reads
    before it see a database another process may change in between. Here SQLite takes
    `BEGIN IMMEDIATE`: the transaction holds the database's write lock from its start
    (another writer waits for it, up to the connection's busy timeout), so nothing it read
    changes before it commits. PostgreSQL takes a transaction-level advisory lock, so
    `writing` transactions run one at a time as on SQLite; a plain transaction is not held
    by it, so a row read there stays as read only if it is read with `FOR UPDATE`
    (`store.jobs.job_row(…, lock=True)`)."""
    with engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        elif conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": WRITE_LOCK_KEY})
        yield conn


def _no_nul(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any,
            executemany: bool) -> tuple[str, Any]:
    """PostgreSQL refuses a text parameter that holds NUL, failing the whole statement (a
    batch of good log lines with it). Run files and API bodies are read with NUL_STANDIN
    in its place already (`rundir.jsonl.loads_line`); what reaches a statement by another
    way (a config's text, a token's name) is sent with it here."""
    if executemany and isinstance(parameters, list | tuple):
        return statement, _rows_without_nul(parameters)
    return statement, _without_nul(parameters)


def _without_nul(params: Any) -> Any:
    if isinstance(params, dict):
        if any(type(v) is str and "\x00" in v for v in params.values()):
            return {k: v.replace("\x00", NUL_STANDIN) if type(v) is str else v
                    for k, v in params.items()}
    elif (isinstance(params, list | tuple)
          and any(type(v) is str and "\x00" in v for v in params)):
        return type(params)(v.replace("\x00", NUL_STANDIN) if type(v) is str else v
                            for v in params)
    return params


def _rows_without_nul(rows: list[Any] | tuple[Any, ...]) -> Any:
    """executemany's rows: only the columns that hold text or None in the first row are
    looked at (a column's type is its table's; a batch of points holds no text)."""
    if not rows:
        return rows
    first = rows[0]
    items = first.items() if isinstance(first, dict) else enumerate(first)
    texts = [k for k, v in items if v is None or type(v) is str]
    if not texts or not any(type(row[k]) is str and "\x00" in row[k]
                            for row in rows for k in texts):
        return rows
    return [_without_nul(row) for row in rows]


WAL_LIMIT_BYTES = 64 * 1024 * 1024


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    # WAL lets the web server read while the indexer writes; NORMAL is durable across
    # process crashes, which is the failure the run directory itself already covers.
    _journal_wal(cur)
    cur.execute("PRAGMA synchronous=NORMAL")
    # the WAL grows to the largest transaction written since it last restarted (a first
    # index of a long run: hundreds of MB) and keeps that size while any connection is
    # open; past a checkpoint, a restarted WAL is cut back to this
    cur.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA cache_size=-65536")
    cur.execute("PRAGMA temp_store=MEMORY")
    cur.close()


def _journal_wal(cur: Any, wait_s: float = CREATE_WAIT_S) -> None:
    """Put the database in WAL mode, waiting up to `wait_s` for other connections.

    Switching a file to WAL needs it alone. A new file is still in rollback mode until its
    first write commits, so a process opening it while another makes the index (in a
    `BEGIN IMMEDIATE` transaction) asks for the switch against that lock, and SQLite answers
    "database is locked" at once instead of calling the busy handler (it would deadlock
    waiting while holding its own read lock). So the switch is asked for again, outside
    any lock, until it is granted or the wait runs out.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = "locked" in str(exc) or "busy" in str(exc)
            if not busy or time.monotonic() > deadline:
                raise
        time.sleep(0.02)


def ensure_schema(engine: Engine, wait_s: float = CREATE_WAIT_S) -> None:
    """Create a new database at head, or migrate an older one to head.

    Several processes may open a new index at once (`runwatch ui` and `runwatch submit`
    started together): one creates it while the others wait, up to `wait_s`, for it to be
    whole. On SQLite the index is made in one write transaction taken at its start
    (`BEGIN IMMEDIATE`): the others wait on its lock and then find it whole, where two
    makers creating tables side by side could each fail halfway and leave a half-made index
    nobody finished. A half-made index (only runwatch's tables, not yet stamped), as an
    older runwatch could leave, is waited for, then named.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            tables, version = _state(engine)
        except DatabaseError as exc:
            if engine.dialect.name != "sqlite" or "not a database" not in str(exc.orig):
                raise
            raise StoreError(f"{engine.url.database} is not a SQLite database, so not a "
                             "runwatch index; point --db at an index or at a new file "
                             "(it is made there)") from exc
        if version == HEAD_REVISION:
            return
        if not tables - {"alembic_version"}:
            try:
                with engine.begin() as conn:
                    if conn.dialect.name == "sqlite":
                        conn.exec_driver_sql("BEGIN IMMEDIATE")
                    metadata.create_all(conn)
                    _stamp(conn)
                return
            except DBAPIError:
                if time.monotonic() > deadline:  # not another process creating it: say why
                    raise
        elif version is not None:
            _upgrade(engine)
            return
        elif not tables - {"alembic_version"} <= set(metadata.tables):
            raise StoreError("the database holds tables that are not a runwatch index; "
                             "point --db at a new file or an empty database")
        elif time.monotonic() > deadline:
            raise StoreError(f"the database holds part of a runwatch index that nothing "
                             f"finished making in {wait_s:g} s (a process that made it was "
                             "stopped); delete the file, or point --db at a new one, and "
                             "the runs folder is indexed again")
        time.sleep(0.05)  # another process is making the index: look again


def _state(engine: Engine) -> tuple[set[str], str | None]:
    """The database's tables and its schema revision (None when it is not stamped)."""
    with engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
        version = None
        if "alembic_version" in tables:
            version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return tables, version


def _stamp(conn: Connection) -> None:
    """Record a new database as being at head, as `alembic stamp head` would (Alembic's
    own table), without importing Alembic: it is a fifth of a short command's start."""
    version = Table("alembic_version", MetaData(),
                    Column("version_num", String(32), primary_key=True))
    version.create(conn, checkfirst=True)
    conn.execute(version.delete())
    conn.execute(version.insert().values(version_num=HEAD_REVISION))


def _named(engine: Engine) -> str:
    """The index as a message names it: its file, or its URL without the password."""
    if engine.dialect.name == "sqlite":
        return f"the index {engine.url.database}"
    return f"the index database {engine.url.render_as_string(hide_password=True)}"


def _upgrade(engine: Engine) -> None:
    """Bring an index of an older schema revision to head with Alembic, one process at a
    time, and say so once (a warning on the `runwatch.store.db` logger, which a command
    prints on stderr): the upgrade is one-way, and an older runwatch then refuses the
    index. A process that finds it upgraded meanwhile says nothing; one that finds a
    revision it does not know (a newer runwatch's) raises StoreError saying what to do."""
    from alembic import command
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    known = {script.revision for script in ScriptDirectory.from_config(cfg).walk_revisions()}
    version: str | None = None
    with engine.connect() as conn:
        sqlite = conn.dialect.name == "sqlite"
        if sqlite:
            # A batch migration copies a table, drops it and renames the copy; with foreign
            # keys on, dropping `runs` would cascade to every table that refers to it. The
            # pragma only takes effect outside a transaction.
            conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            conn.commit()
        try:
            with conn.begin():
                if sqlite and not conn.connection.dbapi_connection.in_transaction:  # type: ignore[union-attr]
                    # pysqlite opens its transaction only before a first INSERT, UPDATE or
                    # DELETE: a migration's leading CREATE TABLE would commit on its own, and
                    # one that failed later would leave its tables at the old revision.
                    # IMMEDIATE: the write lock from the start, so a second process waits
                    # and then reads the revision the first left (head: nothing to do).
                    conn.exec_driver_sql("BEGIN IMMEDIATE")
                elif not sqlite:
                    # the same on PostgreSQL: one upgrade at a time, each reading the
                    # revision (Alembic reads it after this) once the one before committed
                    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                                 {"key": MIGRATE_LOCK_KEY})
                # read under the lock: another process may have upgraded it meanwhile
                version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
                if version == HEAD_REVISION:
                    return
                if version not in known:
                    raise StoreError(_unknown_revision(engine, version))
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"cannot upgrade {_named(engine)} from schema {version} to "
                             f"{HEAD_REVISION}: {exc}; it was left at {version}") from exc
        finally:
            if sqlite:
                conn.exec_driver_sql("PRAGMA foreign_keys=ON")
                conn.commit()
    log.warning("upgraded %s from schema %s to %s; runwatch versions before this one cannot "
                "open it now", _named(engine), version, HEAD_REVISION)


def _unknown_revision(engine: Engine, version: str | None) -> str:
    """Why an index at a schema revision this runwatch does not know is refused, and what
    to do: a newer runwatch made it (its revisions count on from HEAD_REVISION), or
    something else stamped it."""
    if version is not None and version.isdigit() and int(version) > int(HEAD_REVISION):
        return (f"{_named(engine)} was made by a newer runwatch (schema {version}; this one "
                f"knows up to {HEAD_REVISION}): upgrade runwatch, or point --db at another "
                "index (the runs folder is indexed again there)")
    return (f"{_named(engine)} is at schema {version!r}, which no runwatch made: point --db "
            "at another index (the runs folder is indexed again there)")
