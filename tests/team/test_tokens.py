"""Tokens and projects in the index, on SQLite and PostgreSQL: the real `runwatch tokens` and
`runwatch projects` commands, secrets kept only as their sha256, revoking, and migration 0006
down and up again through Alembic."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Connection, Engine, inspect, select, text

from runwatch.store import schema as s
from runwatch.store import tokens
from runwatch.store.db import HEAD_REVISION, open_engine
from tests.support.cli import cli_here, run_cli
from tests.support.migrations import downgrade


def test_tokens_are_kept_only_as_their_sha256(db_url: str, engine: Engine,
                                              tmp_path: Path) -> None:
    # `projects create` and `tokens create` run as the real command line, the other
    # commands in this process (the same app, without a new interpreter's imports)
    assert "made" in run_cli("projects", "create", "vision", "--db", db_url).stdout
    refused = cli_here("tokens", "create", "-p", "nope", "--name", "x", "--db", db_url,
                       check=False)
    assert refused.returncode == 2 and "runwatch projects create nope" in refused.stderr
    made = json.loads(run_cli("tokens", "create", "-p", "vision", "--name", "ci", "--right",
                              "write", "--db", db_url, "-o", "json").stdout)
    secret = made["secret"]
    assert secret.startswith("rw_") and len(secret) == 46 and made["token"]["right"] == "write"
    with engine.begin() as conn:
        _, other = tokens.create(conn, "vision", "read", "dashboard", "test")
    with engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(select(s.api_tokens))]
    stored = json.dumps(rows)
    for sec in (secret, other):
        assert sec not in stored and sec[3:] not in stored and sec[3:20] not in stored
        assert hashlib.sha256(sec.encode()).hexdigest() in stored
    listed = cli_here("tokens", "list", "--db", db_url, "-o", "json").stdout
    assert secret not in listed and {t["name"] for t in json.loads(listed)} == {"ci", "dashboard"}
    projects = json.loads(cli_here("projects", "list", "--db", db_url, "-o", "json").stdout)
    assert projects == [{"name": "vision", "runs": 0}]

    with engine.begin() as conn:
        found = tokens.authenticate(conn, secret)
        assert found is not None and found.project == "vision"
        assert tokens.authenticate(conn, secret[:-1] + "x") is None
    cli_here("tokens", "revoke", made["token"]["id"], "--db", db_url)
    with engine.begin() as conn:
        assert tokens.authenticate(conn, secret) is None
        assert tokens.authenticate(conn, other) is not None
    if db_url.startswith("sqlite"):  # nor anywhere in the database's files
        # closed first: closing any other handle of the file drops this process's SQLite locks
        engine.dispose()
        files = b"".join(p.read_bytes() for p in tmp_path.glob("index.db*"))
        assert hashlib.sha256(secret.encode()).hexdigest().encode() in files
        assert secret[3:].encode() not in files and other[3:].encode() not in files


def test_migration_0006_takes_tokens_away_and_brings_them_back(db_url: str,
                                                               engine: Engine) -> None:
    """Down to 0005 and up again through the real Alembic path open_engine takes."""
    with engine.begin() as conn:
        tokens.create_project(conn, "p", "test")
        tokens.create(conn, "p", "admin", "before", "test")
    downgrade(engine, "0005")
    with engine.connect() as conn:
        assert {"projects", "api_tokens"}.isdisjoint(inspect(conn).get_table_names())
    engine.dispose()
    upgraded = open_engine(db_url)
    with upgraded.begin() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == \
            HEAD_REVISION
        assert tokens.list_tokens(conn) == []
        tokens.create_project(conn, "p", "test")
        _, secret = tokens.create(conn, "p", "read", "after", "test")
        assert tokens.authenticate(conn, secret) is not None
        assert "ix_api_tokens_project" in {i["name"] for i in inspect(conn).get_indexes(
            "api_tokens")}
    upgraded.dispose()


def test_a_tokens_last_use_is_written_at_most_once_a_minute(engine: Engine) -> None:
    """Every request with an API token authenticates it: a read must not also write each
    time, yet `last used` must move on."""
    with engine.begin() as conn:
        tokens.create_project(conn, "p", "test")
        made, secret = tokens.create(conn, "p", "read", "dashboard", "test")
    assert made.last_used_at is None

    def used(now: float) -> float | None:
        with engine.begin() as conn:
            assert tokens.authenticate(conn, secret, now=now) is not None
            found = tokens.get(conn, made.id)
        assert found is not None
        return found.last_used_at

    assert used(1000.0) == 1000.0
    assert used(1000.0 + tokens.USE_RESOLUTION_S - 1) == 1000.0
    assert used(1000.0 + tokens.USE_RESOLUTION_S) == 1000.0 + tokens.USE_RESOLUTION_S


def _work(conn: Connection) -> Callable[[], int]:
    """A counter of the work `conn`'s store does from now on: rows of runs PostgreSQL reads
    (its per-transaction statistics), or steps of SQLite's virtual machine."""
    if conn.dialect.name == "postgresql":
        read = text("SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
                    "FROM pg_stat_xact_user_tables WHERE relname = 'runs'")
        before = int(conn.execute(read).scalar_one())
        return lambda: int(conn.execute(read).scalar_one()) - before
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    conn.connection.driver_connection.set_progress_handler(step, 1)  # type: ignore[union-attr]
    return lambda: steps[0]


def test_making_a_token_reads_no_other_project_s_runs(engine: Engine) -> None:
    """Whether a project exists is looked up, never counted over every project's runs."""

    def cost_of_a_token() -> int:
        with engine.begin() as conn:
            work = _work(conn)
            tokens.create(conn, "quiet", "read", "ci", "test")
            assert not tokens.create_project(conn, "quiet", "test")
            return work()

    with engine.begin() as conn:
        assert tokens.create_project(conn, "quiet", "test")
    alone = cost_of_a_token()
    with engine.begin() as conn:
        conn.execute(s.runs.insert(), [
            {"run_id": f"r{i}", "name": f"r{i}", "project": f"p{i % 300}", "created_at": i}
            for i in range(3000)])
        conn.execute(text("ANALYZE"))
    assert cost_of_a_token() <= alone + 20


def test_a_new_token_never_reads_as_an_option() -> None:
    """secrets.token_urlsafe starts with "-" once in 64 draws; such a token passed on a
    command line (`--token -x…`, or a bench's child process) read as an option."""
    from runwatch.server.settings import new_token, token_problem

    tokens = [new_token() for _ in range(2000)]  # the old one: 31 of them start with "-"
    assert not [t for t in tokens if t.startswith("-")]
    assert len(set(tokens)) == 2000 and all(token_problem(t) is None for t in tokens)
