"""A run's whole files (config.yaml, engine_config.json, the samples files) streamed to a real
`runwatch server` subprocess over HTTP: shown by the API exactly as when the folder is
indexed, a bad file name refused with a clear 400, a changed file sent again (and an
unchanged one not)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

import runwatch
from runwatch.ingest.parts import MISSING, Parts
from runwatch.jobs.spec import command_spec, write_spec
from runwatch.rundir import format as fmt
from runwatch.sdk.sendhttp import Client
from runwatch.sdk.upload import sync_run
from runwatch.server.runner import Runner, free_port
from runwatch.store import schema
from runwatch.store.db import open_engine
from tests.support import http, wait_for
from tests.team.serving import ServerProcess

SAMPLES = [{"prompt": "2+2?", "completion": "4", "reward": 1.0, "group": 0},
           {"prompt": "3+3?", "completion": "7", "reward": 0.0, "group": 0}]


@pytest.fixture(scope="module")
def team_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path_factory.mktemp("team") / "index.db").start()
    yield server
    server.stop()


def _get(url: str, token: str | None, path: str) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    resp = http.get(url + path, headers=headers, timeout=30)
    return resp.json() if resp.status_code == 200 else None


def _settings(server: ServerProcess, run_id: str) -> Any:
    """The run detail's settings: config, config_text, engine_config."""
    return _get(server.url, server.token, f"/api/runs/{run_id}")["settings"]


def _shown(url: str, token: str | None, run_id: str) -> dict[str, Any] | None:
    """What the API shows of a run's whole files; None until all of them are there."""
    detail = (_get(url, token, f"/api/runs/{run_id}") or {}).get("settings")
    train = _get(url, token, f"/api/runs/{run_id}/samples?step=3&split=train")
    val = _get(url, token, f"/api/runs/{run_id}/samples?step=3&split=val")
    if not (detail and detail.get("engine_config") and train and val):
        return None
    return {"config": detail["config"], "config_text": detail["config_text"],
            "engine_config": detail["engine_config"], "train": train, "val": val,
            "steps": _get(url, token, f"/api/runs/{run_id}/samples")["available"]}


def test_a_streamed_runs_config_engine_config_and_samples_show_as_an_indexed_runs_do(
        tmp_path: Path, team_server: ServerProcess) -> None:
    runs = tmp_path / "runs"
    run = runwatch.init("team", name="r", dir=runs, config={"lr": 0.1, "model": {"layers": 2}},
                        server=team_server.url, token=team_server.token, flush_interval=0.05)
    run.log_engine_config({"tp": 1}, {"tp": 1, "max_len": float("nan")})
    for step in range(4):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
    run.log_samples(3, SAMPLES)
    run.log_samples(3, SAMPLES[:1], split="val")
    run.finish()
    streamed = wait_for(lambda: _shown(team_server.url, team_server.token, run.id),
                        what="the streamed run's whole files on the server")
    assert streamed is not None
    engine = open_engine(tmp_path / "folder.db")
    try:
        with Runner(engine, runs_dir=runs, port=free_port(), interval=0.05,
                    warm=False) as folder_server:
            indexed = wait_for(lambda: _shown(folder_server.url, None, run.id),
                               what="the folder-indexed run's whole files")
    finally:
        engine.dispose()
    assert streamed["config"] == {"lr": 0.1, "model": {"layers": 2}}
    assert streamed["engine_config"]["resolved"] == {"tp": 1, "max_len": None}
    assert [s["completion"] for s in streamed["train"]["samples"]] == ["4", "7"]
    assert streamed == indexed


def _offline_run(runs: Path, name: str) -> runwatch.Run:
    # a name of its own: the module's tests send to one server, where a name is one run's
    run = runwatch.init("team", name=name, dir=runs, config={"lr": 0.1})
    assert isinstance(run, runwatch.Run)
    run.log({"loss": 1.0}, step=0)
    return run


def _post(server: ServerProcess, item: dict[str, Any]) -> httpx.Response:
    return http.post(f"{server.url}/api/ingest", json={"batches": [item]}, timeout=30,
                     headers={"Authorization": f"Bearer {server.token}"})


