"""An index that cannot be used where it is (store.db.IndexUnusable): on a full disk, or
damaged. A command says so in one line and exits 2; a server says it once (a minute) in
its log, answers 503 with it, and shows no run as dead for an end it could not store."""

from __future__ import annotations

import errno
import logging
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

import runwatch
from runwatch.rundir.format import TERMINAL_PHASES
from runwatch.server.app import create_app
from runwatch.server.runner import Runner, free_port
from runwatch.store import schema as s
from runwatch.store.db import IndexUnusable, open_engine, unusable
from runwatch.store.runrows import process_gone
from tests.server.apiclient import Api, assert_error
from tests.support.cli import run_cli
from tests.support.disk import small_disk
from tests.support.wait import wait_for

FULL = ("error: the index DB is on a full disk (database or disk is full): free space, or "
        "point --db elsewhere; the runs folder is indexed again there")
DAMAGED = ("the index DB is damaged (database disk image is malformed): delete it (the runs "
           "folder is indexed again into a new one) or point --db elsewhere")


DISK_KIB = 1024
BIG_RUN = """
import sys, runwatch
run = runwatch.init(name=sys.argv[2], dir=sys.argv[1], method="sft")
for step in range(200):
    run.log({"loss": 1.0 / (step + 1)}, step=step)
    if step % 50 == 0:
        run.log_samples(step, [{"prompt": str(i), "completion": "c" * 8000} for i in range(50)])
run.finish()
"""


def big_runs(runs: Path, count: int = 3) -> None:
    """Finished runs (their processes gone) whose samples (1.6 MB a run) fill a disk of
    DISK_KIB, and the rest of them does not."""
    for n in range(count):
        subprocess.run([sys.executable, "-c", BIG_RUN, str(runs), f"r{n}"], check=True,
                       timeout=120)


