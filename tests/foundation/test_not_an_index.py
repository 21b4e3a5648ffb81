"""`--db` pointed at a file that is not a database: a clear error, the file untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

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
