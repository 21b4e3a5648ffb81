"""A run's name is its own within its project on one index (two runs folders of two
projects may share an index, as a team server's sent runs do): `PROJECT/RUN` names one,
both readers (store/queries for most commands, store/plain for `runs compare`) answer
alike, and a job may take a name only another project's run bears."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.ingest.indexer import Indexer
from runwatch.jobs.spec import command_spec
from runwatch.jobs.submit import SubmitError, submit
from runwatch.store import plain
from runwatch.store import queries as q
from tests.support.cli import cli_here
from tests.support.rundirs import write_run


def two_projects(engine: Engine, tmp_path: Path) -> dict[str, Path]:
    """Runs folders `a` (project pa) and `b` (project pb) on one index, each with a run
    named `x`, and `a` with a run `only-a`."""
    dirs = {}
    for folder, project in (("a", "pa"), ("b", "pb")):
        runs = tmp_path / folder
        runs.mkdir()
        write_run(runs, "x", [{"step": 1, "loss": 1.0}], project=project,
                  run_id=f"{project}-x-id")
        dirs[project] = runs
    write_run(dirs["pa"], "only-a", [{"step": 1, "loss": 1.0}], project="pa")
    for runs in dirs.values():
        Indexer(engine, runs).index_once()
    return dirs


def plain_reader(engine: Engine) -> plain.Reader:
    raw = engine.raw_connection()
    return plain.Reader(raw, "?" if engine.dialect.paramstyle == "qmark" else "%s")


def both(engine: Engine, ref: str) -> tuple[str, str]:
    """What each reader answers for `ref`: the run's project/name, or the error."""
    answers = []
    try:
        with engine.connect() as conn:
            row = q.resolve_run(conn, ref)
            answers.append(f"{row.project}/{row.name}")
    except q.RunNotFound as exc:
        answers.append(str(exc))
    reader = plain_reader(engine)
    try:
        found = plain.resolve_run(reader, ref)
        with engine.connect() as conn:
            answers.append(f"{q.resolve_run(conn, found.run_id).project}/{found.name}")
    except plain.NoSuchRun as exc:
        answers.append(str(exc))
    finally:
        reader.conn.close()
    return answers[0], answers[1]


def test_a_name_two_projects_bear_is_named_by_its_project_in_both_readers(
        engine: Engine, tmp_path: Path) -> None:
    two_projects(engine, tmp_path)
    for ref, expected in (("pa/x", "pa/x"), ("pb/x", "pb/x"), ("only-a", "pa/only-a"),
                          ("pa/only", "pa/only-a")):
        assert both(engine, ref) == (expected, expected), ref
    sq, pl = both(engine, "x")
    assert sq == pl and "names runs of 2 projects (pa, pb)" in sq and "pa/x" in sq
    sq, pl = both(engine, "pb/only-a")
    assert sq == pl == "no run has the id or name 'only-a' in project 'pb'"


def test_a_job_may_take_a_name_only_another_projects_run_bears(
        engine: Engine, tmp_path: Path) -> None:
    dirs = two_projects(engine, tmp_path)
    spec = command_spec(["true"], cwd=tmp_path)
    # `only-a` is project pa's: a job of pb in its own folder may be named so ...
    made = submit(engine, dirs["pb"], spec, name="only-a", project="pb")
    assert (made.project, made.name) == ("pb", "only-a")
    # ... and a job of pa in a third folder may not take pa's own `x` (two of pa's runs)
    other = tmp_path / "c"
    with pytest.raises(SubmitError, match="already exists on this index"):
        submit(engine, other, spec, name="x", project="pa")
    assert not (other / "x").exists()


def test_runs_list_names_a_name_of_several_projects_as_project_slash_name(
        engine: Engine, db_url: str, tmp_path: Path) -> None:
    # the table showed two rows `x` with nothing to tell them apart but `-o wide`
    dirs = two_projects(engine, tmp_path)
    table = cli_here("runs", "list", "--dir", str(dirs["pa"]), "--db", db_url).stdout
    names = {row.split()[0] for row in table.splitlines()[2:] if row.strip()}
    assert names == {"pa/x", "pb/x", "only-a"}, table
    # as the other commands take them
    for ref in ("pa/x", "pb/x"):
        got = cli_here("runs", "get", ref, "--dir", str(dirs["pa"]), "--db", db_url,
                       "-o", "json").stdout
        assert f'"project": "{ref.split("/")[0]}"' in got
