"""`--db` pointed at a file that is not a database: a clear error, the file untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from runwatch.server.runner import free_port
from runwatch.store import StoreError, open_engine
from tests.support.cli import run_cli


def test_a_file_that_is_not_a_database_is_named_and_left_as_it_was(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n" * 100)
    with pytest.raises(StoreError, match="is not a SQLite database"):
        open_engine(notes)
    for args in (["runs", "list"], ["runs", "compare", "a", "b"]):
        proc = run_cli(*args, "--db", str(notes), cwd=tmp_path, check=False)
        assert proc.returncode == 2, proc.stderr
        assert "notes.txt is not a SQLite database" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
    assert notes.read_text() == "not a database\n" * 100


def test_a_database_server_that_does_not_answer_is_said_in_one_line(tmp_path: Path) -> None:
    """A PostgreSQL URL whose server does not answer (a closed port) printed a 139-line
    SQLAlchemy traceback from every command; now one line that names the cause and what
    to check, without the URL's password."""
    url = f"postgresql+psycopg://someone:s3cret@127.0.0.1:{free_port()}/runs"
    (tmp_path / "runs").mkdir()
    for args in (["runs", "list", "--db", url], ["tokens", "list", "--db", url],
                 ["worker", str(tmp_path / "runs"), "--db", url],
                 ["server", "--db", url, "--port", str(free_port())]):
        proc = run_cli(*args, cwd=tmp_path, check=False)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        said = " ".join(proc.stderr.split())
        assert "Traceback" not in said and "s3cret" not in said, said
        assert "cannot connect to the database postgresql+psycopg://someone:***@127.0.0.1" \
            in said and "Connection refused" in said and "check that the server runs" in said, \
            said


def test_a_postgres_url_in_libpqs_form_opens_the_database(tmp_path: Path,
                                                            db_url: str) -> None:
    """`postgres://…` (psql's, and most hosted DATABASE_URLs') and `postgresql://…` with no
    driver were refused ("Can't load plugin: sqlalchemy.dialects:postgres"); they open with
    the driver runwatch installs."""
    from runwatch.store.db import database_url

    assert database_url("postgres://u:p@db:5432/runs") == "postgresql+psycopg://u:p@db:5432/runs"
    assert database_url("postgresql:///runs?host=/tmp") == "postgresql+psycopg:///runs?host=/tmp"
    assert database_url("postgresql+psycopg://db/runs") == "postgresql+psycopg://db/runs"
    if not db_url.startswith("postgresql"):
        return  # the SQLite case: the URL forms above are the whole of it
    plain = "postgres://" + db_url.split("://", 1)[1]  # the test's own database
    proc = run_cli("tokens", "list", "--db", plain, cwd=tmp_path, check=False)
    assert "Can't load plugin" not in proc.stderr and "Traceback" not in proc.stderr, (
        proc.stderr)
    assert proc.returncode == 0, proc.stderr
