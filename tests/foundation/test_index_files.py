"""The indexer reads only regular files inside the runs folder, and only so much of each.

A symbolic link (to a file, or a whole run folder), a FIFO or a device is refused and
reported as a problem of its run; a whole-file read over its cap is refused the same
way; engine_config.json is stored only as JSON every reader can parse.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy import Engine, select

from runwatch.ingest import Indexer
from runwatch.rundir import format as fmt
from runwatch.rundir import safeio
from runwatch.server.app import create_app
from runwatch.server.runner import free_port
from runwatch.store import open_engine
from runwatch.store import queries as q
from runwatch.store import schema as s
from tests.support import wait_for, write_manifest, write_run

SECRET = "h3-secret-value-that-must-not-be-indexed"


def run_row(engine: Engine, name: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(select(s.runs).where(s.runs.c.name == name)).first()


def problems_of(engine: Engine, name: str) -> list[str]:
    with engine.connect() as conn:
        return q.problems(conn, q.resolve_run(conn, name).pk)


def all_problems(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(select(s.ingest_problems.c.message)).scalars())


def outside_file(tmp_path: Path, name: str, text: str) -> Path:
    """A file outside the runs folder, readable by the indexer."""
    path = tmp_path / "outside" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_symlinked_config_is_refused_and_reported(runs_dir: Path, tmp_path: Path,
                                                    engine: Engine) -> None:
    """config.yaml linked to a file outside the folder (as to /proc/self/environ) is not
    read: the run is indexed without its config, and the refusal is a problem of the run."""
    run = write_manifest(runs_dir / "linked")
    (run / fmt.CONFIG).symlink_to(outside_file(tmp_path, "secret.yaml", f"token: {SECRET}\n"))
    report = Indexer(engine, runs_dir).index_once()
    row = run_row(engine, "linked")
    assert row is not None and row.config is None
    assert SECRET not in json.dumps(list(row), default=str)
    found = problems_of(engine, "linked")
    assert any("config.yaml" in p and "symbolic link" in p for p in found), found
    assert any("config.yaml" in p for p in report.problems)
    assert Indexer(engine, runs_dir).index_once().problems == [], "told once"


def test_a_config_linked_to_proc_environ_does_not_reach_the_index(
        runs_dir: Path, tmp_path: Path) -> None:
    """The probe's case: `ln -sf /proc/self/environ config.yaml`, indexed by a process
    whose environment holds a secret, stores none of it."""
    run = write_manifest(runs_dir / "environ")
    (run / fmt.CONFIG).symlink_to("/proc/self/environ")
    db = tmp_path / "cli.db"
    cmd = [sys.executable, "-m", "runwatch", "index", str(runs_dir), "--db", str(db)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "RUNWATCH_H3_PROBE": SECRET})
    assert done.returncode == 0, done.stderr
    engine = open_engine(db)
    try:
        row = run_row(engine, "environ")
        assert row is not None and row.config is None
    finally:
        engine.dispose()


def test_symlinked_metrics_and_samples_files_are_refused(runs_dir: Path, tmp_path: Path,
                                                         engine: Engine) -> None:
    """A metrics file or a samples file linked from outside the folder is not indexed."""
    run = write_manifest(runs_dir / "files")
    metrics = outside_file(tmp_path, "metrics.jsonl",
                           json.dumps({"seq": 0, "step": 0, "ts": 1e9, "stolen": 1.0}) + "\n")
    (run / fmt.METRICS).symlink_to(metrics)
    sample_name = fmt.sample_file_name(1, "train")
    samples = outside_file(tmp_path, "samples.json",
                           json.dumps({"samples": [{"prompt": SECRET, "reward": 1.0}]}))
    (run / sample_name).symlink_to(samples)
    Indexer(engine, runs_dir).index_once()
    with engine.connect() as conn:
        pk = q.resolve_run(conn, "files").pk
        assert q.last_values(conn, pk) == {}
        assert conn.execute(select(s.samples).where(s.samples.c.run_pk == pk)).first() is None
    found = problems_of(engine, "files")
    assert any(fmt.METRICS in p and "symbolic link" in p for p in found), found
    assert any(sample_name in p and "symbolic link" in p for p in found), found


def test_a_symlinked_run_folder_is_not_indexed(runs_dir: Path, tmp_path: Path,
                                               engine: Engine) -> None:
    """A run folder that is a link to a folder elsewhere is refused with a problem."""
    elsewhere = write_run(tmp_path / "elsewhere", "far",
                          [{"seq": 0, "step": 0, "ts": 1e9, "loss": 1.0}])
    runs_dir.mkdir(exist_ok=True)
    (runs_dir / "far").symlink_to(elsewhere, target_is_directory=True)
    report = Indexer(engine, runs_dir).index_once()
    assert run_row(engine, "far") is None
    assert any("far" in p and "symbolic link" in p for p in report.problems), report.problems


def test_a_fifo_as_config_does_not_block_indexing(runs_dir: Path, tmp_path: Path) -> None:
    """A FIFO named config.yaml: `runwatch index` (the same pass `runwatch ui` makes before
    it listens) finishes and reports the file, instead of waiting for a writer forever."""
    run = write_run(runs_dir, "fifo", [{"seq": 0, "step": 0, "ts": 1e9, "loss": 1.0}])
    os.mkfifo(run / fmt.CONFIG)
    cmd = [sys.executable, "-m", "runwatch", "index", str(runs_dir), "--db",
           str(tmp_path / "cli.db")]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                              env={**os.environ, "COLUMNS": "500"})
    except subprocess.TimeoutExpired:
        pytest.fail("runwatch index did not finish within 60 s: it waits on the FIFO")
    assert done.returncode == 0, done.stderr
    assert "config.yaml" in done.stdout and "not a regular file" in done.stdout, done.stdout


def test_a_fifo_as_config_does_not_keep_runwatch_ui_from_listening(runs_dir: Path,
                                                                   tmp_path: Path) -> None:
    """`runwatch ui` indexes the folder in its indexer's thread from its start: with a
    FIFO as a run's config it still answers, and lists the run once it has read it."""
    run = write_run(runs_dir, "fifo-ui", [{"seq": 0, "step": 0, "ts": 1e9, "loss": 1.0}])
    os.mkfifo(run / fmt.CONFIG)
    port = free_port()
    ui = subprocess.Popen([sys.executable, "-m", "runwatch", "ui", str(runs_dir), "--port",
                           str(port), "--db", str(tmp_path / "ui.db")],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def runs() -> list[str] | None:
        try:
            res = httpx.get(f"http://127.0.0.1:{port}/api/runs", timeout=2)
        except httpx.TransportError:
            return None
        return [r["name"] for r in res.json()["runs"]] if res.status_code == 200 else None

    try:
        assert wait_for(runs, what="runwatch ui to answer /api/runs") == ["fifo-ui"]
    finally:
        ui.terminate()
        ui.wait(timeout=30)


def test_whole_file_reads_are_capped(runs_dir: Path, engine: Engine) -> None:
    """A config over the cap (a link to /dev/zero, or just a huge file) is refused
    without being read; the run is indexed and the problem names the cap."""
    run = write_manifest(runs_dir / "huge")
    with open(run / fmt.CONFIG, "wb") as f:
        f.truncate(safeio.CAPS[fmt.CONFIG] + 1)  # sparse: no disk, no time
    (run / fmt.ENGINE_CONFIG).symlink_to("/dev/zero")
    Indexer(engine, runs_dir).index_once()
    row = run_row(engine, "huge")
    assert row.config is None and row.engine_config is None
    found = problems_of(engine, "huge")
    assert any("config.yaml" in p and "bytes" in p for p in found), found
    assert any("engine_config.json" in p for p in found), found


def _get(engine: Engine, path: str) -> httpx.Response:
    async def go() -> httpx.Response:
        app = create_app(engine)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://127.0.0.1") as client:
            return await client.get(path)

    return asyncio.run(go())


def test_engine_config_is_stored_only_as_json_every_reader_parses(runs_dir: Path,
                                                                  engine: Engine) -> None:
    """engine_config.json that is not JSON is not stored (a problem says so), and the
    run's detail answers; NaN and Infinity (which the SDK writes) are stored as null."""
    bad = write_manifest(runs_dir / "notjson")
    (bad / fmt.ENGINE_CONFIG).write_text("{not json", encoding="utf-8")
    nan = write_manifest(runs_dir / "nanjson")
    (nan / fmt.ENGINE_CONFIG).write_text('{"gpu_memory_utilization": NaN, "max": Infinity, '
                                         '"n": 4}', encoding="utf-8")
    Indexer(engine, runs_dir).index_once()
    assert run_row(engine, "notjson").engine_config is None
    assert any(fmt.ENGINE_CONFIG in p and "JSON" in p for p in problems_of(engine, "notjson"))
    stored = run_row(engine, "nanjson").engine_config
    assert orjson.loads(stored) == {"gpu_memory_utilization": None, "max": None, "n": 4}
    for name in ("notjson", "nanjson"):
        assert _get(engine, f"/api/runs/{name}").status_code == 200
