"""A server's indexer keeps its lease (which read commands find: ingest/lease.py) with its
index, never in the runs folder: a folder indexed into an index elsewhere (a SQLite file
outside it, PostgreSQL) gets nothing written into it, a read-only one is served and indexed,
and read commands beside the server still wait for its passes.

Found by reading the code (session 37): the lease was made in `<runs>/.runwatch/` whatever
the index, so a shared or read-only runs folder got a folder its user had not asked for
(or, where it could not be made, no lease)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.cli.context import default_db
from runwatch.ingest import lease
from runwatch.server.runner import Runner, free_port
from runwatch.store.db import open_engine
from tests.support import cli_here, sdk_run


def _modes(root: Path, dirs: int, files: int) -> None:
    for folder, _, names in os.walk(root):
        os.chmod(folder, dirs)
        for name in names:
            os.chmod(Path(folder) / name, files)


@pytest.fixture
def read_only_runs(runs_dir: Path) -> Iterator[Path]:
    """`runs_dir` holding one finished run, every folder and file in it read-only."""
    sdk_run(runs_dir, "one", steps=5)
    _modes(runs_dir, 0o555, 0o444)
    yield runs_dir
    _modes(runs_dir, 0o755, 0o644)


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_server_writes_nothing_into_a_runs_folder_it_indexes_elsewhere(
        read_only_runs: Path, engine: Engine, db_url: str) -> None:
    before = tree(read_only_runs)
    with Runner(engine, runs_dir=read_only_runs, port=free_port(), interval=0.05,
                warm=False):
        held = lease.holder(read_only_runs, lease.index_name(engine))
        assert held is not None and held.pid == os.getpid()
        listed = cli_here("runs", "list", "--dir", str(read_only_runs), "--db", db_url)
        assert "one" in listed.stdout and listed.stderr == "", listed.stderr
        assert tree(read_only_runs) == before
    assert lease.holder(read_only_runs, lease.index_name(engine)) is None


def test_the_default_index_keeps_its_lease_beside_it(runs_dir: Path) -> None:
    sdk_run(runs_dir, "one", steps=5)
    engine = open_engine(default_db(runs_dir))
    try:
        with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05, warm=False):
            assert lease.holder(runs_dir, lease.index_name(engine)) is not None
            listed = cli_here("runs", "list", "--dir", str(runs_dir))
            assert "one" in listed.stdout and listed.stderr == "", listed.stderr
            index = default_db(runs_dir)
            # (not the `.tmp` the lease is rewritten through, which a pass may be writing)
            assert sorted(p.name for p in index.parent.glob("index.indexer.*")
                          if p.suffix != ".tmp") == ["index.indexer.json", "index.indexer.lock"]
    finally:
        engine.dispose()


def test_a_lease_of_a_database_server_is_kept_only_where_no_one_else_may_write(
        runs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index in PostgreSQL has no file to keep the lease beside: it is kept in this
    user's runtime folder, and not at all where that folder is open to others."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    index = "postgresql+psycopg://me:***@db.lan/runwatch"
    (tmp_path / "runwatch").mkdir(mode=0o700)
    os.chmod(tmp_path / "runwatch", 0o777)
    taken = lease.Lease(runs_dir, index)
    assert not taken.take()
    assert lease.holder(runs_dir, index) is None
    os.chmod(tmp_path / "runwatch", 0o700)
    assert taken.take()
    try:
        assert lease.holder(runs_dir, index) is not None
        assert lease.holder(tmp_path, index) is None  # another folder, the same index
        assert os.listdir(runs_dir) == []
    finally:
        taken.release()
    assert lease.holder(runs_dir, index) is None
