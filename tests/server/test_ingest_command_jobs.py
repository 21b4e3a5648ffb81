"""Ingest makes no queued command job for a token that may not submit one: a run sent with
events that say QUEUED (or none) and a job.json of kind command is refused to a project
token, as POST /api/jobs refuses it the command job (trial 35, D7). A started run's job.json,
which an SDK streams, is stored as before.

The real app in-process over HTTP with a bootstrap token and a project write token, on the
suite's `engine` (SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from runwatch.rundir import format as fmt
from runwatch.server.app import create_app
from runwatch.store import tokens

from .apiclient import Api, assert_error, manifest

BOOT = "bootstrap-token-4-command-jobs"
A = "proj-alpha"
COMMAND = {"kind": "command", "argv": ["/bin/sh", "-c", "id > /tmp/pwned"], "cwd": "/tmp"}


@pytest.fixture
def apis(engine: Engine, runs_dir: Path) -> dict[str, Api]:
    with engine.begin() as conn:
        tokens.create_project(conn, A, "test")
        _, secret = tokens.create(conn, A, "write", "writer", "test")
    app = create_app(engine, runs_dir=runs_dir, token=BOOT)
    return {who: Api(app, {"Authorization": f"Bearer {key}"})
            for who, key in (("boot", BOOT), ("A-write", secret))}


def _events(run_id: str, *phases: str, first: int = 0, **extra: Any) -> dict[str, Any]:
    return {"run_id": run_id, "file": fmt.EVENTS, "manifest": manifest(run_id, run_id, project=A),
            "records": [{"seq": first + i, "ts": 1.0 + i, "phase": p, **extra}
                        for i, p in enumerate(phases)]}


def _job(run_id: str, job: dict[str, Any] = COMMAND) -> dict[str, Any]:
    return {"run_id": run_id, "file": fmt.JOB, "manifest": manifest(run_id, run_id, project=A),
            "content": job}


def _queue_depth(apis: dict[str, Api]) -> int:
    depth: int = apis["boot"].ok("/api/workers")["queue_depth"]
    return depth


def test_a_project_token_cannot_queue_a_command_job(apis: dict[str, Api]) -> None:
    writer = apis["A-write"]
    # the trial's request: events that say QUEUED, and a command job
    err = assert_error(writer.post("/api/ingest", json={"batches": [
        _events("q-1", "QUEUED"), _job("q-1")]}), 403)
    assert [r["ok"] for r in err["results"]] == [True, False]
    said = err["results"][1]["error"]
    assert "command job" in said and "server's token" in said and "writer" in said
    # a run with no events is QUEUED too
    assert_error(writer.post("/api/ingest", json=_job("q-2")), 403)
    detail = writer.ok("/api/runs/q-1")
    assert detail["run"]["status"] == "QUEUED" and detail["job"] is None
    assert _queue_depth(apis) == 0


def test_a_started_runs_command_job_is_stored_and_cannot_be_queued_again(
        apis: dict[str, Api]) -> None:
    writer = apis["A-write"]
    # what an SDK in a job streams: its events (the worker's PREPARING, its RUNNING), then
    # the folder's job.json
    assert writer.post("/api/ingest", json=_events("s-1", "QUEUED", "PREPARING", "RUNNING")
                       ).status_code == 200
    resp = writer.post("/api/ingest", json=_job("s-1"))
    assert resp.status_code == 200, resp.text
    assert writer.ok("/api/runs/s-1")["job"]["kind"] == "command"
    # a next attempt that waits in the queue would be the command job queued again
    err = assert_error(writer.post("/api/ingest", json=_events(
        "s-1", "QUEUED", first=3, attempt=2)), 403)
    assert "command job" in err["error"]
    assert writer.ok("/api/runs/s-1")["run"]["status"] == "RUNNING"
    assert _queue_depth(apis) == 0


def test_the_servers_token_and_recipe_jobs_are_as_before(apis: dict[str, Api]) -> None:
    resp = apis["boot"].post("/api/ingest", json={"batches": [
        _events("b-1", "QUEUED"), _job("b-1")]})
    assert resp.status_code == 200, resp.text
    recipe = {"kind": "recipe", "recipe": "sft", "argv": ["python", "-m", "runwatch"],
              "cwd": "/tmp"}
    resp = apis["A-write"].post("/api/ingest", json={"batches": [
        _events("r-1", "QUEUED"), _job("r-1", recipe)]})
    assert resp.status_code == 200, resp.text
    assert _queue_depth(apis) == 2
