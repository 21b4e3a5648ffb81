"""A server whose database was restored from a backup taken between two sends of a run's
whole file (config.yaml, a samples file), which holds every record the sender sent but the
older file, gets the newer file again from `runwatch sync`: GET /api/ingest answers the
sha256 each whole file was stored with, and the sender compares it with the one it sent. A
file stored before the server kept hashes (an index at 0019) is sent again once. The real
server over HTTP; the backup is a real copy of its SQLite file; the migration runs on SQLite
and on PostgreSQL."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, inspect, select

import runwatch
from runwatch.rundir import format as fmt
from runwatch.server.runner import free_port
from runwatch.server.settings import new_token
from runwatch.store import schema as s
from runwatch.store.db import open_engine
from tests.support import cli_here, http
from tests.support.migrations import downgrade
from tests.team.test_sync_whole_file_changed import SAMPLES, backup_sqlite, serve


def _get(url: str, token: str, path: str) -> Any:
    resp = http.get(url + path, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert resp.status_code == 200, resp.text
    return resp.json()


def _shown(url: str, token: str, run_id: str) -> tuple[Any, list[str]]:
    """The run's config and step 3's completions as the server shows them."""
    detail = _get(url, token, f"/api/runs/{run_id}")
    samples = _get(url, token, f"/api/runs/{run_id}/samples?step=3")
    return detail["settings"]["config"], [x["completion"] for x in samples["samples"]]


def _offline_run(runs: Path, name: str) -> runwatch.Run:
    run = runwatch.init("team", name=name, dir=runs, config={"lr": 0.1})
    assert isinstance(run, runwatch.Run)
    run.log({"loss": 1.0}, step=0)
    run.log_samples(3, SAMPLES)
    run.finish()
    return run


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_a_server_restored_from_a_backup_between_two_sends_gets_the_newer_file(
        tmp_path: Path) -> None:
    runs, port, token = tmp_path / "runs", free_port(), new_token()
    url = f"http://127.0.0.1:{port}"
    sync = ("sync", str(runs), "--server", url, "--token", token)
    run = _offline_run(runs, "between")
    samples = run.dir / fmt.sample_file_name(3, "train", "completions")
    live = open_engine(tmp_path / "live.db")
    try:
        with serve(live, port, token):
            cli_here(*sync)
        live.dispose()
        backup_sqlite(tmp_path / "live.db", tmp_path / "backup.db")  # every record, the old files
        _edit(run.dir / fmt.CONFIG, "0.1", "0.2")
        _edit(samples, '"4"', '"5"')
        with serve(live, port, token):
            said = cli_here(*sync).stdout
            assert "between: sent 2 whole files" in said, said
            assert _shown(url, token, run.id) == ({"lr": 0.2}, ["5"])
    finally:
        live.dispose()
    backup = open_engine(tmp_path / "backup.db")
    try:
        with serve(backup, port, token):
            assert _shown(url, token, run.id) == ({"lr": 0.1}, ["4"])
            said = cli_here(*sync).stdout
            assert f"between: sent 2 whole files to {url}" in said, said
            assert _shown(url, token, run.id) == ({"lr": 0.2}, ["5"])
            # the backup now holds them as sent: nothing is sent again
            assert "between: sent nothing new" in cli_here(*sync).stdout
    finally:
        backup.dispose()


def test_an_index_at_0019_answers_the_hashes_of_whole_files_sent_again_once(
        engine: Engine, db_url: str, tmp_path: Path) -> None:
    runs, port, token = tmp_path / "runs", free_port(), new_token()
    url = f"http://127.0.0.1:{port}"
    sync = ("sync", str(runs), "--server", url, "--token", token)
    run = _offline_run(runs, "old")
    with serve(engine, port, token):
        cli_here(*sync)
    with engine.connect() as conn:
        held_runs = conn.execute(select(s.runs)).all()
        held_samples = conn.execute(select(s.samples)).all()
    downgrade(engine, "0019")
    with engine.connect() as conn:
        assert "whole_file_hashes" not in inspect(conn).get_table_names()
    engine.dispose()

    upgraded = open_engine(db_url)
    try:
        with upgraded.connect() as conn:
            assert conn.execute(select(s.runs)).all() == held_runs
            assert conn.execute(select(s.samples)).all() == held_samples
            assert conn.execute(select(s.whole_file_hashes)).all() == []
        with serve(upgraded, port, token):
            answer = _get(url, token, f"/api/ingest?run={run.id}")
            assert answer["whole_file_hashes"] == {}
            assert fmt.CONFIG in answer["whole_files"]
            # stored before the server kept hashes: sent again, once
            said = cli_here(*sync).stdout
            assert "old: sent 2 whole files" in said, said
            assert "old: sent nothing new" in cli_here(*sync).stdout
            hashes = _get(url, token, f"/api/ingest?run={run.id}")["whole_file_hashes"]
            for name in (fmt.CONFIG, fmt.sample_file_name(3, "train", "completions")):
                raw = (run.dir / name).read_bytes()
                assert hashes[name] == {"size": len(raw),
                                        "sha256": hashlib.sha256(raw).hexdigest()}
    finally:
        upgraded.dispose()


def test_a_config_not_utf8_is_not_sent_again_for_its_replaced_bytes(tmp_path: Path) -> None:
    """The server stores a file that is not UTF-8 with its bad bytes replaced: the sender
    compares the sha256 of what it sent, not of the file, and sends it once."""
    runs, port, token = tmp_path / "runs", free_port(), new_token()
    url = f"http://127.0.0.1:{port}"
    sync = ("sync", str(runs), "--server", url, "--token", token)
    run = _offline_run(runs, "latin")
    (run.dir / fmt.CONFIG).write_bytes(b"name: caf\xe9\n")
    engine = open_engine(tmp_path / "index.db")
    try:
        with serve(engine, port, token):
            assert "latin: sent" in cli_here(*sync).stdout
            held = _get(url, token, f"/api/ingest?run={run.id}")["whole_file_hashes"]
            assert held[fmt.CONFIG]["sha256"] == hashlib.sha256(
                "name: caf\ufffd\n".encode()).hexdigest()
            assert "latin: sent nothing new" in cli_here(*sync).stdout
    finally:
        engine.dispose()
