"""Opening an index of another schema revision, as a user meets it after changing runwatch:
an older index is upgraded and the process that upgrades it says so, once, on stderr (a
command's, a server's log), since no older runwatch can open it after; an index a newer
runwatch made is refused with what to do, not Alembic's words. Before, the upgrade said
nothing, and the refusal read "cannot bring the database schema to 0016: Can't locate
revision identified by '0017'; this runwatch may be older than the database"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
from sqlalchemy import Engine, text

from runwatch.server.runner import free_port
from runwatch.store.db import HEAD_REVISION, database_url, open_engine
from tests.support import run_cli, sdk_run, wait_for
from tests.support.http import get
from tests.support.migrations import downgrade

OLDER = "0010"
NEWER = f"{int(HEAD_REVISION) + 1:04d}"


def said_upgrade(where: str) -> str:
    return (f"upgraded {where} from schema {OLDER} to {HEAD_REVISION}; runwatch versions "
            "before this one cannot open it now")


def where(db_url: str) -> str:
    """How the messages name the index of `db_url`."""
    if db_url.startswith("sqlite"):
        return f"the index {db_url.split(':///', 1)[1]}"
    engine = open_engine(db_url, migrate=False)
    try:
        return f"the index database {engine.url.render_as_string(hide_password=True)}"
    finally:
        engine.dispose()


def revision(db_url: str) -> str:
    engine = open_engine(db_url, migrate=False)
    try:
        with engine.connect() as conn:
            return str(conn.execute(text("SELECT version_num FROM alembic_version")).scalar())
    finally:
        engine.dispose()


def stamp(db_url: str, version: str) -> None:
    engine = open_engine(db_url, migrate=False)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": version})
    finally:
        engine.dispose()


def test_a_command_that_upgrades_the_index_says_so_once(
        engine: Engine, db_url: str, runs_dir: Path) -> None:
    sdk_run(runs_dir, "x")
    downgrade(engine, OLDER)
    engine.dispose()
    first = run_cli("runs", "list", "--dir", str(runs_dir), "--db", db_url)
    assert first.stderr.splitlines() == [said_upgrade(where(db_url))]
    assert "x" in first.stdout
    assert revision(db_url) == HEAD_REVISION
    again = run_cli("runs", "list", "--dir", str(runs_dir), "--db", db_url)
    assert again.stderr == ""


def test_of_processes_that_open_an_older_index_together_only_the_one_that_upgrades_says_so(
        engine: Engine, db_url: str) -> None:
    downgrade(engine, OLDER)
    engine.dispose()
    code = "import sys; from runwatch.store.db import open_engine; open_engine(sys.argv[1])"
    procs = [subprocess.Popen([sys.executable, "-c", code, db_url], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    said = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, said
    assert sorted(said) == ["", "", "", said_upgrade(where(db_url)) + "\n"]


def test_the_server_that_upgrades_the_index_says_so_in_its_log(
        runs_dir: Path, tmp_path: Path) -> None:
    sdk_run(runs_dir, "x")
    db = tmp_path / "index.db"
    engine = open_engine(db)
    downgrade(engine, OLDER)
    engine.dispose()
    port = free_port()
    log = tmp_path / "ui.log"
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen([sys.executable, "-m", "runwatch", "ui", str(runs_dir), "--db",
                                 str(db), "--port", str(port), "--workers", "0"],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: _answers(f"http://127.0.0.1:{port}/api/runs"),
                 what="the upgraded server to answer")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    lines = log.read_text(encoding="utf-8").splitlines()
    assert said_upgrade(where(database_url(db))) in lines


def _answers(url: str) -> bool:
    try:
        return get(url, timeout=2).status_code == 200
    except httpx.HTTPError:  # not listening yet
        return False


def test_an_index_a_newer_runwatch_made_is_refused_saying_what_to_do(
        engine: Engine, db_url: str, runs_dir: Path) -> None:
    sdk_run(runs_dir, "x")
    engine.dispose()
    stamp(db_url, NEWER)
    refused = run_cli("runs", "list", "--dir", str(runs_dir), "--db", db_url, check=False)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"error: {where(db_url)} was made by a newer runwatch (schema {NEWER}; this one knows "
        f"up to {HEAD_REVISION}): upgrade runwatch, or point --db at another index (the runs "
        "folder is indexed again there)")
    assert revision(db_url) == NEWER
