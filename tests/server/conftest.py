"""Fixtures of the server tests: the app called in-process over HTTP (httpx ASGITransport)
on the shared `engine`, and an `index` pass over the shared `runs_dir`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from apiclient import Api
from sqlalchemy import Engine

from runwatch.health.store import on_metrics
from runwatch.ingest import Indexer
from runwatch.server.app import create_app


@pytest.fixture
def index(engine: Engine, runs_dir: Path) -> Callable[[], None]:
    """One indexer pass over `runs_dir` with the health hook, as the server runs it."""

    def go() -> None:
        Indexer(engine, runs_dir, hooks=[on_metrics]).index_once()

    return go


@pytest.fixture
def api(engine: Engine, runs_dir: Path) -> Api:
    return Api(create_app(engine, runs_dir=runs_dir))
