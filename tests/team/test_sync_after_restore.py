"""A team server whose database was restored from a backup (or made anew) at the same URL
gets back, from `runwatch sync` and from an SDK's sender, what it lost: both ask the server
what it holds of each run and send again from there, though the run folder's sent.json
says it was all sent. The real server over HTTP, on SQLite and PostgreSQL; the backup is a
real copy of the database (SQLite's backup API, PostgreSQL's CREATE DATABASE … TEMPLATE)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, make_url, select, text

import runwatch
from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line
from runwatch.sdk.sendhttp import Client
from runwatch.sdk.upload import sync_run
from runwatch.server.runner import Runner, free_port
from runwatch.server.settings import new_token
from runwatch.store import schema as s
from runwatch.store.db import database_url, open_engine
from tests.support import cli_here
from tests.support.stores import PREFIX, PostgresDatabases
from tests.team.serving import in_folder, stored

CopyIndex = Callable[[Engine], Engine]


@pytest.fixture
def copy_index(request: pytest.FixtureRequest, db_url: str, tmp_path: Path
               ) -> Iterator[CopyIndex]:
    """`copy_index(engine)`: a backup of the index as it is now, as a new database (no
    server may use the index meanwhile); the engine of the copy."""
    made: list[tuple[Engine, str]] = []
    databases: PostgresDatabases | None = None

    def copy(engine: Engine) -> Engine:
        nonlocal databases
        engine.dispose()
        url = make_url(db_url)
        if url.get_backend_name() == "sqlite":
            assert url.database is not None
            target = tmp_path / f"backup-{len(made)}.db"
            source, dest = sqlite3.connect(url.database), sqlite3.connect(target)
            try:
                source.backup(dest)
            finally:
                source.close()
                dest.close()
            copied = database_url(target)
        else:
            databases = request.getfixturevalue("postgres")
            name = f"{PREFIX}{uuid.uuid4().hex[:12]}"
            with databases.admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{url.database}"'))
            copied = url.set(database=name).render_as_string(hide_password=False)
        backup = open_engine(copied)
        made.append((backup, copied))
        return backup

    yield copy
    for backup, copied in made:
        backup.dispose()
        if databases is not None:
            databases.drop(copied)


def _serve(engine: Engine, port: int, token: str) -> Runner:
    return Runner(engine, port=port, token=token, prewarm=False, save_series=False,
                  warm=False)


def _write(runs: Path, name: str, steps: range, resume: bool = False,
           server: str | None = None, token: str | None = None) -> Path:
    """Run `name` logs `steps` (resumed: after what it logged before), with a samples file
    and a log line every 50 steps and a checkpoint at the last, then finishes."""
    run = runwatch.init("team", name=name, dir=runs, resume=resume, config={"lr": 1e-4},
                        server=server, token=token)
    for step in steps:
        run.log({"loss": 1.0 / (step + 1), "lr": 1e-4}, step=step)
        if step % 50 == 0:
            run.log_samples(step, [{"prompt": f"p{step}", "completion": "x", "reward": 1.0}])
            run.log_text(f"step {step}")
    run.log_checkpoint(steps[-1], "training", f"ckpt-{steps[-1]}")
    run.finish()
    return runs / name


def _run_id(run_dir: Path) -> str:
    return str(loads_line((run_dir / fmt.MANIFEST).read_bytes())["run_id"])


def _held(engine: Engine, run_dir: Path) -> dict[str, Any] | None:
    """What the index holds of a run folder's run: its records (tests.team.serving), its
    checkpoints, samples files, config and phase."""
    held = stored(engine, _run_id(run_dir))
    if held is None:
        return None
    r = s.runs.c
    with engine.connect() as conn:
        row = conn.execute(select(r.pk, r.status, r.config)
                           .where(r.run_id == _run_id(run_dir))).one()
        checkpoints = conn.execute(select(s.checkpoints.c.seq)
                                   .where(s.checkpoints.c.run_pk == row.pk)).scalars().all()
        samples = conn.execute(select(s.samples.c.file).where(s.samples.c.run_pk == row.pk)
                               .distinct()).scalars().all()
    return {**held, "checkpoints": sorted(checkpoints), "samples": sorted(samples),
            "config": row.config is not None, "status": row.status}


def _folder(run_dir: Path) -> dict[str, Any]:
    """The same view of the run folder."""
    last = loads_line((run_dir / fmt.EVENTS).read_bytes().splitlines()[-1])
    checkpoints = [loads_line(line)["seq"]
                   for line in (run_dir / fmt.CHECKPOINTS).read_bytes().splitlines()]
    samples = sorted(p.name for p in run_dir.iterdir()
                     if fmt.parse_sample_file_name(p.name) is not None)
    return {**in_folder(run_dir), "checkpoints": checkpoints, "samples": samples,
            "config": True, "status": last["phase"]}


def test_sync_after_a_restore_sends_what_the_backup_lacks(
        tmp_path: Path, engine: Engine, copy_index: CopyIndex) -> None:
    runs, port, token = tmp_path / "runs", free_port(), new_token()
    url = f"http://127.0.0.1:{port}"
    sync = ("sync", str(runs), "--server", url, "--token", token)
    first = _write(runs, "first", range(200))
    with _serve(engine, port, token):
        cli_here(*sync)
    backup = copy_index(engine)  # pg_dump, as docs/team.md says
    _write(runs, "first", range(200, 400), resume=True)
    second = _write(runs, "second", range(300))
    with _serve(engine, port, token):
        cli_here(*sync)
        assert _held(engine, first) == _folder(first)
        assert _held(engine, second) == _folder(second)

    # the backup restored, at the same URL: sent.json says everything was sent there
    with _serve(backup, port, token):
        assert _held(backup, second) is None
        restored = cli_here(*sync).stdout
        # only what the backup lacks of the first run: its resumed half
        assert (f"first: sent 2 events, 200 metrics, 1 checkpoints, 4 logs, 4 whole files "
                f"to {url}") in restored, restored
        assert (f"second: sent 2 events, 300 metrics, 1 checkpoints, 6 logs, 7 whole files "
                f"to {url}") in restored, restored
        assert _held(backup, first) == _folder(first)
        assert _held(backup, second) == _folder(second)  # SUCCEEDED, not QUEUED for ever

        again = cli_here(*sync).stdout
        assert f"first: sent nothing new to {url}" in again, again
        assert f"second: sent nothing new to {url}" in again, again
        # a run with nothing new costs one small request
        client = Client(url, token)
        try:
            assert sync_run(first, client).requests == 1
        finally:
            client.close()


def test_a_server_made_anew_at_the_same_url_gets_every_run_again(
        tmp_path: Path, engine: Engine) -> None:
    runs, port, token = tmp_path / "runs", free_port(), new_token()
    sync = ("sync", str(runs), "--server", f"http://127.0.0.1:{port}", "--token", token)
    done = _write(runs, "done", range(120))
    with _serve(engine, port, token):
        cli_here(*sync)
    fresh = open_engine(tmp_path / "fresh.db")
    try:
        with _serve(fresh, port, token):
            assert "done: sent 2 events, 120 metrics" in cli_here(*sync).stdout
            assert _held(fresh, done) == _folder(done)
    finally:
        fresh.dispose()


def test_a_resumed_runs_sender_sends_what_a_restored_server_lacks(
        tmp_path: Path, engine: Engine, copy_index: CopyIndex) -> None:
    runs, port, token = tmp_path / "runs", free_port(), new_token()
    url = f"http://127.0.0.1:{port}"
    with _serve(engine, port, token):
        streamed = _write(runs, "streamed", range(100), server=url, token=token)
    backup = copy_index(engine)
    with _serve(engine, port, token):
        _write(runs, "streamed", range(100, 200), resume=True, server=url, token=token)
        assert _held(engine, streamed) == _folder(streamed)
    with _serve(backup, port, token):
        # its sender asks the server what it holds when it starts, and sends the rest
        _write(runs, "streamed", range(200, 210), resume=True, server=url, token=token)
        assert _held(backup, streamed) == _folder(streamed)
