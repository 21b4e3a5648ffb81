"""A pass does not forget most of a runs folder's runs at once: a disk that is not mounted
leaves its mount point holding only what was written into it meanwhile, and a listing
cut short looks the same. Before, such a pass forgot every run the disk held (indexed anew
when it came back, their findings' ids and job rows lost). The runs are kept and the pass
says what to do (`runwatch index --forget-gone`); a few deleted runs are forgotten as
before, and a pass that finds the runs folder on another disk than the last pass did
forgets nothing.

Real run folders written by the SDK, the real indexer on SQLite and PostgreSQL, the real
`runwatch index` command, and a real mount (in a private mount namespace)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from runwatch.health.store import on_metrics
from runwatch.ingest.forget import FEW_GONE
from runwatch.ingest.indexer import Indexer, IndexReport
from runwatch.store import schema as s
from tests.support import cli_here, sdk_run

ROOT = Path(__file__).resolve().parents[2]


def index(engine: Engine, runs: Path) -> IndexReport:
    return Indexer(engine, runs, hooks=[on_metrics]).index_once()


def pks(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {name: pk for name, pk in conn.execute(select(s.runs.c.name, s.runs.c.pk))}


def test_a_mount_point_written_into_while_unmounted_forgets_none_of_the_disks_runs(
        engine: Engine, tmp_path: Path) -> None:
    runs, elsewhere = tmp_path / "mnt", tmp_path / "disk-away"
    names = [f"r{i}" for i in range(6)]
    for name in names:
        sdk_run(runs, name, steps=3)
    server = Indexer(engine, runs, hooks=[on_metrics])
    server.index_once()
    before = pks(engine)

    elsewhere.mkdir()
    for name in names:  # the disk is unmounted; a job writes two runs into its mount point
        (runs / name).rename(elsewhere / name)
    sdk_run(runs, "new1", steps=3)
    sdk_run(runs, "new2", steps=3)
    for _ in range(2):
        report = server.index_once()
        assert report.forgotten == []
        assert report.problems == [
            f"the folders of 6 of the 8 runs indexed from the runs folder {runs} are gone at "
            "once, so they are kept, in case its disk is not mounted or its listing is "
            f"incomplete; if they are gone for good, `runwatch index {runs} --forget-gone` "
            "(with this index's --db) forgets them"]
    assert {n: before[n] for n in names} == {n: pks(engine)[n] for n in names}

    for name in names:  # the disk is back (and hides what was written beneath it)
        (elsewhere / name).rename(runs / name)
    for name in ("new1", "new2"):
        shutil.rmtree(runs / name)
    report = server.index_once()
    assert (report.new_runs, report.problems) == (0, [])
    assert pks(engine) == before


def test_a_few_deleted_runs_are_forgotten_at_once_as_before(engine: Engine,
                                                            tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for i in range(6):
        sdk_run(runs, f"r{i}", steps=3)
    index(engine, runs)
    for i in range(FEW_GONE):
        shutil.rmtree(runs / f"r{i}")
    report = index(engine, runs)
    assert len(report.forgotten) == FEW_GONE and report.problems == []
    assert sorted(pks(engine)) == [f"r{i}" for i in range(FEW_GONE, 6)]


def test_runwatch_index_forget_gone_forgets_what_a_pass_kept(tmp_path: Path) -> None:
    runs, db = tmp_path / "runs", str(tmp_path / "index.db")
    for i in range(5):
        sdk_run(runs, f"r{i}", steps=3)
    cli_here("index", str(runs), "--db", db)
    for i in range(4):
        shutil.rmtree(runs / f"r{i}")

    said = cli_here("index", str(runs), "--db", db).stdout
    assert "note:" not in said
    assert (f"warning: the folders of 4 of the 5 runs indexed from the runs folder {runs} are "
            "gone at once") in said and f"`runwatch index {runs} --forget-gone`" in said
    listed = cli_here("runs", "list", "--dir", str(runs), "--db", db, "-o", "json").stdout
    assert len(json.loads(listed)) == 5

    said = cli_here("index", str(runs), "--forget-gone", "--db", db).stdout
    assert said.count("  note: run r") == 4 and "warning:" not in said
    listed = cli_here("runs", "list", "--dir", str(runs), "--db", db, "-o", "json").stdout
    assert [r["name"] for r in json.loads(listed)] == ["r4"]

    shutil.rmtree(runs / "r4")  # an empty runs folder too, when told
    said = cli_here("index", str(runs), "--forget-gone", "--db", db).stdout
    assert said.count("  note: run r4") == 1


# Run in a private mount namespace (`unshare -rm`): a tmpfs holding runs a and b is bound on
# the runs folder and indexed; it is unbound (the mount point holds run `under`, written
# into it before) and indexed again; then bound again and indexed. `server`: one long-lived
# indexer makes the passes; `command`: each is a `runwatch index` process of its own, so
# only the index knows the last device (its runs_folders row).
MOUNTED = """
import json, subprocess, sys
from pathlib import Path
from runwatch.ingest.indexer import Indexer
from runwatch.store import open_engine
from sqlalchemy import select
from runwatch.store import schema as s
from tests.support import sdk_run

