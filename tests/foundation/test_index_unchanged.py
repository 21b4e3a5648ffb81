"""ingest/unchanged.py: a runs folder the indexer has read to the end answers "unchanged",
also once moved elsewhere; every change the indexer would store answers "changed"."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runwatch.ingest.indexer import Indexer
from runwatch.ingest.unchanged import unchanged
from runwatch.store import plain
from runwatch.store.db import open_engine
from tests.foundation.test_cli_startup import imported_by
from tests.support import sdk_run

SAMPLES = json.dumps({"samples": [{"prompt": "p", "completion": "c"}]})


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A runs folder of two SDK runs (one with a samples file) and its SQLite index."""
    runs = tmp_path / "runs"
    sdk_run(runs, "a", steps=30, config={"seed": 1})
    sdk_run(runs, "b", steps=30)
    (runs / "b" / "step_0010_completions.json").write_text(SAMPLES)
    db = tmp_path / "index.db"
    engine = open_engine(db)
    Indexer(engine, runs).index_once()
    engine.dispose()
    yield runs, db


def is_unchanged(runs: Path, db: Path) -> bool:
    conn = plain.connect_sqlite(db)
    try:
        return unchanged(plain.Reader(conn), runs)
    finally:
        conn.close()


def later(path: Path) -> None:
    """Give `path` another mtime, as a rewrite a second later would."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def append_metrics(runs: Path) -> None:
    with open(runs / "a" / "metrics.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"seq": 999, "ts": 1.7e9, "step": 999, "loss": 0.5}) + "\n")


def new_run(runs: Path) -> None:
    sdk_run(runs, "c", steps=3)


def manifest_changed(runs: Path) -> None:
    path = runs / "a" / "manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "tags": ["new"]}))


def foreign_file(runs: Path) -> None:
    (runs / "a" / "notes.txt").write_text("not a run file")


def new_samples(runs: Path) -> None:
    (runs / "a" / "step_0020_completions.json").write_text(SAMPLES)


CHANGES: dict[str, Callable[[Path], None]] = {
    "metrics appended": append_metrics,
    "config rewritten": lambda runs: later(runs / "a" / "config.yaml"),
    "samples rewritten": lambda runs: later(runs / "b" / "step_0010_completions.json"),
    "new samples file": new_samples,
    "new run": new_run,
    "manifest changed": manifest_changed,
    "file outside the format": foreign_file,
    "folder not a run yet": lambda runs: (runs / "d").mkdir(),
}


def test_an_indexed_folder_moved_elsewhere_is_a_change_once(folder: tuple[Path, Path],
                                                             tmp_path: Path) -> None:
    """A moved runs folder is one change: its runs' folders moved, which one pass records
    (the run keeps its id and records); then it is unchanged again."""
    runs, db = folder
    (runs / ".hidden").mkdir()  # the indexer reads no dot folder
    (runs / "README.txt").write_text("the indexer reads folders only")
    assert is_unchanged(runs, db)
    moved = tmp_path / "moved"
    shutil.move(runs, moved)
    assert not is_unchanged(moved, db), "the runs' folders moved: a pass records it"
    engine = open_engine(db)
    Indexer(engine, moved).index_once()
    engine.dispose()
    assert is_unchanged(moved, db)


@pytest.mark.parametrize("change", list(CHANGES))
def test_what_the_indexer_would_store_is_a_change(folder: tuple[Path, Path],
                                                  change: str) -> None:
    runs, db = folder
    CHANGES[change](runs)
    assert not is_unchanged(runs, db)
    engine = open_engine(db)
    Indexer(engine, runs).index_once()
    engine.dispose()
    if change != "file outside the format" and change != "folder not a run yet":
        assert is_unchanged(runs, db), "indexed again, nothing is left to store"


def test_an_index_of_another_folder_or_none_is_a_change(folder: tuple[Path, Path],
                                                        tmp_path: Path) -> None:
    runs, _ = folder
    other = tmp_path / "other.db"
    open_engine(other).dispose()
    assert not is_unchanged(runs, other)
    conn = plain.connect_sqlite(tmp_path / "empty.db")
    assert not unchanged(plain.Reader(conn), runs)
    conn.close()


def test_runs_list_of_an_unchanged_folder_loads_no_numpy(folder: tuple[Path, Path]) -> None:
    """The check for new data (run by every read command) needs neither numpy nor the
    indexer's libraries."""
    runs, db = folder
    (runs / ".runwatch").mkdir(exist_ok=True)
    shutil.copy(db, runs / ".runwatch" / "index.db")
    assert is_unchanged(runs, runs / ".runwatch" / "index.db")
    assert "numpy" not in imported_by("runs", "list", "--dir", str(runs))


def test_a_manifest_that_is_not_a_regular_file_is_not_read(folder: tuple[Path, Path]) -> None:
    """The check opens run files as the indexer does (rundir/safeio): a FIFO named
    manifest.json (it would block an open for reading) is a change, not a hang, and the
    command lists the other runs."""
    runs, db = folder
    (runs / ".runwatch").mkdir(exist_ok=True)
    shutil.copy(db, runs / ".runwatch" / "index.db")
    (runs / "fifo").mkdir()
    os.mkfifo(runs / "fifo" / "manifest.json")
    # the deadline only stops a hang from stalling the suite
    proc = subprocess.run([sys.executable, "-m", "runwatch", "runs", "list", "--dir", str(runs),
                           "-o", "json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(r["name"] for r in json.loads(proc.stdout)) == ["a", "b"]


def test_a_torn_last_line_is_no_change_until_it_ends(folder: tuple[Path, Path]) -> None:
    """A record file whose last line has no newline yet (its writer is mid-line, or died
    there): the indexer reads nothing of it, so the folder is unchanged (every command
    would run the indexer for nothing); once the line ends, it is a change."""
    runs, db = folder
    line = json.dumps({"seq": 999, "ts": 1.7e9, "step": 999, "loss": 0.5})
    path = runs / "a" / "metrics.jsonl"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line[:20])
    engine = open_engine(db)
    Indexer(engine, runs).index_once()
    assert is_unchanged(runs, db), "the indexer stored nothing of a torn line"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line[20:] + "\n")
    assert not is_unchanged(runs, db)
    Indexer(engine, runs).index_once()
    engine.dispose()
    assert is_unchanged(runs, db)