def test_a_whole_file_with_a_bad_name_or_content_is_refused_with_a_clear_400(
        tmp_path: Path, team_server: ServerProcess) -> None:
    run = _offline_run(tmp_path / "runs", "off-bad-file")
    run.finish()
    manifest = run.manifest
    for name in ("../config.yaml", "sub/step_0003_train.json", "notes.txt",
                 "step_0003_train.json\n", "manifest.json", "step_3_train.json", 7):
        resp = _post(team_server, {"run_id": run.id, "manifest": manifest, "file": name,
                                   "content": "{}"})
        assert resp.status_code == 400, (name, resp.text)
        assert "is not a whole file of a run directory" in resp.json()["error"] or (
            name == 7 and "must be a string" in resp.json()["error"]), resp.text
    bad_json = _post(team_server, {"run_id": run.id, "manifest": manifest,
                                   "file": fmt.ENGINE_CONFIG, "content": "{not json"})
    assert bad_json.status_code == 400 and "not JSON" in bad_json.json()["error"], bad_json.text
    good = _post(team_server, {"run_id": run.id, "manifest": manifest,
                               "file": fmt.ENGINE_CONFIG, "content": {"requested": {"tp": 2}}})
    assert good.status_code == 200, good.text
    assert _settings(team_server, run.id)["engine_config"] == {"requested": {"tp": 2}}


def test_a_changed_config_is_sent_again_and_an_unchanged_one_is_not(
        tmp_path: Path, team_server: ServerProcess) -> None:
    run = _offline_run(tmp_path / "runs", "off-config")
    run.log_samples(3, SAMPLES)
    run.finish()
    client = Client(team_server.url, team_server.token)
    try:
        first = sync_run(run.dir, client)
        assert first.files == 2 and not first.problems, first  # config and the samples
        assert _settings(team_server, run.id)["config"] == {"lr": 0.1}
        config = run.dir / fmt.CONFIG
        text = config.read_text()
        config.write_text(text)  # same bytes, new mtime: not sent again
        os.utime(config, (1, 1))
        assert sync_run(run.dir, client).files == 0
        config.write_text(text.replace("0.1", "0.2"))
        samples = run.dir / fmt.sample_file_name(3, "train", "completions")
        samples.write_text(samples.read_text().replace('"7"', '"6"'))
        again = sync_run(run.dir, client)
        assert again.files == 2 and not again.problems, again
    finally:
        client.close()
    assert _settings(team_server, run.id)["config"] == {"lr": 0.2}
    rollouts = _get(team_server.url, team_server.token, f"/api/runs/{run.id}/samples?step=3")
    assert [s["completion"] for s in rollouts["samples"]] == ["4", "6"]


def _job(server: ServerProcess | Runner, token: str | None, run_id: str) -> Any:
    return (_get(server.url, token, f"/api/runs/{run_id}") or {}).get("job")


def test_a_jobs_job_json_is_streamed_and_shown_but_never_replaces_a_folders(
        tmp_path: Path, team_server: ServerProcess) -> None:
    run = _offline_run(tmp_path / "runs", "off-job")
    spec = command_spec(["python", "train.py"], cwd=tmp_path, devices=2, priority=5)
    write_spec(run.dir, spec)
    run.finish()
    client = Client(team_server.url, team_server.token)
    try:
        report = sync_run(run.dir, client)
    finally:
        client.close()
    assert report.files == 2 and not report.problems, report  # config.yaml and job.json
    job = _job(team_server, team_server.token, run.id)
    assert job is not None and {k: job[k] for k in ("kind", "argv", "cwd", "devices",
                                                    "priority")} == \
        {"kind": "command", "argv": ["python", "train.py"], "cwd": str(tmp_path),
         "devices": 2, "priority": 5}
    bad = _post(team_server, {"run_id": run.id, "manifest": run.manifest, "file": fmt.JOB,
                              "content": {"kind": "command", "argv": []}})
    assert bad.status_code == 400 and "argv must be" in bad.json()["error"], bad.text
    # a run indexed from its folder: a worker runs its jobs row, so a sender never changes it
    engine = open_engine(tmp_path / "folder.db")
    try:
        with Runner(engine, runs_dir=run.dir.parent, port=free_port(), interval=0.05,
                    token=team_server.token, warm=False) as folder_server:
            wait_for(lambda: _job(folder_server, team_server.token, run.id),
                     what="the folder-indexed run's job")
            sent = dict(spec.as_dict(), argv=["sh", "-c", "echo changed"])
            resp = http.post(f"{folder_server.url}/api/ingest", timeout=30, json={
                "run_id": run.id, "manifest": run.manifest, "file": fmt.JOB, "content": sent},
                headers={"Authorization": f"Bearer {team_server.token}"})
            # refused whole: the folder is the run's record (a 409, nothing of it stored)
            assert resp.status_code == 409 and resp.json()["results"][0]["status"] == 409, \
                resp.text
            assert _job(folder_server, team_server.token, run.id)["argv"] == \
                ["python", "train.py"]
            # nor with a changed manifest (a manifest sent over HTTP has no folder: it
            # must not take the run's folder away and with it the job's protection)
            changed = {**run.manifest, "tags": ["sent"]}
            resp = http.post(f"{folder_server.url}/api/ingest", timeout=30, json={
                "run_id": run.id, "manifest": changed, "file": fmt.JOB, "content": sent},
                headers={"Authorization": f"Bearer {team_server.token}"})
            assert resp.status_code == 409 and resp.json()["results"][0]["status"] == 409, \
                resp.text
            assert _job(folder_server, team_server.token, run.id)["argv"] == \
                ["python", "train.py"]
            with engine.connect() as conn:
                assert conn.execute(select(schema.runs.c.dir).where(
                    schema.runs.c.run_id == run.id)).scalar() == str(run.dir.resolve())
    finally:
        engine.dispose()