mode, (runs, disk, db) = sys.argv[1], (Path(a) for a in sys.argv[2:5])
sdk_run(runs, "under", steps=3)
subprocess.run(["mount", "-t", "tmpfs", "none", str(disk)], check=True)
subprocess.run(["mount", "--bind", str(disk), str(runs)], check=True)
sdk_run(runs, "a", steps=3)
sdk_run(runs, "b", steps=3)
engine = open_engine(str(db))
server = Indexer(engine, runs, log_folder=False)
def index():
    # what the pass said: the command's output, or the indexer's report in its words
    if mode == "command":
        return subprocess.run([sys.executable, "-m", "runwatch", "index", str(runs), "--db",
                               str(db)], capture_output=True, text=True, check=True).stdout
    report = server.index_once()
    return "\\n".join([*report.problems,
                      *(f"run {name} is no longer indexed" for name in report.forgotten)])
def pks():
    with engine.connect() as conn:
        return {name: pk for name, pk in conn.execute(select(s.runs.c.name, s.runs.c.pk))}
out = {}
index()
out["mounted"] = pks()
subprocess.run(["umount", str(runs)], check=True)
out["unmounted"] = {"said": index(), "pks": pks()}
subprocess.run(["mount", "--bind", str(disk), str(runs)], check=True)
out["back"] = {"said": index(), "pks": pks()}
print(json.dumps(out))
"""


@pytest.mark.parametrize("mode", ["server", "command"])
def test_a_runs_folder_on_another_disk_than_at_the_last_pass_forgets_nothing(
        tmp_path: Path, mode: str) -> None:
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-rm", "true"],
                                         capture_output=True).returncode != 0:
        pytest.skip("no private mount namespace here (unshare -rm) to mount a disk in")
    runs, disk = tmp_path / "mnt", tmp_path / "disk"
    runs.mkdir()
    disk.mkdir()
    got = subprocess.run([unshare, "-rm", sys.executable, "-c", MOUNTED, mode, str(runs),
                          str(disk), str(tmp_path / "index.db")], capture_output=True,
                         text=True, cwd=ROOT, timeout=300)
    assert got.returncode == 0, got.stderr
    out: dict[str, Any] = json.loads(got.stdout.splitlines()[-1])
    mounted = out["mounted"]
    assert sorted(mounted) == ["a", "b"]
    for state in ("unmounted", "back"):
        said = out[state]["said"]
        assert "is no longer indexed" not in said, said
        assert (f"the runs folder {runs} is on another disk than at the last pass (a disk "
                "was mounted or unmounted on it): no run was forgotten in this pass") in said
        assert {n: out[state]["pks"][n] for n in ("a", "b")} == mounted
