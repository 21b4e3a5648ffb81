"""The index follows the runs folder: a run whose folder is deleted leaves the index with
everything of it, a run made again under a deleted run's name is the only one of that name,
a renamed folder renames its run, a copy of a run folder is not indexed, and a runs folder
that is empty, missing or cannot be listed forgets nothing (trial 37: `rm -rf runs/r1`
left a ghost `r1`, and running the script again made `runwatch runs get r1` fail with
"'r1' names 2 runs").

Real run folders written by the SDK, the real indexer on the suite's `engine` (SQLite and
PostgreSQL), and the real `runwatch` command."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from runwatch.health.store import on_metrics
from runwatch.ingest import indexer as indexer_module
from runwatch.ingest.indexer import Indexer, IndexReport
from runwatch.jobs import reaper
from runwatch.store import jobs as store_jobs
from runwatch.store import open_engine
from runwatch.store import queries as q
from runwatch.store import schema as s
from runwatch.store.db import writing
from tests.support import cli_here, run_cli, sdk_run
from tests.support.jobs import submit_command


def index(engine: Engine, runs: Path) -> IndexReport:
    """One pass as the CLI and the server make it (health findings included)."""
    return Indexer(engine, runs, hooks=[on_metrics]).index_once()


def run_of(engine: Engine, name: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(select(s.runs).where(s.runs.c.name == name)).all()


def held_rows(engine: Engine, run_pk: int) -> dict[str, int]:
    """How many rows of each table that holds a run's records hold run `run_pk`'s."""
    out = {}
    with engine.connect() as conn:
        keys = conn.execute(select(s.metric_keys.c.id).where(
            s.metric_keys.c.run_pk == run_pk)).scalars().all()
        out["metric_points"] = sum(int(conn.execute(select(func.count()).select_from(
            s.metric_points).where(s.metric_points.c.id.between(k << 36, (k + 1 << 36) - 1))
        ).scalar_one()) for k in keys)
        for table in s.metadata.sorted_tables:
            if "run_pk" in table.c:
                out[table.name] = int(conn.execute(select(func.count()).select_from(table)
                                                   .where(table.c.run_pk == run_pk)).scalar_one())
    return out


def nan_at_5(step: int) -> dict[str, float]:
    return {"loss": math.nan if step == 5 else 1.0 / (step + 1), "learning_rate": 1e-3}


def test_a_deleted_run_folder_leaves_the_index_with_all_it_held(engine: Engine,
                                                                runs_dir: Path) -> None:
    sdk_run(runs_dir, "gone", steps=20, metrics=nan_at_5)
    (runs_dir / "gone" / "step_0010_completions.json").write_text(json.dumps(
        {"step": 10, "split": "train", "samples": [{"prompt": "p", "completion": "c"}]}))
    sdk_run(runs_dir, "kept", steps=20, metrics=nan_at_5)
    index(engine, runs_dir)
    (gone,), (kept,) = run_of(engine, "gone"), run_of(engine, "kept")
    before = held_rows(engine, gone.pk)
    for table in ("metric_points", "metric_keys", "events", "samples", "findings",
                  "ingest_offsets", "health_state"):
        assert before[table] > 0, f"the run holds no {table} rows to forget"
    kept_before = held_rows(engine, kept.pk)

    shutil.rmtree(runs_dir / "gone")
    report = index(engine, runs_dir)

    assert run_of(engine, "gone") == []
    assert set(held_rows(engine, gone.pk).values()) == {0}
    assert held_rows(engine, kept.pk) == kept_before
    folder = str((runs_dir / "gone").resolve())
    assert report.forgotten == [f"run gone ({gone.run_id[:8]}) is no longer indexed: its "
                                f"folder {folder} is gone"]
    assert index(engine, runs_dir).forgotten == [], "said once"


def test_a_run_made_again_under_a_deleted_runs_name_is_the_only_one(tmp_path: Path) -> None:
    """The trial's workflow, as a user runs it: `rm -rf runs/r1 && python train.py`, with
    no `runwatch index` in between, then `runs get r1` (the index in runs/.runwatch)."""
    script = tmp_path / "train.py"
    script.write_text("import runwatch\n"
                      "with runwatch.init(project='p', name='r1', method='sft') as run:\n"
                      "    for s in range(3):\n"
                      "        run.log({'loss': 1.0 - s / 10}, step=s)\n")
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, check=True, timeout=120)
    first = json.loads(run_cli("runs", "list", "-o", "json", cwd=tmp_path).stdout)
    assert [r["name"] for r in first] == ["r1"]

    shutil.rmtree(tmp_path / "runs" / "r1")
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, check=True, timeout=120)
    got = run_cli("runs", "get", "r1", "-o", "json", cwd=tmp_path, check=False)

    assert got.returncode == 0, got.stderr
    new_id = json.loads((tmp_path / "runs" / "r1" / "manifest.json").read_text())["run_id"]
    assert json.loads(got.stdout)["run_id"] == new_id
    folder = (tmp_path / "runs" / "r1").resolve()
    assert (f"note: run r1 ({first[0]['run_id'][:8]}) is no longer indexed: its folder "
            f"{folder} holds another run now") in got.stderr
    listed = json.loads(run_cli("runs", "list", "-o", "json", cwd=tmp_path).stdout)
    assert [r["run_id"] for r in listed] == [new_id]


def test_runwatch_index_says_which_runs_it_forgot(runs_dir: Path, tmp_path: Path) -> None:
    sdk_run(runs_dir, "r1", steps=3)
    sdk_run(runs_dir, "r2", steps=3)
    db = str(tmp_path / "index.db")
    cli_here("index", str(runs_dir), "--db", db)
    shutil.rmtree(runs_dir / "r1")
    said = cli_here("index", str(runs_dir), "--db", db).stdout
    assert "  note: run r1 (" in said and f"its folder {(runs_dir / 'r1').resolve()} is gone" \
        in said
    listed = json.loads(cli_here("runs", "list", "--dir", str(runs_dir), "--db", db,
                                 "-o", "json").stdout)
    assert [r["name"] for r in listed] == ["r2"]
    assert cli_here("runs", "get", "r1", "--dir", str(runs_dir), "--db", db,
                    check=False).returncode == 2


def test_a_renamed_folder_renames_its_run_and_keeps_its_records(engine: Engine,
                                                                runs_dir: Path) -> None:
    run_id = sdk_run(runs_dir, "a", steps=20)
    index(engine, runs_dir)
    (before,) = run_of(engine, "a")
    points = held_rows(engine, before.pk)["metric_points"]

    (runs_dir / "a").rename(runs_dir / "b")
    report = index(engine, runs_dir)

    assert run_of(engine, "a") == []
    (after,) = run_of(engine, "b")
    assert (after.pk, after.run_id, after.dir) == (before.pk, run_id,
                                                   str((runs_dir / "b").resolve()))
    assert held_rows(engine, after.pk)["metric_points"] == points
    assert report.forgotten == [] and report.new_runs == 0
    # the old name is free: a new run of it is a run of its own
    sdk_run(runs_dir, "a", steps=3)
    index(engine, runs_dir)
    with engine.connect() as conn:
        assert q.resolve_run(conn, "a").run_id != run_id
        assert q.resolve_run(conn, "b").run_id == run_id


def test_a_copied_folder_is_not_indexed_until_the_original_is_gone(engine: Engine,
                                                                   runs_dir: Path) -> None:
    run_id = sdk_run(runs_dir, "a", steps=20)
    index(engine, runs_dir)
    shutil.copytree(runs_dir / "a", runs_dir / "a-copy")

    report = index(engine, runs_dir)

    assert report.problems == [f"{runs_dir / 'a-copy'} holds run {run_id}, which is indexed "
                               f"from {(runs_dir / 'a').resolve()}: a copy of a run folder is "
                               "not indexed (move the copy out of the runs folder)"]
    assert "a-copy" in report.unread
    (row,) = run_of(engine, "a")
    assert run_of(engine, "a-copy") == [] and row.dir == str((runs_dir / "a").resolve())
    assert index(engine, runs_dir).problems == [], "said once"
    assert run_of(engine, "a")[0].dir == row.dir, "the copy does not take the run"

    shutil.rmtree(runs_dir / "a")
    report = index(engine, runs_dir)

    assert report.forgotten == []
    (moved,) = run_of(engine, "a-copy")
    assert (moved.pk, moved.run_id) == (row.pk, run_id)


def test_an_empty_or_missing_runs_folder_forgets_nothing(engine: Engine, tmp_path: Path
                                                         ) -> None:
    """An unmounted disk leaves its mount point empty, or the runs folder missing: the
    index (kept elsewhere) must not lose its runs to it."""
    runs = tmp_path / "mnt" / "runs"
    sdk_run(runs, "a", steps=5)
    index(engine, runs)

    shutil.rmtree(runs / "a")  # the folder holds nothing now
    report = index(engine, runs)
    assert len(run_of(engine, "a")) == 1
    assert report.problems == [f"the runs folder {runs} is empty, so the 1 run indexed from "
                               "it whose folder is gone is kept, in case its disk is not "
                               "mounted; it is forgotten once the runs folder holds anything"]
    assert report.forgotten == []
    runs.rmdir()  # and now it is not there at all
    index(engine, runs)
    assert len(run_of(engine, "a")) == 1

    sdk_run(runs, "b", steps=5)
    report = index(engine, runs)
    assert run_of(engine, "a") == [] and len(run_of(engine, "b")) == 1
    assert len(report.forgotten) == 1


def test_a_runs_folder_that_cannot_be_listed_forgets_nothing(runs_dir: Path,
                                                             tmp_path: Path) -> None:
    """A runs folder without read permission (the CLI runs without root's override of
    it): the command says so, shows what the index holds, and forgets nothing."""
    sdk_run(runs_dir, "a", steps=5)
    db = str(tmp_path / "index.db")
    cli_here("index", str(runs_dir), "--db", db)
    setpriv = shutil.which("setpriv")
    if os.geteuid() == 0 and setpriv is None:
        pytest.skip("root reads any folder, and setpriv, to run without that, is missing")
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"] \
        if os.geteuid() == 0 and setpriv else []
    runs_dir.chmod(0)
    try:
        got = subprocess.run([*prefix, sys.executable, "-m", "runwatch", "runs", "list",
                              "--db", db, "-o", "json"], capture_output=True, text=True,
                             env={**os.environ, "RUNWATCH_DIR": str(runs_dir)}, timeout=300)
    finally:
        runs_dir.chmod(0o755)
    assert got.returncode == 0, got.stderr
    assert [r["name"] for r in json.loads(got.stdout)] == ["a"]
    assert f"warning: the runs folder {runs_dir} cannot be listed (Permission denied): " \
           "nothing in it was indexed, and no run was forgotten" in got.stderr
    engine = open_engine(db)
    try:
        assert len(run_of(engine, "a")) == 1
    finally:
        engine.dispose()


def test_runs_of_another_runs_folder_in_the_index_are_not_touched(engine: Engine,
                                                                  tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    sdk_run(one, "a", steps=3)
    sdk_run(two, "b", steps=3)
    sdk_run(two, "c", steps=3)
    index(engine, one)
    index(engine, two)
    shutil.rmtree(two / "b")  # `one` holds no `b`: not its to forget
    index(engine, one)
    assert len(run_of(engine, "b")) == 1
    index(engine, two)
    assert run_of(engine, "b") == []
    assert len(run_of(engine, "a")) == 1 and len(run_of(engine, "c")) == 1


def test_a_queued_job_whose_folder_is_gone_leaves_the_queue(engine: Engine,
                                                            runs_dir: Path) -> None:
    run = submit_command(engine, runs_dir, "queued")
    sdk_run(runs_dir, "other", steps=3)  # the runs folder is not empty once `queued` is gone
    with engine.connect() as conn:
        assert store_jobs.queue_depth(conn) == 1
    shutil.rmtree(run.dir)
    index(engine, runs_dir)
    with engine.connect() as conn:
        assert store_jobs.queue_depth(conn) == 0
        assert store_jobs.job_row(conn, run.run_pk) is None
    assert run_of(engine, "queued") == []


def test_a_job_a_worker_holds_stays_until_the_worker_lets_it_go(engine: Engine,
                                                                runs_dir: Path) -> None:
    """Its worker must still find its row to end it (FAILED stopped_early: the folder is
    gone), and a user can still cancel it meanwhile; the pass after that forgets it."""
    run = submit_command(engine, runs_dir, "held")
    sdk_run(runs_dir, "other", steps=3)  # the runs folder is not empty once `held` is gone
    with engine.begin() as conn:
        assert store_jobs.claim(conn, "worker-1", 1, 1.0) is not None
    shutil.rmtree(run.dir)

    index(engine, runs_dir)
    assert len(run_of(engine, "held")) == 1
    with writing(engine) as conn:  # what the worker does when it finds the folder gone
        reaper.abandon(conn, run.run_pk)
    assert run_of(engine, "held")[0].reason_code == reaper.GONE

    index(engine, runs_dir)
    assert run_of(engine, "held") == []


def test_a_read_command_forgets_a_deleted_run_before_it_answers(runs_dir: Path) -> None:
    """`runs list` on a folder whose index holds nothing new (the index in runs/.runwatch,
    read without the indexer when nothing changed) still sees that a run's folder is gone."""
    sdk_run(runs_dir, "x", steps=3)
    sdk_run(runs_dir, "y", steps=3)
    listed = json.loads(cli_here("runs", "list", "--dir", str(runs_dir), "-o", "json").stdout)
    assert _names(listed) == ["x", "y"]
    shutil.rmtree(runs_dir / "x")
    got = cli_here("runs", "list", "--dir", str(runs_dir), "-o", "json")
    assert _names(json.loads(got.stdout)) == ["y"]
    assert "note: run x (" in got.stderr
    again = cli_here("runs", "list", "--dir", str(runs_dir), "-o", "json")
    assert _names(json.loads(again.stdout)) == ["y"] and "note:" not in again.stderr


def test_a_long_lived_indexer_looks_again_for_rows_other_processes_left(
        engine: Engine, runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server's indexer looks for runs to forget when its listing changed, and at least
    every FORGET_LOOK_S: another process may index a folder made and deleted between two
    of its passes."""
    sdk_run(runs_dir, "a", steps=3)
    server = Indexer(engine, runs_dir)
    server.index_once()
    sdk_run(runs_dir, "brief", steps=3)
    Indexer(engine, runs_dir).index_once()  # a command's pass, between two of the server's
    shutil.rmtree(runs_dir / "brief")
    monkeypatch.setattr(indexer_module, "FORGET_LOOK_S", 0.0, raising=False)
    report = server.index_once()
    assert run_of(engine, "brief") == [] and len(run_of(engine, "a")) == 1
    assert len(report.forgotten) == 1


def _names(runs: list[dict[str, Any]]) -> list[str]:
    return sorted(r["name"] for r in runs)