def test_parts_missing_when_the_last_comes_are_asked_for_again_from_the_first() -> None:
    parts, data = Parts(), b"0123456789"
    digest = hashlib.sha256(data).hexdigest()

    def part(i: int, count: int = 3) -> dict[str, Any]:
        return {"index": i, "count": count, "sha256": digest}

    assert parts.take(1, "f", data[:4], part(0), 100) is None
    with pytest.raises(ValueError, match=f"part\\(s\\) 1 of 3 .*; {MISSING}"):  # 1 was lost
        parts.take(1, "f", data[8:], part(2), 100)
    for i, piece in enumerate((data[:4], data[4:8])):
        assert parts.take(1, "f", piece, part(i), 100) is None
    assert parts.take(1, "f", data[8:], part(2), 100) == data
    # a group stored again batch by batch takes the last piece a second time
    assert parts.take(1, "f", data[8:], part(2), 100) == data
    big = hashlib.sha256(b"y" * 30).hexdigest()
    with pytest.raises(ValueError, match=r"more than the 20 bytes .* cannot be sent"):
        parts.take(2, "g", b"y" * 30, {"index": 0, "count": 2, "sha256": big}, 20)
    with pytest.raises(ValueError, match="cannot be sent"):  # its next part hears the same
        parts.take(2, "g", b"", {"index": 1, "count": 2, "sha256": big}, 20)
    with pytest.raises(ValueError, match="do not make the file"):
        parts.take(1, "f", b"x", part(0, count=1), 100)
    with pytest.raises(ValueError, match="more than the 5 bytes"):
        parts.take(1, "f", data, part(0, count=2), 5)
    with pytest.raises(ValueError, match=r"part\.index must be"):
        parts.take(1, "f", data, part(3), 100)


def test_a_samples_file_over_the_request_limit_is_sent_in_parts_and_stored_whole(
        tmp_path: Path, team_server: ServerProcess) -> None:
    run = _offline_run(tmp_path / "runs", "off-samples")
    # ~12 MiB of JSON, with quotes and non-ASCII text, over the server's 8 MiB request limit
    big = [{"prompt": f"q{i} " + "x" * 2000, "completion": '"é" ' * 50, "reward": i / 10,
            "group": i % 4} for i in range(5000)]
    run.log_samples(3, big)
    run.finish()
    name = fmt.sample_file_name(3, "train", "completions")
    assert (run.dir / name).stat().st_size > 8 * 1024 * 1024
    client = Client(team_server.url, team_server.token)
    try:
        report = sync_run(run.dir, client)
    finally:
        client.close()
    assert report.files == 2 and not report.problems, report  # config.yaml and the samples
    assert report.requests > 6  # the samples went in parts of 2 MiB
    engine = open_engine(team_server.db)
    try:
        with engine.connect() as conn:
            samples, runs = schema.samples.c, schema.runs.c
            rows = conn.execute(select(samples.idx, samples.completion).join(
                schema.runs, runs.pk == samples.run_pk).where(
                runs.run_id == run.id, samples.file == name).order_by(samples.idx)).all()
    finally:
        engine.dispose()
    assert [r.idx for r in rows] == list(range(5000))
    assert {r.completion for r in rows} == {'"é" ' * 50}
