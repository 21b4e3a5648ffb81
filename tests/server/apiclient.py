"""Test helpers of the server tests: a synchronous HTTP client over the in-process app,
the error-shape check, a batch's manifest, and a reader of server-sent events."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.support import MakeRun
from tests.support import manifest as named_manifest
from tests.support.wait import DEADLINE_S

__all__ = ["Api", "MakeRun", "assert_error", "manifest", "read_events"]


class Api:
    """A synchronous face on httpx.AsyncClient(transport=ASGITransport(app))."""

    def __init__(self, app: Any, headers: dict[str, str] | None = None) -> None:
        self.app = app
        self.headers = headers or {}

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        async def go() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                         headers=self.headers) as client:
                return await client.request(method, path, **kw)

        # a thread of its own, so this works even where a loop already runs (Playwright)
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, go()).result()

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("POST", path, **kw)

    def ok(self, path: str, **kw: Any) -> dict[str, Any]:
        resp = self.get(path, **kw)
        assert resp.status_code == 200, resp.text
        body: dict[str, Any] = resp.json()
        return body


def assert_error(resp: httpx.Response, status: int | None = None) -> dict[str, Any]:
    """The response is the one error shape, with a 4xx status (or exactly `status`)."""
    body: dict[str, Any] = resp.json()
    assert body["ok"] is False and isinstance(body["error"], str) and body["error"]
    assert body["status"] == resp.status_code
    if status is not None:
        assert resp.status_code == status, body
    else:
        assert 400 <= resp.status_code < 500, body
    return body


def manifest(run_id: str, name: str, **fields: Any) -> dict[str, Any]:
    """The smallest valid manifest of an ingest batch's run (tests.support.manifest)."""
    return named_manifest(name, run_id=run_id, **fields)


def read_events(lines: Iterator[str], until: Callable[[list[dict[str, Any]]], bool],
                deadline: float = DEADLINE_S) -> list[dict[str, Any]]:
    """Parse server-sent events from an iterator of lines until `until(events)` is true;
    fail the test when `deadline` seconds pass first (keep-alive lines do not count)."""
    end = time.monotonic() + deadline
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in lines:
        if line == "":
            if "data" in current:
                current["data"] = json.loads(current["data"])
                events.append(current)
                if until(events):
                    return events
            current = {}
        elif not line.startswith(":") and ":" in line:
            field, _, value = line.partition(":")
            current[field] = value[1:] if value.startswith(" ") else value
        if time.monotonic() > end:
            break
    pytest.fail(f"gave up after {deadline:g} s waiting for the awaited server-sent events; "
                f"got {[e.get('event') for e in events]}")
