"""Where the CLI finds runs and their index, and bringing the index up to date."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runwatch.rundir.format import STATE_DIR

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine, Row

    from runwatch.ingest.indexer import IndexReport
    from runwatch.store.plain import Reader
    from runwatch.store.points import PointColumns

DEFAULT_DIR = "runs"
# runwatch's folder in a runs folder: the index is made there unless --db names another
INDEX_DIRNAME = STATE_DIR
_SQLITE_IOERR = 10  # "disk I/O error", the primary code of each SQLITE_IOERR_*


def runs_dir(option: Path | None) -> Path:
    """--dir, else RUNWATCH_DIR, else ./runs."""
    if option is not None:
        return option
    return Path(os.environ.get("RUNWATCH_DIR") or DEFAULT_DIR)


def default_db(directory: Path) -> Path:
    """The embedded index of a runs folder lives inside it, in a folder runs never use."""
    return directory / INDEX_DIRNAME / "index.db"


@dataclass
class Context:
    directory: Path
    engine: Engine

    def refresh(self, forget_all_gone: bool = False) -> IndexReport:
        """Index what is new in the folder (health findings included), so answers are
        current; the runs whose folder is gone leave the index (with `forget_all_gone`,
        also when many went at once or the folder is empty: `runwatch index --forget-gone`).
        The report says what the pass met (the command prints it: the indexer's log would
        say it twice). An index that cannot be used (a full disk, a damaged file) exits 2
        saying so in one line."""
        from runwatch.cli.output import fail
        from runwatch.ingest.indexer import Indexer
        from runwatch.store.db import IndexUnusable

        try:
            return Indexer(self.engine, self.directory, hooks=[_health_hook],
                           events_hooks=[_health_end], log_folder=False,
                           forget_all_gone=forget_all_gone).index_once()
        except IndexUnusable as exc:
            raise fail(str(exc)) from exc
        except Exception as exc:
            _exit_if_moved(exc, self.directory, _index_of(self.engine))
            raise

    def current_run(self, ref: str) -> tuple[Row[Any], bool]:
        """The run `ref` names as the index holds it (or exit 2 saying why not), and
        whether its process is gone: it has not ended, and the process that wrote it has
        died. A process writes its end before it dies, so a row read before its death was
        seen can lack an end that is on disk; the folder is indexed once more then, and
        only that read can say the process died without an end. Judge "gone" here, on the
        row returned, not again later: the process may die in between."""
        from runwatch.cli.options import resolve_or_exit
        from runwatch.store.runrows import process_gone

        with self.engine.connect() as conn:
            row = resolve_or_exit(conn, ref)
        if not process_gone(row):
            return row, False
        self.refresh()
        with self.engine.connect() as conn:
            row = resolve_or_exit(conn, row.run_id)
        return row, process_gone(row)


def _health_hook(conn: Connection, run_pk: int, points: Mapping[str, PointColumns]) -> None:
    # the health rules load only when new points come to evaluate
    from runwatch.health.store import on_metrics

    on_metrics(conn, run_pk, points)


def _health_end(conn: Connection, run_pk: int) -> None:
    from runwatch.health.store import on_events

    on_events(conn, run_pk)


def open_context(directory: Path | None, db: str | None, refresh: bool = True,
                 read_only: bool = False, dir_argument: bool = False) -> Context:
    """The runs folder and its index, brought up to date unless `refresh` is False.

    A `read_only` command (one that only shows what is there) makes nothing: where the
    folder or the index file does not exist it says so instead of creating them. A command
    that takes the folder as its argument DIR (`dir_argument`: runwatch resources, index),
    not as --dir, is told so in the hint of a folder that is not one."""
    from runwatch.cli.output import fail
    from runwatch.store import StoreError, open_engine
    from runwatch.store.db import database_url

    d = _checked_dir(directory, db, read_only, dir_argument)
    target = db or default_db(d)
    try:
        engine = open_engine(target)
    except StoreError as exc:
        _exit_if_moved(exc, d, database_url(target))
        raise fail(str(exc)) from exc
    except Exception as exc:
        _exit_if_moved(exc, d, database_url(target))
        raise
    ctx = Context(d, engine)
    try:
        if (refresh and (d.is_dir() or not read_only) and not _engine_unchanged(engine, d)
                and not (read_only and _indexed_elsewhere(engine, d))):
            _warn(ctx.refresh(), d, db)
    except Exception as exc:
        _exit_if_moved(exc, d, _index_of(engine))
        raise
    return ctx


def _index_of(engine: Engine) -> str:
    from runwatch.ingest.lease import index_name

    return index_name(engine)


def _exit_if_moved(exc: BaseException, d: Path, index: str) -> None:
    """Exit 2, saying so in one line, where reading a SQLite index met "disk I/O error"
    while a server indexes folder `d` into it (its lease): the index file was deleted or
    replaced under that server, whose connections keep the old file's WAL at the path
    until its next pass makes the index again there (store.db.IndexFile). Any other error
    is left to be raised."""
    if not index.startswith("sqlite:///") or not _io_error(exc):
        return
    from runwatch.cli.output import fail
    from runwatch.ingest.lease import holder

    server = holder(d, index)
    if server is None:
        return
    path = index.split(":///", 1)[1]
    raise fail(f"the index {path} was deleted or replaced while runwatch ui or server "
               f"(process {server.pid}) uses it; that server makes it again at its next "
               "pass: run this command again in a moment") from exc


def _io_error(exc: BaseException) -> bool:
    """Whether SQLite's "disk I/O error" (SQLITE_IOERR) is among `exc` and its causes."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        code = getattr(e, "sqlite_errorcode", None)
        if isinstance(code, int) and code & 0xFF == _SQLITE_IOERR:
            return True
        e = getattr(e, "orig", None) or e.__cause__ or e.__context__
    return False


