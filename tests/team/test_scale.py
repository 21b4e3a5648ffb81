"""Team-mode scale: gzip ingest bodies, many runs streamed over HTTP at once with no point
lost or stored twice (SQLite and PostgreSQL), and the run list paged over 10,000 runs.

Sizes are small (the bench, bench/bench_team.py, measures the full load); no timed
assertions."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from runwatch.server.app import create_app
from runwatch.server.runner import Runner, free_port
from runwatch.server.state import Limits
from runwatch.store.db import open_engine
from tests.support import manifest

PG_URL = os.environ.get("RUNWATCH_TEST_POSTGRES_URL")
GZIP = {"Content-Type": "application/json", "Content-Encoding": "gzip"}


def _batch(run_id: str, seqs: range, with_manifest: bool = True) -> dict[str, Any]:
    batch: dict[str, Any] = {"run_id": run_id, "file": "metrics.jsonl",
                             "records": [{"seq": i, "step": i, "ts": 1.0, "loss": i / 10}
                                         for i in seqs]}
    if with_manifest:
        batch["manifest"] = manifest(run_id, run_id=run_id)
    return batch


def _gz(payload: Any) -> bytes:
    return gzip.compress(json.dumps(payload).encode())


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Runner]:
    """The real server on a SQLite index, on a free port."""
    engine = open_engine(tmp_path / "index.db")
    with Runner(engine, port=free_port(), prewarm=False, save_series=False) as runner:
        yield runner
    engine.dispose()


def _small_app_post(engine: Engine, body: bytes, headers: dict[str, str]) -> httpx.Response:
    """POST /api/ingest to the app with a 20,000-byte body limit (in process: the
    server command has no flag for the limit)."""
    app = create_app(engine, limits=Limits(max_body_bytes=20_000))

    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://test") as client:
            return await client.post("/api/ingest", content=body, headers=headers)

    return asyncio.run(go())


def test_a_gzip_body_is_stored_like_a_plain_one(server: Runner) -> None:
    with httpx.Client(base_url=server.url) as client:
        resp = client.post("/api/ingest", content=_gz(_batch("g", range(20))), headers=GZIP)
        assert resp.status_code == 200, resp.text
        # sent again, gzip or not, nothing new is stored
        assert client.post("/api/ingest", content=_gz(_batch("g", range(20))),
                           headers=GZIP).json()["results"][0]["rows"] == 0
        series = client.get("/api/series", params={"run": "g", "key": "loss"}).json()
        assert series["series"][0]["step"] == list(range(20))


def test_gzip_bodies_are_capped_inflated_and_refused_clearly(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "index.db")
    try:
        # 30 kB of JSON that gzip makes small: the inflated size is what counts
        big = _batch("b", range(600))
        assert len(json.dumps(big)) > 20_000 and len(_gz(big)) < 20_000
        resp = _small_app_post(engine, _gz(big), GZIP)
        assert resp.status_code == 413 and "inflates" in resp.json()["error"], resp.text
        # a bomb: 16 MB of zeros in 16 kB is refused without inflating it all
        bomb = gzip.compress(b"0" * (16 << 20), compresslevel=9)
        assert len(bomb) < 20_000
        resp = _small_app_post(engine, bomb, GZIP)
        assert resp.status_code == 413, resp.text
        # not gzip, or cut short: 400; another encoding: 415
        for bad in (b"{not gzip", _gz(_batch("c", range(3)))[:-12]):
            resp = _small_app_post(engine, bad, GZIP)
            assert resp.status_code == 400 and "gzip" in resp.json()["error"], resp.text
        resp = _small_app_post(engine, b"{}", {**GZIP, "Content-Encoding": "br"})
        assert resp.status_code == 415, resp.text
        # under the cap, stored
        resp = _small_app_post(engine, _gz(_batch("s", range(50))), GZIP)
        assert resp.status_code == 200 and resp.json()["results"][0]["rows"] == 50, resp.text
    finally:
        engine.dispose()
