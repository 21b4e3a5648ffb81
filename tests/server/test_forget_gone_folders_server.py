"""A server that indexes a runs folder forgets a run whose folder was deleted, says so in
its log, and never forgets a run sent to it over HTTP (it has no folder) (trial 37).

The real server on a free loopback port, indexing the test's runs folder every 50 ms, and
the real app in-process over HTTP, on the suite's `engine` (SQLite and PostgreSQL)."""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from runwatch.ingest import Indexer
from runwatch.server.runner import Runner
from tests.support import http, sdk_run, wait_for

from .apiclient import Api, manifest


def _names(runs: list[dict[str, Any]]) -> list[str]:
    return sorted(r["name"] for r in runs)


def test_the_server_forgets_a_deleted_run_folder_and_logs_it(
        server: Runner, runs_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    gone_id = sdk_run(runs_dir, "gone", steps=5)
    sdk_run(runs_dir, "kept", steps=5)
    with http.client(base_url=server.url) as client:
        def listed() -> list[str]:
            return _names(client.get("/api/runs").json()["runs"])

        wait_for(lambda: listed() == ["gone", "kept"], what="both runs listed")
        with caplog.at_level(logging.WARNING, logger="runwatch.ingest.indexer"):
            shutil.rmtree(runs_dir / "gone")
            wait_for(lambda: listed() == ["kept"], what="the deleted run to leave the list")
        assert client.get("/api/runs/gone").status_code == 404
    folder = (runs_dir / "gone").resolve()
    said = [r.getMessage() for r in caplog.records if r.name == "runwatch.ingest.indexer"]
    assert said == [f"run gone ({gone_id[:8]}) is no longer indexed: its folder {folder} "
                    "is gone"]


def test_a_run_sent_over_http_is_never_forgotten(engine: Engine, runs_dir: Path,
                                                 api: Api) -> None:
    sdk_run(runs_dir, "folder-run", steps=3)
    sdk_run(runs_dir, "other", steps=3)
    indexer = Indexer(engine, runs_dir)
    indexer.index_once()
    batch = {"run_id": "s" * 32, "file": "metrics.jsonl", "manifest": manifest("s" * 32, "sent"),
             "records": [{"seq": i, "step": i, "ts": time.time(), "loss": 1.0} for i in range(4)]}
    assert api.post("/api/ingest", json=batch).status_code == 200

    shutil.rmtree(runs_dir / "folder-run")
    indexer.index_once()

    assert _names(api.ok("/api/runs")["runs"]) == ["other", "sent"]
    series = api.ok("/api/series", params={"run": "sent", "key": "loss"})["series"][0]
    assert series["count"] == 4
