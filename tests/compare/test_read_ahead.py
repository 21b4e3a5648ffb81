"""A comparison's first read of two runs (store/plain_series.SavedSeries.read_ahead,
analysis/compare.read_sides): the second run's series are read from the SQLite index and
saved by a forked process while the first run's are read, and the comparison then loads
the files it saved — the series the index holds, over histories with NaN, re-logged
steps and keys logged apart; stale files are saved again; a process with another thread
(a server) and a PostgreSQL index read as before, forking nothing.

The reads run in a new interpreter (the test process may hold threads of its own, and
read_ahead forks only a process that holds none)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from runwatch.analysis import compare as cmp
from runwatch.ingest.indexer import Indexer
from runwatch.store import plain, plain_series
from runwatch.store.db import open_engine
from tests.foundation.test_compare_reads import history
from tests.support import write_run

# In a new process: resolve the runs named after the index and the folder, then either
# read_ahead the last one's compared series and wait ("ahead", with "thread": while a
# thread runs), or read all with read_sides ("sides"); prints what it found as JSON.
SCRIPT = """
import json, sys, threading
from pathlib import Path
from runwatch.analysis import compare as cmp
from runwatch.store import plain, plain_series

index, folder, mode, *refs = sys.argv[1:]
if "://" in index:  # over the driver's connection under SQLAlchemy, as the server reads
    from runwatch.store.db import open_engine
    engine = open_engine(index)
    raw = engine.raw_connection()
    reader = plain.Reader(raw, "?" if engine.dialect.paramstyle == "qmark" else "%s")
else:
    reader = plain.Reader(plain.connect_sqlite(Path(index)))
rows = [plain.resolve_run(reader, ref) for ref in refs]
saved = plain_series.SavedSeries(Path(folder), min_points=0)
if mode == "sides":
    sides = cmp.read_sides(reader, rows, saved)
    print(json.dumps([[s.name, *(None if x is None else [x.step.tolist(), repr(x.value.tolist())]
                                 for x in (s.loss, s.grad_norm))] for s in sides]))
else:
    stop = threading.Event()
    if mode == "thread":
        threading.Thread(target=stop.wait).start()
    keys = plain.run_keys(reader, rows[-1].pk)
    read = [k for k in cmp.compared_keys(keys) if k is not None]
    saved.read_ahead(reader, rows[-1].pk, read)()
    stop.set()
    print(json.dumps(sorted(p.name for p in Path(folder).glob("*.npz"))))
"""


def run_script(index: Path | str, folder: Path, mode: str, *refs: str) -> Any:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(index), str(folder), mode, *refs],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def files(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.glob("*.npz")}


def index_of(runs: Path, db: Path) -> None:
    engine = open_engine(db)
    Indexer(engine, runs).index_once()
    engine.dispose()


def compared(reader: plain.Reader, ref: str) -> tuple[int, list[plain.Key]]:
    row = plain.resolve_run(reader, ref)
    keys = plain.run_keys(reader, row.pk)
    return row.pk, [k for k in cmp.compared_keys(keys) if k is not None]


def test_the_second_run_is_read_and_saved_by_a_process_of_its_own(tmp_path: Path,
                                                                   runs_dir: Path) -> None:
    write_run(runs_dir, "run", history(1, True, 400), method="sft")
    apart = write_run(runs_dir, "apart", history(2, False, 400), method="sft")
    db, folder = tmp_path / "index.db", tmp_path / "saved"
    index_of(runs_dir, db)
    reader = plain.Reader(plain.connect_sqlite(db))
    pk, keys = compared(reader, "apart")

    # what read_ahead alone leaves: the files of the run it was given, saved by its child
    assert run_script(db, folder, "ahead", "run", "apart") == sorted(
        f"{pk}-{k.id}.npz" for k in keys)
    made = files(folder)
    got = plain_series.SavedSeries(folder, min_points=0).get(reader, pk, keys)
    assert files(folder) == made, "get loaded the child's files: they hold the index's series"
    for k in keys:
        np.testing.assert_array_equal(got[k.id][0], plain_series.read_series(reader, k.id)[0])
        np.testing.assert_array_equal(got[k.id][1], plain_series.read_series(reader, k.id)[1])

    # the run grows (a re-logged step among the new points): its files are stale, and
    # read_ahead saves them again
    with open(apart / "metrics.jsonl", "a", encoding="utf-8") as f:
        f.writelines(json.dumps({**r, "seq": 400 + r["seq"], "step": r["step"] + 50}) + "\n"
                     for r in history(3, False, 60))
    index_of(runs_dir, db)
    pk, keys = compared(reader, "apart")
    run_script(db, folder, "ahead", "run", "apart")
    again = files(folder)
    assert all(again[name] != made[name] for name in made), "saved again"
    got = plain_series.SavedSeries(folder, min_points=0).get(reader, pk, keys)
    assert files(folder) == again
    for k in keys:
        np.testing.assert_array_equal(got[k.id][0], plain_series.read_series(reader, k.id)[0])
        np.testing.assert_array_equal(got[k.id][1], plain_series.read_series(reader, k.id)[1])
    reader.conn.close()


def test_read_sides_answers_as_read_side_and_forks_nothing_beside_a_thread(
        tmp_path: Path, runs_dir: Path) -> None:
    for i, name in enumerate(("run", "base")):
        write_run(runs_dir, name, history(10 + i, name == "run", 400), method="sft")
    db = tmp_path / "index.db"
    index_of(runs_dir, db)
    reader = plain.Reader(plain.connect_sqlite(db))
    expected = []
    for name in ("run", "base"):  # read one by one, nothing saved
        side = cmp.read_side(reader, plain.resolve_run(reader, name),
                             plain_series.SavedSeries(None))
        expected.append([side.name, *(None if x is None else [x.step.tolist(),
                                                               repr(x.value.tolist())]
                                      for x in (side.loss, side.grad_norm))])
    reader.conn.close()
    assert run_script(db, tmp_path / "a", "sides", "run", "base") == expected
    assert len(files(tmp_path / "a")) == 4, "both runs' series saved"
    assert run_script(db, tmp_path / "a", "sides", "run", "base") == expected, "from the files"
    assert run_script(db, tmp_path / "b", "thread", "run", "base") == [], "no fork"


def test_an_index_over_sqlalchemy_is_read_without_forking(db_url: str, runs_dir: Path,
                                                          tmp_path: Path) -> None:
    """Only a SQLite index opened by plain sqlite3 is read ahead (its file opened again in
    the child); a driver's connection under SQLAlchemy (PostgreSQL's, as `--db URL` and
    the server read) is left alone."""
    write_run(runs_dir, "run", history(4, True, 400), method="sft")
    write_run(runs_dir, "base", history(5, True, 400), method="sft")
    engine = open_engine(db_url)
    Indexer(engine, runs_dir).index_once()
    engine.dispose()
    assert run_script(db_url, tmp_path / "saved", "ahead", "run", "base") == []
