"""A runs folder whose path is longer than PostgreSQL can key (a btree entry holds about
2.7 KB): its runs_folders row is keyed by a hash of the path (migration 0021), so a pass
indexes it on PostgreSQL as on SQLite. Before, every pass over it failed on PostgreSQL
("index row size … exceeds btree version 4 maximum") and none of its runs was indexed.
And migration 0021 keeps every row of an index at 0020, both ways. On SQLite and on
PostgreSQL."""

from __future__ import annotations

import os
import random
import string
from pathlib import Path

from sqlalchemy import Engine, select, text

from runwatch.ingest import Indexer
from runwatch.ingest.forget import folder_record, path_key
from runwatch.store import schema as s
from tests.support import sdk_run
from tests.support.migrations import downgrade, reopened


def long_folder(tmp_path: Path, over_bytes: int = 3000) -> Path:
    """A runs folder under nested folders of random names (which PostgreSQL cannot
    compress into its key) whose path is longer than `over_bytes`."""
    rng = random.Random(7)
    d = tmp_path
    while len(os.fsencode(str(d))) < over_bytes:
        d = d / "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(200))
    return d / "runs"


def names(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return sorted(conn.execute(select(s.runs.c.name)).scalars())


def test_a_runs_folder_with_a_path_past_what_postgresql_can_key_is_indexed(
        engine: Engine, tmp_path: Path) -> None:
    runs = long_folder(tmp_path)
    sdk_run(runs, "deep", steps=3)
    report = Indexer(engine, runs).index_once()
    assert (report.new_runs, report.problems) == (1, [])
    assert names(engine) == ["deep"]
    record = folder_record(engine, runs)
    assert record is not None and record.dev == os.stat(runs).st_dev
    with engine.connect() as conn:
        (row,) = conn.execute(select(s.runs_folders)).all()
    assert (row.path, row.path_key) == (str(runs.resolve()), path_key(str(runs.resolve())))


def test_an_index_at_0020_keeps_its_runs_folders_keyed_anew_and_back(
        engine: Engine, db_url: str, tmp_path: Path) -> None:
    folders = [tmp_path / "runs-a", tmp_path / "runs-b"]
    for d in folders:
        sdk_run(d, f"in-{d.name}", steps=2)
        Indexer(engine, d).index_once()
    with engine.connect() as conn:
        held = sorted(conn.execute(select(s.runs_folders.c.path, s.runs_folders.c.dev,
                                          s.runs_folders.c.passed_at)).all())
    assert [p for p, _, _ in held] == sorted(str(d.resolve()) for d in folders)
    downgrade(engine, "0020")
    with engine.connect() as conn:
        assert sorted(conn.execute(text(
            "SELECT path, dev, passed_at FROM runs_folders")).all()) == held
    engine.dispose()

    with reopened(db_url) as upgraded:
        with upgraded.connect() as conn:
            rows = conn.execute(select(s.runs_folders)).all()
        assert sorted((r.path, r.dev, r.passed_at) for r in rows) == held
        assert all(r.path_key == path_key(r.path) for r in rows)
        for d in folders:  # each is known by its key: the pass finds its record
            assert folder_record(upgraded, d) is not None
        assert names(upgraded) == ["in-runs-a", "in-runs-b"]
