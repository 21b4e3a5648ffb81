"""`mv runs/a runs/b` while run `a` records: the run is renamed, as the run format says of a
renamed folder, and keeps every record. The SDK's writer holds the folder open and writes on
where it now is (its files, opened before, moved with it), says so once, and the index,
which had read the first steps under the old name, keeps them under the new one. Found in
an audit: the SDK made `runs/a` again, and the index held only the steps after the move,
while the first ones lay in `runs/b`, which it took for a copy and never read."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import httpx

import runwatch
from runwatch.server.runner import Runner
from tests.support.cli import cli_here
from tests.support.wait import wait_for

STEPS = 60


def _indexed_steps(server: Runner, name: str) -> int | None:
    answer = httpx.get(f"{server.url}/api/runs/{name}/metrics/keys")
    if answer.status_code != 200:
        return None
    return next((k["count"] for k in answer.json()["keys"] if k["key"] == "loss"), None)


def test_a_live_runs_folder_renamed_keeps_every_record_under_its_new_name(
        server: Runner, runs_dir: Path) -> None:
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        run = runwatch.init(project="p", name="live1", dir=runs_dir)
        for step in range(STEPS // 2):
            run.log({"loss": 1.0 / (step + 1)}, step=step)
        # the server has read the first half under the old name
        wait_for(lambda: _indexed_steps(server, "live1") == STEPS // 2,
                 what="the server to index the first half of the run")
        (runs_dir / "live1").rename(runs_dir / "live1-moved")
        for step in range(STEPS // 2, STEPS):
            run.log({"loss": 1.0 / (step + 1)}, step=step)
        run.finish()
    moved = [str(w.message) for w in said if "was moved to" in str(w.message)]
    assert moved == [f"runwatch: {runs_dir / 'live1'} was moved to {runs_dir / 'live1-moved'} "
                     "while the run recorded; its records go on there"]
    assert not [w for w in said if "removed or replaced" in str(w.message)]
    assert not (runs_dir / "live1").exists()
    assert run.dir == runs_dir / "live1-moved"
    lines = (runs_dir / "live1-moved" / "metrics.jsonl").read_bytes().splitlines()
    assert len(lines) == STEPS
    wait_for(lambda: _indexed_steps(server, "live1-moved") == STEPS,
             what="the server to hold every step under the new name")
    detail = httpx.get(f"{server.url}/api/runs/live1-moved").json()
    assert detail["run"]["status"] == "SUCCEEDED" and detail["run_id"] == run.id
    listed = httpx.get(f"{server.url}/api/runs").json()["runs"]
    assert [(r["name"], r["run_id"]) for r in listed] == [("live1-moved", run.id)]
    # and an index made from the folder alone reads the same
    other = str(runs_dir.parent / "other.db")
    cli_here("index", str(runs_dir), "--db", other)
    listed = json.loads(cli_here("runs", "list", "--dir", str(runs_dir), "--db", other,
                                 "-o", "json").stdout)
    assert [(r["name"], r["status"]) for r in listed] == [("live1-moved", "SUCCEEDED")]


def test_a_live_runs_folder_removed_is_made_again_as_before(runs_dir: Path) -> None:
    """Not a move: a folder removed is made again at its path with what comes next."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        run = runwatch.init(project="p", name="gone", dir=runs_dir)
        run.log({"loss": 1.0}, step=0)
        wait_for(lambda: (runs_dir / "gone" / "metrics.jsonl").exists(),
                 what="the first record on disk")
        shutil.rmtree(runs_dir / "gone")
        run.log({"loss": 0.5}, step=1)
        run.finish()
    assert [w for w in said if "removed or replaced" in str(w.message)]
    assert not [w for w in said if "was moved to" in str(w.message)]
    assert (runs_dir / "gone" / "manifest.json").exists()
    assert run.dir == runs_dir / "gone"

