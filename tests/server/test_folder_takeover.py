"""A run sent over HTTP and later found in a runs folder under its run id is the folder's
from then on, records and all: nothing that was sent stands in for what the folder holds,
even when the folder is another project's (trial 35, D4).

The real app in-process over HTTP with a bootstrap token and project tokens, a real runs
folder read by the real indexer, on the suite's `engine` (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select

from runwatch.rundir import format as fmt
from runwatch.server.app import create_app
from runwatch.store import schema as s
from runwatch.store import tokens

from .apiclient import Api, assert_error, manifest

BOOT = "bootstrap-token-4-folder-takeover"
A, B = "proj-alpha", "proj-bravo"
RUN_ID = "f" * 32


def _apis(engine: Engine, runs_dir: Path) -> dict[str, Api]:
    secrets = {"boot": BOOT}
    with engine.begin() as conn:
        for project, key in ((A, "A-write"), (B, "B-read")):
            tokens.create_project(conn, project, "test")
            _, secrets[key] = tokens.create(conn, project, key[2:].lower(), key, "test")
    app = create_app(engine, runs_dir=runs_dir, token=BOOT)
    return {who: Api(app, {"Authorization": f"Bearer {secret}"})
            for who, secret in secrets.items()}


def _send_run(api: Api, project: str) -> None:
    """Everything a sender can send of a run: records of each file, whole files, a job."""
    man = manifest(RUN_ID, "planted", project=project)
    batches: list[dict[str, Any]] = [
        {"run_id": RUN_ID, "file": fmt.METRICS, "manifest": man,
         "records": [{"seq": i, "step": i, "ts": 1.0 + i, "loss": 666.0} for i in range(5)]},
        {"run_id": RUN_ID, "file": fmt.LOGS,
         "records": [{"seq": 0, "ts": 1.0, "level": "error", "message": "PLANTED"}]},
        {"run_id": RUN_ID, "file": fmt.CHECKPOINTS,
         "records": [{"seq": 0, "ts": 2.0, "step": 4, "kind": "training", "id": "planted"}]},
        {"run_id": RUN_ID, "file": fmt.EVENTS,
         "records": [{"seq": 0, "ts": 1.0, "phase": "RUNNING"},
                     {"seq": 1, "ts": 9.0, "phase": "FAILED", "reason": "PLANTED"}]},
        {"run_id": RUN_ID, "file": fmt.CONFIG, "content": "planted: true\n"},
        {"run_id": RUN_ID, "file": "step_0004_completions.json",
         "content": {"step": 4, "split": "train", "samples": [{"prompt": "PLANTED"}]}},
        {"run_id": RUN_ID, "file": fmt.JOB,
         "content": {"kind": "recipe", "recipe": "sft", "argv": ["true"], "cwd": "/"}},
    ]
    resp = api.post("/api/ingest", json={"batches": batches})
    assert resp.status_code == 200, resp.text


def _write_folder(runs_dir: Path, project: str) -> None:
    """The same run id in a folder of the runs folder, with records of its own."""
    run = runs_dir / "b-victim"
    run.mkdir()
    (run / fmt.MANIFEST).write_text(json.dumps(manifest(RUN_ID, "b-victim", project=project)))
    (run / fmt.METRICS).write_text("".join(
        json.dumps({"seq": i, "step": i, "ts": 1.0 + i, "loss": 1.0}) + "\n" for i in range(5)))
    (run / fmt.LOGS).write_text(json.dumps(
        {"seq": 0, "ts": 1.0, "level": "info", "message": "the folder's own log"}) + "\n")
    (run / fmt.EVENTS).write_text(json.dumps({"seq": 0, "ts": 1.0, "phase": "RUNNING"}) + "\n")


def _rows(engine: Engine, table: Any) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def test_a_folder_that_takes_over_a_sent_run_is_its_only_record(
        engine: Engine, runs_dir: Path, index: Callable[[], None]) -> None:
    apis = _apis(engine, runs_dir)
    _send_run(apis["A-write"], A)
    _write_folder(runs_dir, B)
    index()
    reader = apis["B-read"]
    detail = reader.ok(f"/api/runs/{RUN_ID}")
    run = detail["run"]
    assert (run["name"], run["project"], run["status"], run["reason"]) == \
        ("b-victim", B, "RUNNING", None)
    series = reader.ok("/api/series", params={"run": RUN_ID, "key": "loss"})["series"][0]
    assert series["value"] == [1.0] * 5
    logs = reader.ok(f"/api/runs/{RUN_ID}/logs")["logs"]
    assert [entry["message"] for entry in logs] == ["the folder's own log"]
    assert reader.ok(f"/api/runs/{RUN_ID}/checkpoints")["checkpoints"] == []
    assert reader.ok(f"/api/runs/{RUN_ID}/samples")["available"] == []
    assert detail["job"] is None and detail["settings"]["config_text"] is None
    assert "PLANTED" not in json.dumps(detail)
    assert _rows(engine, s.jobs) == 0
    # the sender's project reaches it no more
    assert_error(apis["A-write"].get(f"/api/runs/{RUN_ID}"), 404)
    # and a second pass, or the same records sent again, change nothing
    index()
    assert_error(apis["A-write"].post("/api/ingest", json={
        "run_id": RUN_ID, "file": fmt.METRICS,
        "records": [{"seq": 9, "step": 9, "ts": 9.0, "loss": 666.0}]}), 403)
    assert reader.ok("/api/series", params={"run": RUN_ID, "key": "loss"}
                     )["series"][0]["value"] == [1.0] * 5


def test_a_run_streamed_then_copied_in_is_read_from_the_folder(
        engine: Engine, runs_dir: Path, index: Callable[[], None]) -> None:
    """Without another project: a run sent, then resumed into a folder with other values
    at the same seqs (a resume), shows the folder's values and only the folder's."""
    apis = _apis(engine, runs_dir)
    _send_run(apis["boot"], B)
    _write_folder(runs_dir, B)
    index()
    boot = apis["boot"]
    assert boot.ok("/api/series", params={"run": RUN_ID, "key": "loss"}
                   )["series"][0]["value"] == [1.0] * 5
    assert boot.ok(f"/api/runs/{RUN_ID}")["run"]["status"] == "RUNNING"
