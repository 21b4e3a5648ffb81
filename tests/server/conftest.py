"""Fixtures of the server tests: real runs written by the SDK, a real SQLite index,
and the app called in-process over HTTP (httpx ASGITransport)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from apiclient import Api, MakeRun
from sqlalchemy import Engine

from runwatch.ingest import Indexer
from runwatch.sdk import init
from runwatch.server.app import create_app
from runwatch.store.db import open_engine


@pytest.fixture
def make_run(runs_dir: Path) -> MakeRun:
    """Write a finished run with the SDK: `steps` steps of `metrics(step) -> dict`."""

    def make(name: str, steps: int = 20, metrics: Callable[[int], dict[str, float]] | None = None,
             status: str = "SUCCEEDED", **fields: Any) -> str:
        fields.setdefault("method", "sft")
        fields.setdefault("base_model", "tiny-gpt")
        fields.setdefault("dataset", "arith")
        fields.setdefault("trainer", "runwatch-sft")
        fields.setdefault("backend", "local")
        run = init(name=name, dir=runs_dir, **fields)
        fn = metrics or (lambda i: {"loss": 2.0 / (i + 1), "learning_rate": 1e-3})
        for i in range(steps):
            run.log(fn(i), step=i)
        run.finish(status)
        return str(run.id)

    return make


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    eng = open_engine(tmp_path / "index.db")
    yield eng
    eng.dispose()


@pytest.fixture
def index(engine: Engine, runs_dir: Path) -> Callable[[], None]:
    def go() -> None:
        Indexer(engine, runs_dir).index_once()

    return go


@pytest.fixture
def api(engine: Engine, runs_dir: Path) -> Api:
    return Api(create_app(engine, runs_dir=runs_dir))
