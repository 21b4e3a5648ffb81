"""The index records the runs folders it was indexed from (runs_folders, migration 0019):
a run moved into a runs folder the index holds no run of yet is a move, whichever folder's
`runwatch index` comes first. Before, the move search knew only the runs folders the index
held runs of (the run was forgotten, its findings' ids and job row lost, and indexed
anew). An idle pass writes nothing to the table. (The device it records, read by one
`runwatch index` after a disk was mounted or unmounted: test_index_many_gone_at_once.)

Real run folders written by the SDK, the real `runwatch index` command, and the real
indexer on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, select

from runwatch.health.store import on_metrics
from runwatch.ingest.indexer import Indexer
from runwatch.store import open_engine
from runwatch.store import schema as s
from tests.foundation.test_index_run_moved_between_runs_folders import held, nan_at_5
from tests.support import cli_here, sdk_run
from tests.support.cli import run_cli
from tests.support.jobs import submit_command

ROOT = Path(__file__).resolve().parents[2]


def holding(db: str, *names: str) -> dict[str, dict[str, Any]]:
    engine = open_engine(db)
    try:
        return {name: held(engine, name) for name in names}
    finally:
        engine.dispose()


@pytest.mark.parametrize(("new_before", "first"), [
    ("indexed empty", "old folder"),
    ("indexed empty", "new folder"),
    ("never indexed", "new folder"),
])
def test_a_run_moved_into_a_runs_folder_the_index_holds_no_run_of_keeps_its_pk(
        tmp_path: Path, new_before: str, first: str) -> None:
    a, new, db = tmp_path / "runs-a", tmp_path / "runs-new", str(tmp_path / "index.db")
    sdk_run(a, "x", steps=20, metrics=nan_at_5)
    sdk_run(a, "stay", steps=3)
    engine = open_engine(db)
    try:
        submit_command(engine, a, "j")
    finally:
        engine.dispose()
    cli_here("index", str(a), "--db", db)
    new.mkdir()
    if new_before == "indexed empty":
        cli_here("index", str(new), "--db", db)
    gone = tmp_path / "runs-gone"  # a runs folder the index knows that is gone: skipped
    gone.mkdir()
    cli_here("index", str(gone), "--db", db)
    gone.rmdir()
    before = holding(db, "x", "j")
    assert before["x"]["findings"], "the run holds no findings to keep"
    assert before["j"]["job"] is not None

    for name in ("x", "j"):
        (a / name).rename(new / name)
    for d in ((a, new) if first == "old folder" else (new, a)):
        said = run_cli("index", str(d), "--db", db).stdout
        assert "(0 new)" in said and "note:" not in said, said

    after = holding(db, "x", "j", "stay")
    for name in ("x", "j"):
        assert after[name]["dir"] == str((new / name).resolve())
        assert {**after[name], "dir": None} == {**before[name], "dir": None}
    assert after["stay"]["dir"] == str((a / "stay").resolve())


def statements_on_runs_folders(engine: Engine) -> list[str]:
    """The SQL statements `engine` runs from now on that name runs_folders."""
    said: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "runs_folders" in statement:
            said.append(statement.split(None, 1)[0].upper())

    event.listen(engine, "before_cursor_execute", note)
    return said


def test_an_idle_pass_writes_nothing_to_the_runs_folders_table(engine: Engine,
                                                               tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for name in ("a", "b"):
        sdk_run(runs, name, steps=3)
    server = Indexer(engine, runs, hooks=[on_metrics])
    server.index_once()
    with engine.connect() as conn:
        recorded = conn.execute(select(s.runs_folders)).all()
    assert [row.path for row in recorded] == [str(runs.resolve())]

    said = statements_on_runs_folders(engine)
    for _ in range(3):
        server.index_once()
    assert said == []  # a long-lived indexer read the row once, at its first pass
    Indexer(engine, runs, hooks=[on_metrics]).index_once()  # a command's single pass
    assert said == ["SELECT"]
    with engine.connect() as conn:
        assert conn.execute(select(s.runs_folders)).all() == recorded