def _indexed_elsewhere(engine: Engine, d: Path) -> bool:
    """Whether a server's indexer indexes folder `d` into this index (its lease): then a
    read command waits for its next pass instead of indexing beside it, and says so when
    that pass is long (the index then holds part of what the folder does)."""
    from runwatch.ingest.lease import index_name, wait_for_pass

    elsewhere, behind = wait_for_pass(d, index_name(engine))
    if behind is not None:
        from runwatch.cli.output import console

        console(stderr=True).print(
            f"note: process {behind.pid} (runwatch ui or server) is indexing {d} and has not "
            "finished its pass; this shows what it has read so far (ask again for more)",
            markup=False)
    return elsewhere


WARNED = 3  # problems a command that indexed its folder shows before it counts the rest


def _warn(report: IndexReport, d: Path, db: str | None) -> None:
    """Say on stderr what a command's indexing met for the first time (a folder it cannot
    read, a bad record), and the runs it forgot (their folder is gone): the indexer says
    each once, so a command that swallowed it would leave a run missing from every list
    without a word."""
    problems = report.problems
    if not problems and not report.forgotten:
        return
    from runwatch.cli.output import console, runwatch_command

    err = console(stderr=True)
    for line in report.forgotten:
        err.print(f"note: {line}", markup=False)
    if not problems:
        return
    for p in problems[:WARNED]:
        err.print(f"warning: {p}", markup=False)
    more = f"{len(problems) - WARNED} more; " if len(problems) > WARNED else ""
    index = runwatch_command("index", str(d), db=db)
    err.print(f"({more}{index} names every folder it cannot read)", markup=False)


def _engine_unchanged(engine: Engine, d: Path) -> bool:
    """Whether the folder holds nothing the index lacks (then the indexer, its imports and
    its queries per run are skipped)."""
    if not d.is_dir():
        return False
    raw = engine.raw_connection()
    try:
        return _unchanged(_driver_reader(engine, raw), d)
    finally:
        raw.close()


