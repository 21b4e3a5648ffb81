"""The index stores the suite runs on: a SQLite file in the test's folder, and a database of
its own on the PostgreSQL server that RUNWATCH_TEST_POSTGRES_URL names.

Each PostgreSQL test gets a database at the schema's head holding no row: a copy of a
template that `open_engine` made once per session (per xdist worker), or one an earlier
test of the session used, emptied again. After a test its database is renamed (so nothing
still holding the old name reaches it), every table but Alembic's is emptied and every
sequence restarted, and it is kept for the next test only if its schema, sequences and
Alembic revision are then exactly the template's; else it is dropped. Emptying costs under
half of a new copy and its drop. A session drops its databases when it ends.
Database names carry a random part, so sessions and workers that share the server never
meet.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, make_url, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from runwatch.store.db import open_engine

POSTGRES_ENV = "RUNWATCH_TEST_POSTGRES_URL"
# The stores every test of the `engine` and `db_url` fixtures runs on, as its id says.
STORES = ("sqlite", "postgres")
NO_POSTGRES = (f"postgres store: set {POSTGRES_ENV} to a PostgreSQL server's URL to run this "
               "test on PostgreSQL too (docs/testing.md); CI sets it")
PREFIX = "runwatch_test_"
# How long a used database's connections may take to end before it is dropped instead.
CLOSE_DEADLINE_S = 5.0
USER_SCHEMAS = "NOT IN ('pg_catalog', 'information_schema') AND {col} NOT LIKE 'pg_toast%'"
# What makes two databases the same for a test, rows aside: schemas, tables and columns,
# indexes, constraints, views, routines, triggers, extensions, sequences' states, and
# Alembic's revision.
SHAPE = [
    "SELECT nspname FROM pg_namespace WHERE nspname " + USER_SCHEMAS.format(col="nspname")
    + " AND nspname NOT LIKE 'pg_temp%' ORDER BY 1",
    "SELECT table_schema, table_name, column_name, data_type, is_nullable, column_default "
    "FROM information_schema.columns WHERE table_schema "
    + USER_SCHEMAS.format(col="table_schema") + " ORDER BY 1, 2, 3",
    "SELECT schemaname, tablename, indexname, indexdef FROM pg_indexes WHERE schemaname "
    + USER_SCHEMAS.format(col="schemaname") + " ORDER BY 1, 2, 3",
    "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(c.oid) FROM pg_constraint c "
    "JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname "
    + USER_SCHEMAS.format(col="n.nspname") + " ORDER BY 1, 2",
    "SELECT table_schema, table_name, view_definition FROM information_schema.views "
    "WHERE table_schema " + USER_SCHEMAS.format(col="table_schema") + " ORDER BY 1, 2",
    "SELECT n.nspname, p.proname, pg_get_function_identity_arguments(p.oid) FROM pg_proc p "
    "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname "
    + USER_SCHEMAS.format(col="n.nspname") + " ORDER BY 1, 2, 3",
    "SELECT tgrelid::regclass::text, tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2",
    "SELECT extname, extversion FROM pg_extension ORDER BY 1",
    "SELECT schemaname, sequencename, last_value FROM pg_sequences ORDER BY 1, 2",
    "SELECT version_num FROM alembic_version ORDER BY 1",
]


def postgres_url() -> str | None:
    """The PostgreSQL server the tests may use (a database to connect to and the right to
    create databases), or None."""
    return os.environ.get(POSTGRES_ENV) or None


def _shape(conn: Connection) -> list[list[tuple[Any, ...]]]:
    """A database's SHAPE, as rows."""
    return [[tuple(row) for row in conn.execute(text(query))] for query in SHAPE]


