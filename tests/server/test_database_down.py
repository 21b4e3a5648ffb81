"""A server whose PostgreSQL database stops taking connections answers 503 with
Retry-After, saying that it cannot reach its database, and answers again once the database
does. Found in a trial (session 36): every route answered 500 "the server failed on this
request", with a traceback a request in its log, and `runwatch sync` reported the run as
refused."""

from __future__ import annotations

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from runwatch.server.runner import Runner
from tests.support.stores import postgres_url


def _connections(db_url: str, allow: bool) -> None:
    """Let the test's database take connections or not (ending the ones it has), from
    the PostgreSQL server's own database, as an operator's maintenance would."""
    admin_url = postgres_url()
    assert admin_url is not None
    name = make_url(db_url).database
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS '
                              f'{"true" if allow else "false"}'))
            if not allow:
                conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                  "WHERE datname = :name AND pid <> pg_backend_pid()"),
                             {"name": name})
    finally:
        admin.dispose()


def test_a_database_that_takes_no_connections_is_a_503_to_retry(server: Runner,
                                                                db_url: str) -> None:
    if not db_url.startswith("postgresql"):
        return  # a SQLite file has no server to go away
    assert httpx.get(f"{server.url}/api/runs").status_code == 200
    _connections(db_url, allow=False)
    try:
        got = httpx.get(f"{server.url}/api/runs")
        assert got.status_code == 503, got.text
        assert got.headers["Retry-After"] == "5"
        assert "cannot reach its database" in got.json()["error"]
    finally:
        _connections(db_url, allow=True)
    assert httpx.get(f"{server.url}/api/runs").status_code == 200
