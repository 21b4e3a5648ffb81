"""A run's whole file (config.yaml, engine_config.json, a samples file) that changed after it
was sent is sent again by `runwatch sync` and by an SDK's live sender, though its size and
mtime are those it was sent with (restored from a backup with `cp -p` or `rsync -a`, renamed
over the old one, rewritten within a coarse clock's tick); an unchanged folder sends nothing;
a server whose database was restored from a backup older than the file's last send gets it
again. The real server over HTTP; the backup is a real copy of its SQLite file."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

import runwatch
from runwatch.rundir import format as fmt
from runwatch.server.runner import Runner, free_port
from runwatch.server.settings import new_token
from runwatch.store.db import open_engine
from tests.support import cli_here, http, wait_for

SAMPLES = [{"prompt": "2+2", "completion": "4", "reward": 1.0}]


def serve(engine: Engine, port: int, token: str) -> Runner:
    """A team server on `port` with `token`, as these tests run it (no prewarming)."""
    return Runner(engine, port=port, token=token, prewarm=False, save_series=False,
                  warm=False)


def _get(url: str, token: str, path: str) -> Any:
    resp = http.get(url + path, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return resp.json() if resp.status_code == 200 else None


def _shown(url: str, token: str, run_id: str) -> dict[str, Any] | None:
    """What the server shows of the run's whole files; None until it holds them all."""
    detail = _get(url, token, f"/api/runs/{run_id}")
    samples = _get(url, token, f"/api/runs/{run_id}/samples?step=3")
    if not (detail and detail["settings"]["engine_config"] and samples):
        return None
    return {"config": detail["settings"]["config"],
            "engine": detail["settings"]["engine_config"]["resolved"],
            "completions": [s["completion"] for s in samples["samples"]]}


def _config(url: str, token: str, run_id: str) -> Any:
    return (_shown(url, token, run_id) or {}).get("config")


def _replace_keeping_stat(path: Path, old: str, new: str, rename: bool = False) -> None:
    """Rewrite `path` with `old` replaced by `new` (as long), its mtime kept: in place, or
    written beside it and renamed over it (a restore from a backup that keeps mtimes)."""
    assert len(old) == len(new)
    before = path.stat()
    text = path.read_text()
    assert old in text
    target = path.with_name(path.name + ".restore") if rename else path
    target.write_text(text.replace(old, new))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    if rename:
        os.replace(target, path)
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def _offline_run(runs: Path, name: str) -> runwatch.Run:
    run = runwatch.init("team", name=name, dir=runs, config={"lr": 0.1})
    assert isinstance(run, runwatch.Run)
    run.log_engine_config({"tp": 1}, {"tp": 1})
    run.log({"loss": 1.0}, step=0)
    run.log_samples(3, SAMPLES)
    return run


def test_sync_sends_again_a_file_changed_with_its_size_and_mtime_kept(
        tmp_path: Path, engine: Engine) -> None:
    runs, port, token = tmp_path / "runs", free_port(), new_token()
    url = f"http://127.0.0.1:{port}"
    sync = ("sync", str(runs), "--server", url, "--token", token)
    run = _offline_run(runs, "edited")
    run.finish()
    with serve(engine, port, token):
        assert "3 whole files" in cli_here(*sync).stdout
        assert _shown(url, token, run.id) == {"config": {"lr": 0.1}, "engine": {"tp": 1},
                                              "completions": ["4"]}
        _replace_keeping_stat(run.dir / fmt.CONFIG, "0.1", "0.2", rename=True)
        _replace_keeping_stat(run.dir / fmt.ENGINE_CONFIG, '"tp":1}}', '"tp":2}}')
        _replace_keeping_stat(run.dir / fmt.sample_file_name(3, "train", "completions"),
                              '"4"', '"5"')
        said = cli_here(*sync).stdout
        assert f"edited: sent 3 whole files to {url}" in said, said
        assert _shown(url, token, run.id) == {"config": {"lr": 0.2}, "engine": {"tp": 2},
                                              "completions": ["5"]}
        # a file touched (its stat changed, its bytes not) is read, and not sent again
        os.utime(run.dir / fmt.CONFIG)
        said = cli_here(*sync).stdout
        assert f"edited: sent nothing new to {url}" in said, said


def test_a_live_senders_samples_file_rewritten_with_its_stat_kept_is_sent_again(
        tmp_path: Path, engine: Engine) -> None:
    port, token = free_port(), new_token()
    url = f"http://127.0.0.1:{port}"
    with serve(engine, port, token):
        run = runwatch.init("team", name="live", dir=tmp_path / "runs", config={"lr": 0.1},
                            server=url, token=token, flush_interval=0.05)
        assert isinstance(run, runwatch.Run)
        run.log_engine_config({"tp": 1}, {"tp": 1})
        run.log_samples(3, SAMPLES)
        run.log({"loss": 1.0}, step=0)
        wait_for(lambda: (_shown(url, token, run.id) or {}).get("completions") == ["4"],
                 what="the streamed samples")
        _replace_keeping_stat(run.dir / fmt.sample_file_name(3, "train", "completions"),
                              '"4"', '"5"', rename=True)
        run.log({"loss": 0.5}, step=1)
        run.finish()
        assert (_shown(url, token, run.id) or {}).get("completions") == ["5"]


def backup_sqlite(db: Path, to: Path) -> None:
    """A copy of the SQLite index `db` at `to`, by SQLite's own online backup."""
    source, dest = sqlite3.connect(db), sqlite3.connect(to)
    try:
        source.backup(dest)
    finally:
        source.close()
        dest.close()


def test_a_server_restored_from_a_backup_gets_again_a_file_changed_since(
        tmp_path: Path) -> None:
    runs, port, token = tmp_path / "runs", free_port(), new_token()
    url = f"http://127.0.0.1:{port}"
    sync = ("sync", str(runs), "--server", url, "--token", token)
    run = _offline_run(runs, "restored")
    run.finish()
    live = open_engine(tmp_path / "live.db")
    try:
        with serve(live, port, token):
            cli_here(*sync)
        live.dispose()
        backup_sqlite(tmp_path / "live.db", tmp_path / "backup.db")  # holds lr 0.1
        resumed = runwatch.init("team", name="restored", dir=runs, resume=True,
                                config={"lr": 0.3})
        resumed.log({"loss": 0.5}, step=1)
        resumed.finish()
        with serve(live, port, token):
            cli_here(*sync)
            assert _config(url, token, run.id) == {"lr": 0.3}
    finally:
        live.dispose()
    backup = open_engine(tmp_path / "backup.db")
    try:
        with serve(backup, port, token):
            assert _config(url, token, run.id) == {"lr": 0.1}
            said = cli_here(*sync).stdout
            assert "1 metrics" in said and "1 whole file " in said, said
            assert _config(url, token, run.id) == {"lr": 0.3}
            # what the backup holds as it was sent (the samples) is not sent again
            assert "restored: sent nothing new" in cli_here(*sync).stdout
    finally:
        backup.dispose()