def _empty(conn: Connection) -> None:
    """Remove every row but Alembic's revision, and restart every sequence that was used;
    only the tables holding rows are truncated (a truncated table gets new files, as in a
    new copy, so rows come back in the order they would there)."""
    tables = conn.execute(text(
        "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables WHERE schemaname "
        + USER_SCHEMAS.format(col="schemaname")
        + " AND NOT (schemaname = 'public' AND tablename = 'alembic_version')")).scalars().all()
    if tables:
        held = conn.execute(text(" UNION ALL ".join(
            f"SELECT '{t}' WHERE EXISTS (SELECT FROM {t})" for t in tables))).scalars().all()
        if held:
            conn.execute(text(f"TRUNCATE {', '.join(held)} CASCADE"))
    for seq in conn.execute(text(
            "SELECT format('%I.%I', schemaname, sequencename) FROM pg_sequences "
            "WHERE last_value IS NOT NULL")).scalars().all():
        conn.execute(text(f"ALTER SEQUENCE {seq} RESTART"))


class PostgresDatabases:
    """Makes, empties again and drops the tests' databases on one PostgreSQL server."""

    def __init__(self, url: str) -> None:
        self.server = make_url(url)
        self.admin: Engine = create_engine(self.server, isolation_level="AUTOCOMMIT")
        self.template: str | None = None
        self._template_shape: list[list[tuple[Any, ...]]] | None = None
        self._copies: set[str] = set()  # made at the head; may be emptied and kept
        self._spare: list[str] = []  # emptied, the template's shape: the next tests' ones

    def _url(self, name: str) -> str:
        return self.server.set(database=name).render_as_string(hide_password=False)

    def _new_name(self) -> str:
        return f"{PREFIX}{uuid.uuid4().hex[:12]}"

    def create(self, *, empty: bool = False) -> str:
        """The URL of a database with no row: at the schema's head (a copy of the template,
        or a spare one), or with no table at all when `empty`."""
        if not empty:
            if self.template is None:
                self.template = self._create_template()
            if self._spare:
                name = self._spare.pop()
                self._copies.add(name)
                return self._url(name)
        name = self._new_name()
        source = "template0" if empty else self.template
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{source}"'))
        if not empty:
            self._copies.add(name)
        return self._url(name)

    def _create_template(self) -> str:
        name = f"{PREFIX}template_{uuid.uuid4().hex[:12]}"
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        engine = open_engine(self._url(name))  # the path every new index takes
        engine.dispose()
        # no pool: a template with a connection open cannot be copied
        shape_engine = create_engine(self._url(name), poolclass=NullPool)
        try:
            with shape_engine.connect() as conn:
                self._template_shape = _shape(conn)
        finally:
            shape_engine.dispose()
        return name

    def drop(self, url: str) -> None:
        """Done with a database made here: kept emptied for the next test when it can be
        (see the module's docstring), else dropped, ending any connection a test left open
        to it. Either way its URL reaches nothing any more."""
        name = make_url(url).database
        assert name is not None and name.startswith(PREFIX), name
        if name in self._copies:
            self._copies.discard(name)
            renamed = self._rename(name)
            if renamed is not None:
                if self._emptied(renamed):
                    self._spare.append(renamed)
                    return
                name = renamed
        self._drop(name)

    def _drop(self, name: str) -> None:
        with self.admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    def _rename(self, name: str) -> str | None:
        """`name` under a new name once its connections have ended; None when some do not
        end within CLOSE_DEADLINE_S."""
        fresh = self._new_name()
        end = time.monotonic() + CLOSE_DEADLINE_S
        with self.admin.connect() as conn:
            while True:
                others = conn.execute(text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :name AND pid <> pg_backend_pid()"), {"name": name}).all()
                if not others:
                    try:
                        conn.execute(text(f'ALTER DATABASE "{name}" RENAME TO "{fresh}"'))
                        return fresh
                    except DBAPIError:  # a connection came in meanwhile
                        pass
                if time.monotonic() > end:
                    return None
                time.sleep(0.02)

    def _emptied(self, name: str) -> bool:
        """Empty database `name`; True when it then has the template's shape."""
        engine = create_engine(self._url(name), poolclass=NullPool)
        try:
            with engine.connect() as conn:
                with conn.begin():
                    _empty(conn)
                return _shape(conn) == self._template_shape
        finally:
            engine.dispose()

    def close(self) -> None:
        for name in [*self._spare, *self._copies]:
            self._drop(name)
        self._spare.clear()
        self._copies.clear()
        if self.template is not None:
            self._drop(self.template)
        self.admin.dispose()
