"""A run folder moved between two runs folders indexed into one index (`mv runs-a/x
runs-b/x`, both indexed with one `--db`) is a move, whichever folder's pass comes first:
the run keeps its pk, records, findings and job row, and its row names the new folder.
Before, a pass over the old folder first forgot the run (its findings' ids, job row and
health history lost), and the new folder's pass indexed it anew.

Real run folders written by the SDK, the real indexer on SQLite and PostgreSQL, and the
real `runwatch index` command."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from runwatch.health.store import on_metrics
from runwatch.ingest.indexer import Indexer, IndexReport
from runwatch.store import jobs as store_jobs
from runwatch.store import open_engine
from runwatch.store import schema as s
from tests.support import cli_here, sdk_run
from tests.support.jobs import submit_command


def index(engine: Engine, runs: Path) -> IndexReport:
    return Indexer(engine, runs, hooks=[on_metrics]).index_once()


def nan_at_5(step: int) -> dict[str, float]:
    return {"loss": math.nan if step == 5 else 1.0 / (step + 1), "learning_rate": 1e-3}


def held(engine: Engine, name: str) -> dict[str, Any]:
    """What the index holds of run `name`: its row's pk, run id and folder, its findings'
    ids, its job row, and how many rows of each table of its records hold it."""
    with engine.connect() as conn:
        (row,) = conn.execute(select(s.runs).where(s.runs.c.name == name)).all()
        out: dict[str, Any] = {"pk": row.pk, "run_id": row.run_id, "dir": row.dir}
        out["findings"] = sorted(conn.execute(select(s.findings.c.id).where(
            s.findings.c.run_pk == row.pk)).scalars())
        out["job"] = store_jobs.job_row(conn, row.pk)
        for table in s.metadata.sorted_tables:
            if "run_pk" in table.c and table.name not in ("findings", "jobs"):
                out[table.name] = int(conn.execute(select(func.count()).select_from(table)
                                                   .where(table.c.run_pk == row.pk)).scalar_one())
    return out


def two_runs_folders(engine: Engine, tmp_path: Path) -> tuple[Path, Path]:
    """runs-a holding `x` (with findings), a queued job `j` and `stay`; runs-b holding
    `there`: both indexed into `engine`'s index."""
    a, b = tmp_path / "runs-a", tmp_path / "runs-b"
    sdk_run(a, "x", steps=20, metrics=nan_at_5)
    submit_command(engine, a, "j")
    sdk_run(a, "stay", steps=3)
    sdk_run(b, "there", steps=3)
    index(engine, a)
    index(engine, b)
    return a, b


@pytest.mark.parametrize("first", ["old folder", "new folder"])
def test_a_run_moved_to_another_runs_folder_keeps_its_pk_findings_and_job(
        engine: Engine, tmp_path: Path, first: str) -> None:
    a, b = two_runs_folders(engine, tmp_path)
    before = {name: held(engine, name) for name in ("x", "j")}
    assert before["x"]["findings"], "the run holds no findings to keep"
    assert before["j"]["job"] is not None

    for name in ("x", "j"):
        (a / name).rename(b / name)
    reports = [index(engine, d) for d in ((a, b) if first == "old folder" else (b, a))]

    assert [r.forgotten for r in reports] == [[], []]
    assert [r.new_runs for r in reports] == [0, 0]
    for name in ("x", "j"):
        after = held(engine, name)
        assert after["dir"] == str((b / name).resolve())
        assert {**after, "dir": None} == {**before[name], "dir": None}
    # nothing more to do, and the old folder's other run stays
    assert [index(engine, d).new_runs for d in (a, b)] == [0, 0]
    assert held(engine, "stay")["dir"] == str((a / "stay").resolve())


def test_a_run_moved_and_renamed_into_another_runs_folder_is_found(engine: Engine,
                                                                   tmp_path: Path) -> None:
    a, b = two_runs_folders(engine, tmp_path)
    before = held(engine, "x")
    (a / "x").rename(b / "y")
    assert index(engine, a).forgotten == []
    after = held(engine, "y")
    assert (after["pk"], after["findings"], after["dir"]) == (
        before["pk"], before["findings"], str((b / "y").resolve()))
    assert index(engine, b).new_runs == 0


def test_runwatch_index_of_the_old_folder_first_keeps_a_moved_run(tmp_path: Path) -> None:
    a, b = tmp_path / "runs-a", tmp_path / "runs-b"
    run_id = sdk_run(a, "x", steps=5)
    sdk_run(a, "stay", steps=3)
    sdk_run(b, "there", steps=3)
    db = str(tmp_path / "index.db")
    for d in (a, b):
        cli_here("index", str(d), "--db", db)
    engine = open_engine(db)
    try:
        before = held(engine, "x")
    finally:
        engine.dispose()

    shutil.move(str(a / "x"), str(b / "x"))
    said = cli_here("index", str(a), "--db", db).stdout
    assert "note:" not in said and "(0 new)" in said
    said = cli_here("index", str(b), "--db", db).stdout
    assert "(0 new)" in said
    got = json.loads(cli_here("runs", "get", "x", "--dir", str(b), "--db", db,
                              "-o", "json").stdout)
    assert got["run_id"] == run_id
    engine = open_engine(db)
    try:
        after = held(engine, "x")
    finally:
        engine.dispose()
    assert {**after, "dir": None} == {**before, "dir": None}
