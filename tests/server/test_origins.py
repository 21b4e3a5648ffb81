"""DNS rebinding and cross-site writes: the Host check and same-origin JSON writes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.server.app import create_app
from runwatch.server.runner import Runner, free_port
from tests.support import http

from .apiclient import Api, assert_error, manifest

TOKEN = "Kq3v-9xTz_2mLw8RbY"
BATCH = {"run_id": "x1", "file": "events.jsonl", "manifest": manifest("x1", "x1"),
         "records": [{"seq": 0, "ts": 1.0, "phase": "FAILED"}]}


@pytest.fixture
def server(engine: Engine, runs_dir: Path) -> Iterator[Runner]:
    with Runner(engine, runs_dir=runs_dir, port=free_port(), prewarm=False, warm=False) as srv:
        yield srv


def test_a_rebound_name_is_refused_over_http(server: Runner) -> None:
    port = server.port
    with http.client(base_url=server.url, timeout=10) as client:
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example"):
            for path in ("/api/runs", "/runs", "/openapi.json"):
                body = assert_error(client.get(path, headers={"Host": host}), 403)
                assert "evil.example" in body["error"] and "--token" in body["error"]
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}"):
            assert client.get("/api/runs", headers={"Host": host}).status_code == 200, host


def test_with_a_token_any_name_is_served_to_whoever_has_the_token(engine: Engine) -> None:
    api = Api(create_app(engine, token=TOKEN), {"Host": "runwatch.team.example"})
    assert_error(api.get("/api/runs"), 401)
    resp = api.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 200


def _runs(api: Api) -> list[str]:
    return [r["name"] for r in api.ok("/api/runs")["runs"]]


def test_a_simple_cross_site_post_stores_nothing(api: Api) -> None:
    body = json.dumps(BATCH).encode()
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                  None):
        headers = {"Content-Type": ctype} if ctype else {}
        refused = assert_error(api.post("/api/ingest", content=body, headers=headers), 415)
        assert "application/json" in refused["error"]
    assert_error(api.post("/api/runs/x1/cancel"), 415)
    assert _runs(api) == []


def test_a_json_write_from_another_origin_is_refused(api: Api) -> None:
    for origin in ("http://evil.example", "null", "http://test.evil.example",
                   "https://test:8443"):
        resp = api.post("/api/ingest", json=BATCH, headers={"Origin": origin})
        assert "writes only from its own pages" in assert_error(resp, 403)["error"]
    assert _runs(api) == []
    # the server's own pages (same origin) and non-browser clients (no Origin) may write
    assert api.post("/api/ingest", json=BATCH, headers={"Origin": "http://test"}
                    ).status_code == 200
    assert api.post("/api/ingest", json=BATCH).status_code == 200
    assert _runs(api) == ["x1"]
