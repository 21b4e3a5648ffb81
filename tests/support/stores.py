"""The index stores the suite runs on: a SQLite file in the test's folder, and a database of
its own on the PostgreSQL server that RUNWATCH_TEST_POSTGRES_URL names.

Each PostgreSQL test gets a new database copied from a template that `open_engine` made
once per session (per xdist worker), and dropped after the test; a session drops its
template when it ends. Database names carry a random part, so sessions and workers that
share the server never meet.
"""

from __future__ import annotations

import os
import uuid

from sqlalchemy import Engine, create_engine, make_url, text

from runwatch.store.db import open_engine

POSTGRES_ENV = "RUNWATCH_TEST_POSTGRES_URL"
# The stores every test of the `engine` and `db_url` fixtures runs on, as its id says.
STORES = ("sqlite", "postgres")
NO_POSTGRES = (f"postgres store: set {POSTGRES_ENV} to a PostgreSQL server's URL to run this "
               "test on PostgreSQL too (docs/testing.md); CI sets it")
PREFIX = "runwatch_test_"


def postgres_url() -> str | None:
    """The PostgreSQL server the tests may use (a database to connect to and the right to
    create databases), or None."""
    return os.environ.get(POSTGRES_ENV) or None


class PostgresDatabases:
    """Makes and drops the tests' databases on one PostgreSQL server."""

    def __init__(self, url: str) -> None:
        self.server = make_url(url)
        self.admin: Engine = create_engine(self.server, isolation_level="AUTOCOMMIT")
        self.template: str | None = None

    def _url(self, name: str) -> str:
        return self.server.set(database=name).render_as_string(hide_password=False)

    def create(self, *, empty: bool = False) -> str:
        """The URL of a new database: at the schema's head (a copy of the template), or
        with no table at all when `empty`."""
        if not empty and self.template is None:
            self.template = self._create_template()
        name = f"{PREFIX}{uuid.uuid4().hex[:12]}"
        source = "template0" if empty else self.template
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{source}"'))
        return self._url(name)

    def _create_template(self) -> str:
        name = f"{PREFIX}template_{uuid.uuid4().hex[:12]}"
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        engine = open_engine(self._url(name))  # the path every new index takes
        engine.dispose()
        return name

    def drop(self, url: str) -> None:
        """Drop a database made here, ending any connection a test left open to it."""
        name = make_url(url).database
        assert name is not None and name.startswith(PREFIX), name
        with self.admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    def close(self) -> None:
        if self.template is not None:
            self.drop(self._url(self.template))
        self.admin.dispose()