def _driver_reader(engine: Engine, raw: Any) -> Reader:
    """Plain SQL over the driver's own connection `raw` of `engine`."""
    from runwatch.store.plain import Reader

    return Reader(raw, "?" if engine.dialect.paramstyle == "qmark" else "%s")


@contextmanager
def open_reader(directory: Path | None, db: str | None, saved: bool = True
                ) -> Iterator[tuple[Reader, Path | None]]:
    """The index, current with its folder, to read with plain SQL (store/plain), and the
    folder where series read from it may be saved (beside a SQLite index; else None, and
    None for a reader of no series, `saved=False`, which leaves numpy unloaded).
    Read-only, as `open_context(read_only=True)`.

    A SQLite index at the schema's head whose folder holds nothing new
    (ingest/unchanged.py) is read without SQLAlchemy or the indexer; otherwise
    `open_context` brings it up to date first. Another database is read over its
    driver's own connection."""
    from runwatch.store import plain

    d = _checked_dir(directory, db, read_only=True)
    target = db or str(default_db(d))
    if "://" in target:
        ctx = open_context(directory, db, read_only=True)
        raw = ctx.engine.raw_connection()
        try:
            yield _driver_reader(ctx.engine, raw), None
        finally:
            raw.close()
            ctx.engine.dispose()
        return
    path = Path(target).expanduser()
    if not path.is_file():  # a folder not indexed yet: its index is made
        open_context(directory, db, read_only=True).engine.dispose()
    conn = plain.connect_sqlite(path)
    try:
        reader = plain.Reader(conn)
        if not plain.schema_current(reader) or (d.is_dir() and not _unchanged(reader, d)):
            open_context(directory, db, read_only=True).engine.dispose()
        if not saved:
            yield reader, None
            return
        from runwatch.store.plain_series import saved_folder  # loads numpy: only here

        yield reader, saved_folder(path)
    except sqlite3.DatabaseError as exc:
        from runwatch.store.db import database_url  # SQLAlchemy: on this error alone

        _exit_if_moved(exc, d, database_url(path))
        _exit_if_unusable(exc)
        raise
    finally:
        conn.close()


def _exit_if_unusable(exc: BaseException) -> None:
    """Exit 2, saying so in one line, where reading the index met a full disk or a damaged
    file (store.db.IndexUnusable)."""
    from runwatch.cli.output import fail
    from runwatch.store.db import unusable

    found = unusable(exc)
    if found is not None:
        raise fail(str(found)) from exc


def _unchanged(reader: Reader, d: Path) -> bool:
    from runwatch.ingest.unchanged import unchanged

    return unchanged(reader, d)


def _checked_dir(directory: Path | None, db: str | None, read_only: bool,
                 dir_argument: bool = False) -> Path:
    """The runs folder; exit 2 where the folder given (--dir, or the argument DIR) is not
    one, or (read-only) where there is nothing to read."""
    from runwatch.cli.output import fail

    d = runs_dir(directory)
    if directory is not None and not d.is_dir():
        raise fail(f"{d} is not a folder of runs",
                   [f"{_give_dir(dir_argument)} the folder your training loop gives "
                    "runwatch.init(dir=…)"])
    if read_only:
        _must_exist(d, db, dir_argument)
    return d


def _give_dir(dir_argument: bool) -> str:
    """How to name the runs folder to a command: as its argument DIR, or with --dir."""
    return "give as DIR" if dir_argument else "pass --dir DIR with"


def _must_exist(d: Path, db: str | None, dir_argument: bool = False) -> None:
    from runwatch.cli.output import fail

    if db is None and not d.is_dir():
        given = "give DIR" if dir_argument else "pass --dir DIR"
        raise fail(f"there is no runs folder here: {d.resolve()} does not exist",
                   [f"{given} or set RUNWATCH_DIR to the folder your training loop "
                    "gives runwatch.init(dir=…) (./runs by default)"])
    if db is not None and "://" not in db and not Path(db).expanduser().is_file():
        raise fail(f"there is no index at {db}",
                   ["pass --db with an index that `runwatch index` or `runwatch ui` made"])
