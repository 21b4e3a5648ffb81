"""Every route answers bad input with the one error shape and a 4xx, never a 500."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import QueuePool, create_engine

from runwatch.server.app import create_app
from runwatch.store.db import open_engine

from .apiclient import Api, MakeRun, assert_error

BAD_RUN = "no-such-run"
JSON = {"Content-Type": "application/json"}
# Streams are long-lived; their bad-input answers come before any streaming starts.
BIG = str(2**63)  # one past what a 64-bit integer column holds: no stored seq or step
BAD_QUERIES: dict[str, list[dict[str, str]]] = {
    "/api/runs": [{"cursor": "%%%"}, {"cursor": "WyJ4IiwyXQ"}, {"limit": "0"}, {"limit": "x"},
                  {"cursor": base64.urlsafe_b64encode(f"[1.0,{BIG}]".encode()).decode()}],
    "/api/series": [{}, {"run": "r"}, {"run": "r", "key": "loss", "points": "5"},
                    {"run": "r", "key": "loss", "lo": "x"}],
    "/api/runs/{run}/history": [{"after": "x"}, {"before": "1.5"}, {"order": "sideways"},
                                {"limit": "0"}, {"after": BIG}],
    "/api/runs/{run}/samples": [{"step": "-1"}, {"split": "test"}, {"best": "0"}],
    "/api/runs/{run}/logs": [{"level": "loud"}, {"cursor": "zz"}, {"limit": "-3"},
                             {"cursor": BIG}],
    "/api/runs/{run}/series": [{"points": "big"}],
    "/api/runs/{run}/stream": [{"cursor": "1.2"}, {"cursor": f"{BIG}.0.0.0"},
                               {"cursor": "-2.-1.-1.-1"}],
}


def _routes(api: Api) -> list[tuple[str, str]]:
    spec = api.ok("/openapi.json")
    return [(m.upper(), p) for p, ops in spec["paths"].items() for m in ops]


def test_every_route_refuses_an_unknown_run_or_bad_input(api: Api, make_run: MakeRun,
                                                         index: Callable[[], None]) -> None:
    make_run("r", steps=3, metrics=lambda i: {"loss": 1.0})
    index()
    routes = _routes(api)
    assert len(routes) >= 17
    for method, path in routes:
        body: dict[str, Any] = {"json": {}} if method == "POST" else {}
        if "{run}" in path:
            resp = api.request(method, path.replace("{run}", BAD_RUN), **body)
            assert_error(resp, 404)
        for params in BAD_QUERIES.get(path, []):
            resp = api.request(method, path.replace("{run}", "r"), params=params, **body)
            assert_error(resp)
    assert_error(api.post("/api/ingest", content=b"\x00\xff", headers=JSON), 400)
    # a body that is not JSON is said so (it read "bad request: 0: JSON decode error")
    body = assert_error(api.post("/api/jobs", content=b"{not json", headers=JSON), 400)
    assert "the body is not valid JSON" in body["error"] and "send a JSON object" in body["error"]


def test_unknown_routes_and_methods_use_the_error_shape(api: Api) -> None:
    assert_error(api.get("/api/nothing-here"), 404)
    assert_error(api.request("DELETE", "/api/runs", json={}), 405)
    assert_error(api.get("/assets/missing.js"), 404)


def test_error_messages_say_what_to_do(api: Api) -> None:
    body = assert_error(api.get(f"/api/runs/{BAD_RUN}"), 404)
    assert re.search(r"GET /api/runs", body["error"])


def test_an_exhausted_connection_pool_is_a_503_with_retry_after(tmp_path: Path) -> None:
    open_engine(tmp_path / "index.db").dispose()  # create the index
    small = create_engine(f"sqlite:///{tmp_path / 'index.db'}", poolclass=QueuePool,
                          pool_size=1, max_overflow=0, pool_timeout=0.05)
    with small.connect():  # the only connection is in use
        resp = Api(create_app(small)).get("/api/runs")
    body = assert_error(resp, 503)
    assert resp.headers["retry-after"] == "2" and body["retry_after"] == 2
    assert "busy" in body["error"]


def test_a_nan_step_bound_and_a_missing_page_say_what_they_are(
        api: Api, make_run: MakeRun, index: Callable[[], None]) -> None:
    # lo=nan read every step as outside the window: a 200 with an empty series
    make_run("r", steps=5)
    index()
    for params in ({"lo": "nan"}, {"hi": "nan", "lo": "1"}):
        body = assert_error(api.get("/api/runs/r/series", params={"key": "loss", **params}),
                            400)
        assert "is NaN" in body["error"]
    # a page or asset that is not there is no API route
    for path in ("/assets/nothing.js", "/nowhere"):
        body = assert_error(api.get(path), 404)
        assert "no such page" in body["error"] and "API" not in body["error"]
    assert "no such API route" in assert_error(api.get("/api/nowhere"), 404)["error"]
