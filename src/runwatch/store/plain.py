"""What a command that must start fast reads of the index, over a plain DB-API connection
(sqlite3's own, or the driver's connection under a SQLAlchemy engine): whether the schema
is current, the run a reference names, its metric keys and its job's devices (series:
store/plain_series.py).

Importing SQLAlchemy alone takes 0.45 s of `runwatch runs compare`'s one-second budget on
the project's machine. The SQLAlchemy readers (store/queries.resolve_run, store/keys,
store/jobs, store/series) stay the record of what these answers mean; a test checks that
both answer alike, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The migrations, whose newest file is the schema's head (store/db.HEAD_REVISION).
_VERSIONS = Path(__file__).parent / "migrations" / "versions"
# How long a read waits for a writer's lock (store/db opens SQLite with the same).
SQLITE_TIMEOUT_S = 30
_RUN_COLUMNS = "pk, run_id, name, method, base_model, dataset, config"
RECENT_LISTED = 10
MATCHES_LISTED = 20


class NoSuchRun(LookupError):
    """A run reference matched no run, or more than one (store/queries.RunNotFound's
    message and candidates)."""

    def __init__(self, message: str, candidates: list[str]) -> None:
        super().__init__(message)
        self.candidates = candidates


@dataclass(frozen=True)
class RunRow:
    """The runs columns a comparison reads."""

    pk: int
    run_id: str
    name: str
    method: str | None
    base_model: str | None
    dataset: str | None
    config: str | None


@dataclass(frozen=True)
class Key:
    """A metric key of a run: its id, name and number of stored points."""

    id: int
    key: str
    points: int


class Reader:
    """Plain SQL over a DB-API connection whose parameter marker is `mark` ("?" for
    sqlite3, "%s" for psycopg)."""

    def __init__(self, conn: Any, mark: str = "?") -> None:
        self.conn = conn
        self.mark = mark

    def cursor(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        cur = self.conn.cursor()
        cur.execute(sql if self.mark == "?" else sql.replace("?", self.mark), params)
        return cur

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        cur = self.cursor(sql, params)
        try:
            return list(cur.fetchall())
        finally:
            cur.close()


def connect_sqlite(path: Path) -> sqlite3.Connection:
    """A connection to a SQLite index that only reads (no transaction is held open)."""
    return sqlite3.connect(path, timeout=SQLITE_TIMEOUT_S, isolation_level=None)


def head_revision() -> str:
    """The newest migration's revision: the one a current index is stamped with."""
    return max(p.name.split("_", 1)[0] for p in _VERSIONS.glob("[0-9]*_*.py"))


def split_ref(ref: str) -> tuple[str | None, str]:
    """A run reference as (project, run): `PROJECT/RUN` names a run of one project (a run's
    name and id hold no `/`, so the last one parts them); a plain reference names none."""
    project, slash, run = ref.rpartition("/")
    return (project, run) if slash else (None, ref)


def schema_current(db: Reader) -> bool:
    """Whether the index is at the schema's head (else opening it with SQLAlchemy
    migrates it first)."""
    try:
        found = db.rows("SELECT version_num FROM alembic_version")
    except Exception:  # no such table: a new or foreign database (the driver's own error)
        return False
    return [r[0] for r in found] == [head_revision()]


def resolve_run(db: Reader, ref: str) -> RunRow:
    """The run whose id or name is `ref`, or whose id or name uniquely starts with it; `ref`
    written `PROJECT/RUN` names a run of that project only (store/queries.resolve_run's
    meaning: a name is a run's own within its project)."""
    project, ref = split_ref(ref)
    within, args = ("", ()) if project is None else (" AND project = ?", (project,))
    where = "" if project is None else f" in project {project!r}"
    exact = db.rows(f"SELECT {_RUN_COLUMNS}, project FROM runs WHERE (run_id = ? OR "
                    f"name = ?){within}", ref, ref, *args)
    if len(exact) == 1:
        return RunRow(*exact[0][:-1])
    if exact:
        held = sorted({r[-1] for r in exact})
        said = (f"{ref!r} names runs of {len(held)} projects ({', '.join(held)}); say which "
                f"as PROJECT/{ref} (e.g. {held[0]}/{ref}), or use a run id" if len(held) > 1
                else f"{ref!r} names {len(exact)} runs; use a run id")
        raise NoSuchRun(said, [f"{r[1]}  {r[-1]}/{r[2]}" for r in exact])
    pattern = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    found = db.rows(f"SELECT {_RUN_COLUMNS} FROM runs WHERE (run_id LIKE ? ESCAPE '\\' OR "
                    f"name LIKE ? ESCAPE '\\'){within} ORDER BY created_at DESC "
                    f"LIMIT {MATCHES_LISTED}", pattern, pattern, *args)
    if len(found) == 1:
        return RunRow(*found[0])
    if found:
        raise NoSuchRun(f"{ref!r} matches {len(found)} runs{where}; give more of the id or "
                        "name", [f"{r[1]}  {r[2]}" for r in found])
    recent = db.rows(f"SELECT run_id, name FROM runs WHERE 1 = 1{within} ORDER BY created_at "
                     f"DESC LIMIT {RECENT_LISTED}", *args)
    raise NoSuchRun(f"no run has the id or name {ref!r}{where}",
                    [f"{r[0]}  {r[1]}" for r in recent])


def run_keys(db: Reader, run_pk: int) -> list[Key]:
    """The metric keys of a run, sorted by name."""
    return [Key(int(i), k, int(n or 0)) for i, k, n in db.rows(
        "SELECT id, key, points FROM metric_keys WHERE run_pk = ? ORDER BY key", run_pk)]


def job_devices(db: Reader, run_pk: int) -> int | None:
    """The devices a run's job asked for; None for a run started by hand."""
    found = db.rows("SELECT devices FROM jobs WHERE run_pk = ?", run_pk)
    return int(found[0][0]) if found else None
