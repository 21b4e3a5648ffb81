"""The index file deleted or replaced while a server indexes its runs folder (`runwatch ui`):
the server opens the index at its path again at its next pass and indexes the whole folder
into it, so the API and a fresh `runwatch runs list` show every run again, a run recorded
after the deletion too; a file that is no index put there is said in the log, not fatal."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from runwatch.cli.context import default_db
from runwatch.server.runner import Runner
from runwatch.store.db import open_engine
from tests.support.cli import run_cli
from tests.support.http import get
from tests.support.rundirs import sdk_run
from tests.support.wait import wait_for


@pytest.fixture
def ui(runs_dir: Path) -> Iterator[Runner]:
    """A server over `runs_dir` with its index where `runwatch ui` keeps it."""
    engine = open_engine(default_db(runs_dir))
    with Runner(engine, runs_dir=runs_dir, port=0, interval=0.05, warm=False) as srv:
        yield srv
    engine.dispose()


def api_names(srv: Runner) -> list[str] | None:
    """The runs' names the API lists; None while it cannot read the index (a 503 between
    the file's deletion and the pass that makes it again)."""
    got = get(f"{srv.url}/api/runs")
    return sorted(r["name"] for r in got.json()["runs"]) if got.status_code == 200 else None


def cli_names(runs_dir: Path) -> list[str]:
    out = run_cli("runs", "list", "--dir", str(runs_dir), "-o", "json").stdout
    return sorted(r["name"] for r in json.loads(out))


def points(srv: Runner, name: str) -> int:
    """How many points of `loss` the API says the run holds."""
    got = get(f"{srv.url}/api/runs/{name}/metrics/keys")
    if got.status_code == 404:  # not indexed yet
        return 0
    return int({k["key"]: k["count"] for k in got.json()["keys"]}.get("loss", 0))


@pytest.mark.parametrize("how", ["file", "folder"])
def test_a_deleted_index_is_made_again_from_the_runs_folder(
        ui: Runner, runs_dir: Path, how: str, caplog: pytest.LogCaptureFixture) -> None:
    sdk_run(runs_dir, "before", steps=7)
    wait_for(lambda: points(ui, "before") == 7, what="the first run in the API")
    db = default_db(runs_dir)
    with caplog.at_level(logging.WARNING, logger="runwatch.server"):
        if how == "file":
            db.unlink()  # its WAL and shared memory stay, as after `rm index.db`
        else:
            shutil.rmtree(db.parent)
        sdk_run(runs_dir, "after", steps=3)
        # both runs' points: a pass stores a run's row before its records, so the list
        # can name `before` while its points are still being stored
        wait_for(lambda: api_names(ui) == ["after", "before"]
                 and [points(ui, n) for n in ("after", "before")] == [3, 7],
                 what="both runs in the API from an index made again")
    assert db.exists()
    assert cli_names(runs_dir) == ["after", "before"]
    said = [r.getMessage() for r in caplog.records if "was deleted while" in r.getMessage()]
    assert said == [f"the index {db} was deleted while this server ran: it is opened again "
                    f"there and {runs_dir} is indexed into it again"]


def test_an_index_replaced_by_an_older_copy_is_brought_up_to_the_folder(
        ui: Runner, runs_dir: Path) -> None:
    sdk_run(runs_dir, "first", steps=5)
    wait_for(lambda: points(ui, "first") == 5, what="the first run in the API")
    db = default_db(runs_dir)
    backup = runs_dir.parent / "backup.db"
    with ui.engine.connect() as conn:  # a whole copy, as `sqlite3 index.db .backup` makes
        conn.exec_driver_sql(f"VACUUM INTO '{backup}'")
    sdk_run(runs_dir, "second", steps=4)
    wait_for(lambda: api_names(ui) == ["first", "second"], what="the second run")
    os.replace(backup, db)  # restored over it
    sdk_run(runs_dir, "third", steps=2)
    wait_for(lambda: [points(ui, n) for n in ("first", "second", "third")] == [5, 4, 2],
             what="every run in the API from the restored index")
    assert cli_names(runs_dir) == ["first", "second", "third"]


def test_a_file_that_is_no_index_put_in_its_place_is_said_until_it_is_removed(
        ui: Runner, runs_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    sdk_run(runs_dir, "kept", steps=3)
    wait_for(lambda: api_names(ui) == ["kept"], what="the run in the API")
    db = default_db(runs_dir)
    stray = runs_dir.parent / "notes.txt"
    stray.write_text("not a database, but long enough to be read as a file's header\n" * 20)
    with caplog.at_level(logging.ERROR, logger="runwatch.server"):
        os.replace(stray, db)
        wait_for(lambda: any("is not a SQLite database" in r.getMessage()
                             for r in caplog.records), what="the stray file said in the log")
    db.unlink()
    sdk_run(runs_dir, "later", steps=2)
    wait_for(lambda: api_names(ui) == ["kept", "later"], what="both runs once it was removed")
