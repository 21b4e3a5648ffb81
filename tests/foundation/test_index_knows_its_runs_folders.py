"""The index records the runs folders it was indexed from (runs_folders, migration 0019):
a run moved into a runs folder the index holds no run of yet is a move, whichever folder's
`runwatch index` comes first, and one `runwatch index` (one pass per process) that finds
the runs folder on another disk than the index's last pass over it forgets nothing. Before,
the move search knew only the runs folders the index held runs of (the run was forgotten,
its findings' ids and job row lost, and indexed anew), and the device was compared only
within one long-lived indexer. An idle pass writes nothing to the table.

Real run folders written by the SDK, the real `runwatch index` command (as a subprocess
where a pass per process is what is tested), the real indexer on SQLite and PostgreSQL,
and a real mount (in a private mount namespace)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, select

from runwatch.health.store import on_metrics
from runwatch.ingest.indexer import Indexer
from runwatch.store import open_engine
from runwatch.store import schema as s
from tests.foundation.test_index_run_moved_between_runs_folders import held, nan_at_5
from tests.support import cli_here, sdk_run
from tests.support.cli import run_cli
from tests.support.jobs import submit_command

ROOT = Path(__file__).resolve().parents[2]


def holding(db: str, *names: str) -> dict[str, dict[str, Any]]:
    engine = open_engine(db)
    try:
        return {name: held(engine, name) for name in names}
    finally:
        engine.dispose()


@pytest.mark.parametrize(("new_before", "first"), [
    ("indexed empty", "old folder"),
    ("indexed empty", "new folder"),
    ("never indexed", "new folder"),
])
def test_a_run_moved_into_a_runs_folder_the_index_holds_no_run_of_keeps_its_pk(
        tmp_path: Path, new_before: str, first: str) -> None:
    a, new, db = tmp_path / "runs-a", tmp_path / "runs-new", str(tmp_path / "index.db")
    sdk_run(a, "x", steps=20, metrics=nan_at_5)
    sdk_run(a, "stay", steps=3)
    engine = open_engine(db)
    try:
        submit_command(engine, a, "j")
    finally:
        engine.dispose()
    cli_here("index", str(a), "--db", db)
    new.mkdir()
    if new_before == "indexed empty":
        cli_here("index", str(new), "--db", db)
    gone = tmp_path / "runs-gone"  # a runs folder the index knows that is gone: skipped
    gone.mkdir()
    cli_here("index", str(gone), "--db", db)
    gone.rmdir()
    before = holding(db, "x", "j")
    assert before["x"]["findings"], "the run holds no findings to keep"
    assert before["j"]["job"] is not None

    for name in ("x", "j"):
        (a / name).rename(new / name)
    for d in ((a, new) if first == "old folder" else (new, a)):
        said = run_cli("index", str(d), "--db", db).stdout
        assert "(0 new)" in said and "note:" not in said, said

    after = holding(db, "x", "j", "stay")
    for name in ("x", "j"):
        assert after[name]["dir"] == str((new / name).resolve())
        assert {**after[name], "dir": None} == {**before[name], "dir": None}
    assert after["stay"]["dir"] == str((a / "stay").resolve())


def statements_on_runs_folders(engine: Engine) -> list[str]:
    """The SQL statements `engine` runs from now on that name runs_folders."""
    said: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "runs_folders" in statement:
            said.append(statement.split(None, 1)[0].upper())

    event.listen(engine, "before_cursor_execute", note)
    return said


def test_an_idle_pass_writes_nothing_to_the_runs_folders_table(engine: Engine,
                                                               tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for name in ("a", "b"):
        sdk_run(runs, name, steps=3)
    server = Indexer(engine, runs, hooks=[on_metrics])
    server.index_once()
    with engine.connect() as conn:
        recorded = conn.execute(select(s.runs_folders)).all()
    assert [row.path for row in recorded] == [str(runs.resolve())]

    said = statements_on_runs_folders(engine)
    for _ in range(3):
        server.index_once()
    assert said == []  # a long-lived indexer read the row once, at its first pass
    Indexer(engine, runs, hooks=[on_metrics]).index_once()  # a command's single pass
    assert said == ["SELECT"]
    with engine.connect() as conn:
        assert conn.execute(select(s.runs_folders)).all() == recorded


# Run in a private mount namespace (`unshare -rm`): a tmpfs holding runs a and b is bound
# on the runs folder and `runwatch index` indexes it; it is unbound (the mount point holds
# run `under`, written into it before), and `runwatch index` runs again; then bound again.
# Each `runwatch index` is a process of its own: only the index knows the last device.
MOUNTED = """
import json, subprocess, sys
from pathlib import Path
from sqlalchemy import select
from runwatch.store import open_engine
from runwatch.store import schema as s
from tests.support import sdk_run

runs, disk, db = (Path(a) for a in sys.argv[1:4])
sdk_run(runs, "under", steps=3)
subprocess.run(["mount", "-t", "tmpfs", "none", str(disk)], check=True)
subprocess.run(["mount", "--bind", str(disk), str(runs)], check=True)
sdk_run(runs, "a", steps=3)
sdk_run(runs, "b", steps=3)
def index():
    return subprocess.run([sys.executable, "-m", "runwatch", "index", str(runs), "--db",
                           str(db)], capture_output=True, text=True, check=True).stdout
def pks():
    engine = open_engine(str(db))
    try:
        with engine.connect() as conn:
            return {name: pk for name, pk in conn.execute(select(s.runs.c.name, s.runs.c.pk))}
    finally:
        engine.dispose()
out = {}
index()
out["mounted"] = pks()
subprocess.run(["umount", str(runs)], check=True)
out["unmounted"] = {"said": index(), "pks": pks()}
subprocess.run(["mount", "--bind", str(disk), str(runs)], check=True)
out["back"] = {"said": index(), "pks": pks()}
print(json.dumps(out))
"""


def test_runwatch_index_of_a_runs_folder_on_another_disk_than_at_the_last_pass_forgets_nothing(
        tmp_path: Path) -> None:
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-rm", "true"],
                                         capture_output=True).returncode != 0:
        pytest.skip("no private mount namespace here (unshare -rm) to mount a disk in")
    runs, disk = tmp_path / "mnt", tmp_path / "disk"
    runs.mkdir()
    disk.mkdir()
    got = subprocess.run([unshare, "-rm", sys.executable, "-c", MOUNTED, str(runs), str(disk),
                          str(tmp_path / "index.db")], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
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
