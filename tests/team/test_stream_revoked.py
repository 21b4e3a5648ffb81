"""A live stream opened with an API token ends once that token is revoked (it said nothing of
it before: a token was checked only when a request started), on the real server over HTTP;
a stream of another token runs on, and reconnecting with the revoked one is refused."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from runwatch.server import sse
from runwatch.server.runner import Runner, free_port
from runwatch.server.settings import new_token
from runwatch.store import tokens
from tests.server.apiclient import manifest, read_events
from tests.support import http, write_run

RUN = "revoked-1"


@pytest.fixture(autouse=True)
def quick_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Streams that look at their token and run again every 0.2 s, not every 5 s: each
    test waits for one such look (the server runs in this process)."""
    monkeypatch.setattr(sse, "REVOCATION_CHECK_S", 0.2)


def _ingest(client: httpx.Client, token: str, step: int, first: bool = False) -> None:
    batch: dict[str, Any] = {"run_id": RUN, "file": "metrics.jsonl",
                             "records": [{"seq": step, "step": step, "ts": time.time(),
                                          "loss": 1.0 / (step + 1)}]}
    if first:
        batch["manifest"] = manifest(RUN, "watched", project="vision")
    resp = client.post("/api/ingest", json=batch, headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200, resp.text


def test_a_live_stream_ends_once_its_token_is_revoked(engine: Engine) -> None:
    with engine.begin() as conn:
        tokens.create_project(conn, "vision", "test")
        revoked, secret = tokens.create(conn, "vision", "read", "viewer", "test")
        _, kept = tokens.create(conn, "vision", "read", "other", "test")
    server_token = new_token()
    with Runner(engine, port=free_port(), token=server_token, warm=False) as srv, \
            http.client(base_url=srv.url, timeout=60) as client:
        _ingest(client, server_token, 0, first=True)
        as_viewer = {"Authorization": f"Bearer {secret}"}
        with client.stream("GET", f"/api/runs/{RUN}/stream", headers=as_viewer) as gone, \
                client.stream("GET", "/api/stream/runs", headers=as_viewer) as gone_list, \
                client.stream("GET", f"/api/runs/{RUN}/stream",
                              headers={"Authorization": f"Bearer {kept}"}) as other:
            assert gone.status_code == gone_list.status_code == other.status_code == 200
            resp = client.post(f"/api/tokens/{revoked.id}/revoke", json={},
                               headers={"Authorization": f"Bearer {server_token}"})
            assert resp.status_code == 200, resp.text
            for stream in (gone, gone_list):
                lines = stream.iter_lines()
                events = read_events(lines, lambda ev: ev[-1]["event"] == "revoked")
                assert "revoked" in events[-1]["data"]["error"]
                assert list(lines) == []  # and the server ended it
            _ingest(client, server_token, 1)
            read_events(other.iter_lines(), lambda ev: any(
                e["event"] == "points" and e["data"][0]["step"] == 1 for e in ev))
        again = client.get(f"/api/runs/{RUN}/stream", headers=as_viewer)
        assert again.status_code == 401, again.text


def test_a_stream_ends_when_a_folder_of_another_project_takes_its_run(
        engine: Engine, tmp_path: Path) -> None:
    # A run alpha sent over HTTP, then found in a folder of bravo under its run id: the run
    # is bravo's, records and all (store.runs.upsert_run). A stream alpha opened on it
    # before followed it by its row and went on with bravo's records.
    runs = tmp_path / "runs"
    runs.mkdir()
    with engine.begin() as conn:
        tokens.create_project(conn, "alpha", "test")
        tokens.create_project(conn, "bravo", "test")
        _, writer = tokens.create(conn, "alpha", "write", "sender", "test")
    server_token = new_token()
    run_id = "e" * 32
    with Runner(engine, runs_dir=runs, port=free_port(), token=server_token, warm=False,
                interval=0.1) as srv, http.client(base_url=srv.url, timeout=60) as client:
        as_alpha = {"Authorization": f"Bearer {writer}"}
        batch = {"run_id": run_id, "file": "metrics.jsonl",
                 "manifest": manifest(run_id, "sent-first", project="alpha"),
                 "records": [{"seq": 0, "step": 0, "ts": time.time(), "loss": 1.0}]}
        assert client.post("/api/ingest", json=batch, headers=as_alpha).status_code == 200
        with client.stream("GET", f"/api/runs/{run_id}/stream", headers=as_alpha) as stream:
            assert stream.status_code == 200
            write_run(runs, "bravo-run", [{"seq": 0, "step": 0, "ts": time.time(),
                                           "loss": 5.0}],
                      run_id=run_id, project="bravo")
            lines = stream.iter_lines()
            events = read_events(lines, lambda ev: ev[-1]["event"] == "revoked")
            assert "no longer one of your project's runs" in events[-1]["data"]["error"]
            assert not any(e["event"] == "points" and e["data"][0]["value"] == [5.0]
                           for e in events)
            assert list(lines) == []
