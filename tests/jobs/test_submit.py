"""Submitting a job: the run folder (manifest, job.json, one QUEUED event), the index
(a QUEUED run with its jobs row) at once, and refusals that leave nothing behind."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from runwatch.ingest import Indexer
from runwatch.jobs.spec import JobSpecError, command_spec, read_spec, recipe_spec, validate
from runwatch.jobs.submit import SubmitError, submit
from runwatch.rundir import format as fmt
from runwatch.store import schema as s
from tests.support.jobs import events, job, run_row, submit_command


def test_submit_makes_a_queued_run_on_disk_and_in_the_index(engine: Engine,
                                                            runs_dir: Path) -> None:
    spec = recipe_spec("sft", ["max_steps=3"], cwd=runs_dir, devices=2, priority=5,
                       max_attempts=3, startup_timeout_s=60)
    run = submit(engine, runs_dir, spec, "first", project="demo")
    assert run.dir == (runs_dir / "first").resolve() and run.status == "QUEUED"
    assert sorted(p.name for p in run.dir.iterdir()) == [fmt.EVENTS, fmt.JOB, fmt.MANIFEST]
    manifest = json.loads((run.dir / fmt.MANIFEST).read_text())
    assert (manifest["run_id"], manifest["project"], manifest["method"]) == \
        (run.run_id, "demo", "sft")
    [event] = events(run.dir)
    assert (event["seq"], event["phase"], event["attempt"]) == (0, "QUEUED", 1)
    on_disk = read_spec(run.dir)
    assert on_disk is not None and on_disk.argv[-3:] == ["recipes", "sft", "max_steps=3"]
    assert on_disk.argv[0] == sys.executable and on_disk.submitted_at == event["ts"]
    row = run_row(engine, "first")
    assert (row.pk, row.status, row.attempt, row.method) == (run.run_pk, "QUEUED", 1, "sft")
    got = job(engine, "first")
    assert got is not None
    assert (got["kind"], got["recipe"], got["devices"], got["priority"], got["max_attempts"],
            got["startup_timeout_s"], got["attempt"], got["worker_id"]) == \
        ("recipe", "sft", 2, 5, 3, 60.0, 1, None)
    assert got["argv"] == on_disk.argv
    assert Indexer(engine, runs_dir).index_once().rows == 0, "indexing again adds nothing"


def test_a_taken_name_is_refused_and_the_run_there_is_untouched(engine: Engine,
                                                               runs_dir: Path) -> None:
    first = submit_command(engine, runs_dir, "same")
    before = sorted((p.name, p.stat().st_mtime_ns) for p in first.dir.iterdir())
    with pytest.raises(SubmitError, match=r"already exists.*choose another name") as err:
        submit_command(engine, runs_dir, "same")
    assert err.value.field == "name"
    assert sorted((p.name, p.stat().st_mtime_ns) for p in first.dir.iterdir()) == before
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(s.jobs)).scalar() == 1


def test_a_name_another_run_of_the_index_holds_is_refused(engine: Engine, runs_dir: Path,
                                                           tmp_path: Path) -> None:
    """A run of the index by that name in no folder of this runs folder (one sent over
    HTTP, one of another runs folder): before, the job took the name too, and `runs get
    NAME` then failed ("names 2 runs")."""
    elsewhere = tmp_path / "other-runs"
    submit_command(engine, elsewhere, "shared")
    with pytest.raises(SubmitError, match=r"'shared' already exists on this index") as err:
        submit_command(engine, runs_dir, "shared")
    assert err.value.field == "name"
    assert not (runs_dir / "shared").exists(), "nothing is made for a refused job"
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(s.runs)
                            .where(s.runs.c.name == "shared")).scalar() == 1


@pytest.mark.parametrize(("name", "project", "field"), [
    ("../escape", "default", "name"), ("", "default", "name"), ("ok", "a/b", "project")])
def test_a_bad_name_or_project_is_refused_before_any_folder(
        engine: Engine, runs_dir: Path, name: str, project: str, field: str) -> None:
    with pytest.raises(SubmitError, match="letters, digits") as err:
        submit(engine, runs_dir, command_spec(["true"], cwd=runs_dir), name, project=project)
    assert err.value.field == field
    assert list(runs_dir.iterdir()) == []


def test_a_failure_after_the_folder_was_made_removes_the_folder(engine: Engine,
                                                                runs_dir: Path) -> None:
    """A spec that cannot be written as JSON (validation is bypassed here on purpose)
    fails after the folder and its manifest exist: the folder goes again."""
    spec = command_spec(["true"], cwd=runs_dir)
    broken = spec.__class__(**{**spec.as_dict(), "argv": [object()]})
    with pytest.raises(TypeError):
        submit(engine, runs_dir, broken, "broken")
    assert list(runs_dir.iterdir()) == []


def test_a_default_name_is_made_from_the_recipe(engine: Engine, runs_dir: Path) -> None:
    run = submit(engine, runs_dir, recipe_spec("dpo", cwd=runs_dir))
    assert run.name.startswith("dpo-") and (runs_dir / run.name / fmt.JOB).is_file()
    other = submit_command(engine, runs_dir, None)  # type: ignore[arg-type]
    assert other.name.startswith("job-")


@pytest.mark.parametrize(("change", "message"), [
    ({"kind": "shell"}, "kind must be 'recipe' or 'command'"),
    ({"kind": "recipe", "recipe": "ppo"}, "recipe must be one of sft, dpo, grpo"),
    ({"recipe": "sft"}, "a command job has no recipe"),
    ({"argv": []}, "argv must be a non-empty list"),
    ({"argv": ["python", 3]}, "argv must be a non-empty list"),
    ({"cwd": "relative/dir"}, "cwd must be an absolute folder path"),
    ({"devices": 0}, "devices must be a whole number from 1"),
    ({"devices": True}, "devices must be a whole number"),
    ({"max_attempts": 0}, "max_attempts must be a whole number from 1"),
    ({"priority": 1.5}, "priority must be a whole number"),
    ({"startup_timeout_s": -1}, "startup_timeout_s must be a positive number"),
    ({"device_profile": ""}, "device_profile must be a profile's name"),
    ({"schema_version": 2}, "upgrade runwatch"),
    ({"colour": "red"}, "unknown job field 'colour'"),
])
def test_an_invalid_spec_is_refused_naming_the_field(change: dict[str, object],
                                                    message: str) -> None:
    good = {"kind": "command", "argv": ["python", "train.py"], "cwd": "/tmp"}
    assert validate(good).devices == 1
    with pytest.raises(JobSpecError, match=message):
        validate({**good, **change})


def test_an_invalid_job_json_is_reported_and_no_job_row_is_made(engine: Engine,
                                                                runs_dir: Path) -> None:
    run = submit_command(engine, runs_dir, "edited")
    (run.dir / fmt.JOB).write_text(json.dumps({"kind": "command", "argv": "python x.py",
                                               "cwd": "/tmp"}))
    report = Indexer(engine, runs_dir).index_once()
    assert any("argv must be a non-empty list" in p for p in report.problems), report.problems
    got = job(engine, "edited")
    assert got is not None and got["argv"][0] == sys.executable, "the last good spec stays"


def test_submit_while_a_server_indexes_the_same_folder(engine: Engine, runs_dir: Path) -> None:
    """The server's indexer may find a new run before submit indexes it: both insert it,
    and neither fails (submit must not undo a run because another indexer won)."""
    stop = threading.Event()
    failures: list[str] = []

    def server_indexer() -> None:
        indexer = Indexer(engine, runs_dir)
        while not stop.is_set():
            failures.extend(p for p in indexer.index_once().problems if "failed" in p)

    thread = threading.Thread(target=server_indexer)
    thread.start()
    try:
        names = [submit_command(engine, runs_dir, f"busy{i:02d}").name for i in range(30)]
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not failures
    assert sorted(p.name for p in runs_dir.iterdir()) == names
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(s.jobs)).scalar() == 30
