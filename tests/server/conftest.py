"""Fixtures of the server tests: the app called in-process over HTTP (httpx ASGITransport)
on the shared `engine`, and an `index` pass over the shared `runs_dir`.

The servers the tests start (here, in tests/team, tests/web, tests/interop) pass
`warm=False`: the warm-up only moves the first calls' cost before the first request (0.1-0.2
s a start on the CI machine), and tests/server/test_overlay.py tests it; `runwatch ui` and
`runwatch server` started as processes keep it. Their clients come from tests/support/http.py
(one TLS context per process)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.health.store import on_metrics
from runwatch.ingest import Indexer
from runwatch.server.app import create_app

from .apiclient import Api


@pytest.fixture
def index(engine: Engine, runs_dir: Path) -> Callable[[], None]:
    """One indexer pass over `runs_dir` with the health hook, as the server runs it."""

    def go() -> None:
        Indexer(engine, runs_dir, hooks=[on_metrics]).index_once()

    return go


@pytest.fixture
def api(engine: Engine, runs_dir: Path) -> Api:
    return Api(create_app(engine, runs_dir=runs_dir))