def test_commands_on_a_full_disk_say_so_in_one_line(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    big_runs(runs)
    with small_disk(tmp_path / "disk", DISK_KIB) as disk:
        db = str(disk / "index.db")
        for args in (("index", str(runs)), ("runs", "list", "--dir", str(runs))):
            done = run_cli(*args, "--db", db, check=False)
            assert done.returncode == 2, done.stderr
            assert "Traceback" not in done.stderr
            assert done.stderr.split("\n").count(FULL) == 1, done.stderr


def test_a_server_on_a_full_disk_says_so_once_and_shows_no_run_dead(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    runs = tmp_path / "runs"
    big_runs(runs)
    caplog.set_level(logging.INFO)
    with small_disk(tmp_path / "disk", DISK_KIB) as disk:
        engine = open_engine(disk / "index.db")
        runner = Runner(engine, runs, port=0, interval=0.01, prewarm=False, warm=False,
                        save_series=False)
        with pytest.raises(IndexUnusable):
            runner.start()  # its first pass, before it answers (index_first)
        runner = Runner(engine, runs, port=0, interval=0.01, index_first=False,
                        prewarm=False, warm=False, save_series=False)
        with runner:
            # passes meet the full disk (each tries every run again) while the server
            # answers; an old server judged such runs dead after ten passes
            wait_for(lambda: any("full disk" in r.getMessage() for r in caplog.records),
                     what="the server to say its index is on a full disk")
            time.sleep(1.0)  # many more passes
            judge = runner.settle.judge()
            with engine.connect() as conn:
                rows = conn.execute(select(s.runs.c.run_id, s.runs.c.status, s.runs.c.attempt,
                                           s.runs.c.manifest)).all()
        engine.dispose()
    said = [r for r in caplog.records if "full disk" in r.getMessage()]
    assert len(said) == 1 and said[0].exc_info is None
    assert not [r for r in caplog.records if r.exc_info is not None]
    unended = [r for r in rows if r.status not in TERMINAL_PHASES]
    # their end could not be stored, and their process is gone: not ended, yet not dead
    assert unended and all(process_gone(r) for r in unended)
    assert not [r for r in unended if judge(r)]


def damaged_index(tmp_path: Path) -> tuple[Path, Path]:
    runs, db = tmp_path / "runs", tmp_path / "index.db"
    for name in ("a", "b"):
        with runwatch.init(name=name, dir=runs) as run:
            for step in range(3000):
                run.log({"loss": 1.0 / (step + 1)}, step=step)
    run_cli("index", str(runs), "--db", str(db))
    size = db.stat().st_size
    with open(db, "r+b") as f:
        f.truncate(size // 2)
    return runs, db


def test_a_command_on_a_damaged_index_says_what_to_do(tmp_path: Path) -> None:
    runs, db = damaged_index(tmp_path)
    done = run_cli("runs", "list", "--dir", str(runs), "--db", str(db), check=False)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip() == f"error: {DAMAGED}"


def test_the_api_on_a_damaged_index_answers_503_saying_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _, db = damaged_index(tmp_path)
    engine = open_engine(db, migrate=False)
    api = Api(create_app(engine))
    for _ in range(3):
        answer = api.get("/api/runs/a/series", params={"keys": "loss"})
        assert_error(answer, 503)
        assert answer.json()["error"] == DAMAGED
    engine.dispose()
    said = [r for r in caplog.records if "damaged" in r.getMessage()]
    assert len(said) == 1 and said[0].exc_info is None


def test_a_full_disk_elsewhere_is_not_the_index_s() -> None:
    """A write to a run folder on a full disk (a server's retry writing a run's events) is
    no full index: moving --db would not help (found in review: any ENOSPC in an error's
    chain read "the index DB is on a full disk")."""
    folder_full = OSError(errno.ENOSPC, "No space left on device")
    assert unusable(folder_full) is None
    try:
        raise RuntimeError("the route failed") from folder_full
    except RuntimeError as exc:
        assert unusable(exc) is None
    full = sqlite3.connect(":memory:")
    try:
        full.execute("PRAGMA max_page_count=1")
        full.execute("CREATE TABLE t (x BLOB)")
        full.execute("INSERT INTO t VALUES (randomblob(100000))")
    except sqlite3.Error as exc:
        found = unusable(exc)
        assert found is not None and "full" in str(found)
    else:
        raise AssertionError("SQLite took a row past its page limit")
    finally:
        full.close()


def test_a_server_whose_index_cannot_be_written_says_so_until_it_can(tmp_path: Path) -> None:
    """While passes cannot write the index, a live run's page would stop moving with no
    word why: /api/server's notes (beside the web app's run list) and /metrics say so,
    and since when, until a pass writes the index again (here: once the disk has room)."""
    runs = tmp_path / "runs"
    big_runs(runs)
    with small_disk(tmp_path / "disk", DISK_KIB) as disk:
        engine = open_engine(disk / "index.db")
        runner = Runner(engine, runs, port=free_port(), interval=0.01, index_first=False,
                        prewarm=False, warm=False, save_series=False)
        with runner, httpx.Client(base_url=runner.url) as http:
            def notes() -> list[str]:
                got: list[str] = http.get("/api/server").json()["notes"]
                return got

            def writable() -> str:
                return next(line for line in http.get("/metrics").text.splitlines()
                            if line.startswith("runwatch_index_writable "))

            said = wait_for(lambda: [n for n in notes() if "full disk" in n],
                            what="the server's notes to say its index cannot be written")
            assert len(said) == 1
            assert re.fullmatch(r"Nothing has been indexed since \d{4}-\d\d-\d\d "
                                r"\d\d:\d\d:\d\d UTC: the index DB is on a full disk .*"
                                r"catches up once the index can be written again\.", said[0])
            assert writable() == "runwatch_index_writable 0"
            # many more failed passes: still one note, its time that of the first
            time.sleep(0.5)
            assert [n for n in notes() if "full disk" in n] == said
            subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
            wait_for(lambda: not [n for n in notes() if "full disk" in n],
                     what="the note to go once a pass writes the index")
            wait_for(lambda: writable() == "runwatch_index_writable 1",
                     what="/metrics to say the index is written again")
            with engine.connect() as conn:
                ended = conn.execute(select(s.runs.c.status)).scalars().all()
            assert sorted(ended) == ["SUCCEEDED"] * 3
        engine.dispose()
