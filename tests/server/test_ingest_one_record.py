"""A request of one record may pass the ingest body limit, up to the longest line of a record
file (`fmt.MAX_LINE_BYTES`) and its envelope (`Limits.max_one_record_bytes`), so that every
line the folder's indexer reads can reach a server; any other request keeps the body limit,
and a body past it must say its length first (a chunked one is cut at the body limit)."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import Engine

from runwatch.rundir import format as fmt
from runwatch.server.app import create_app
from runwatch.server.state import Limits

from .apiclient import Api, assert_error, manifest

JSON = {"Content-Type": "application/json"}
GZIP = {**JSON, "Content-Encoding": "gzip"}


def _logs(run_id: str, sizes: list[int], seq: int = 0) -> dict[str, Any]:
    """One batch of log lines from `seq` on, whose messages are `sizes` characters long."""
    return {"run_id": run_id, "file": fmt.LOGS, "records": [
        {"seq": seq + i, "ts": time.time(), "level": "info", "message": "m" * size}
        for i, size in enumerate(sizes)]}


def _messages(api: Api, run_id: str) -> list[int]:
    return [len(r["message"]) for r in api.ok(f"/api/runs/{run_id}/logs")["logs"]]


def test_one_record_passes_the_body_limit_and_nothing_else_does(engine: Engine) -> None:
    api = Api(create_app(engine, limits=Limits(max_body_bytes=20_000)))
    assert api.post("/api/ingest", json={**_logs("r", [10]), "manifest": manifest("r", "r")}
                    ).status_code == 200
    # one record of 100 kB, plain (its Content-Length said first) and gzip
    one = json.dumps(_logs("r", [100_000], seq=1)).encode()
    assert api.post("/api/ingest", content=one, headers=JSON).status_code == 200
    zipped = gzip.compress(json.dumps(_logs("r", [90_000], seq=2)).encode())
    assert api.post("/api/ingest", content=zipped, headers=GZIP).status_code == 200
    assert sorted(_messages(api, "r")) == [10, 90_000, 100_000]
    # two records together past the limit: 413, saying what may be larger
    body = assert_error(api.post("/api/ingest", json=_logs("r", [15_000, 15_000], seq=3)),
                        413)
    assert "one record" in body["error"]
    body = assert_error(api.post("/api/ingest", content=gzip.compress(
        json.dumps(_logs("r", [15_000, 15_000], seq=3)).encode()), headers=GZIP), 413)
    assert "inflates" in body["error"]
    # one record in two batches, or not JSON at all, past the limit: 413 too
    two = {"batches": [_logs("r", [15_000], seq=3), _logs("r", [15_000], seq=4)]}
    assert_error(api.post("/api/ingest", json=two), 413)
    assert_error(api.post("/api/ingest", content=b"[" + b" " * 30_000 + b"]", headers=JSON),
                 413)
    # a body that does not say its length is cut at the body limit, one record or not
    one = json.dumps(_logs("r", [100_000], seq=5)).encode()

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(one), 8192):
            yield one[i:i + 8192]

    assert_error(api.post("/api/ingest", content=chunks(), headers=JSON), 413)
    assert sorted(_messages(api, "r")) == [10, 90_000, 100_000]


def test_one_record_is_taken_up_to_the_longest_line_and_no_further(engine: Engine) -> None:
    api = Api(create_app(engine))
    limit = Limits().max_one_record_bytes
    assert Limits().max_body_bytes < fmt.MAX_LINE_BYTES < limit
    assert api.post("/api/ingest", json={**_logs("big", [10]),
                                         "manifest": manifest("big", "big")}).status_code == 200
    # a record whose line in logs.jsonl is the longest a reader reads, newline included
    record = _logs("big", [0])["records"][0]
    record["seq"] = 1
    record["message"] = "m" * (fmt.MAX_LINE_BYTES - len(json.dumps(record)) - 1)
    assert len(json.dumps(record)) + 1 == fmt.MAX_LINE_BYTES
    longest = len(record["message"])
    batch = {"run_id": "big", "file": fmt.LOGS, "records": [record]}
    resp = api.post("/api/ingest", content=json.dumps(batch).encode(), headers=JSON)
    assert resp.status_code == 200, resp.text
    # past the cap: refused from its Content-Length, and inflated past it
    record["seq"], record["message"] = 2, "m" * limit
    assert_error(api.post("/api/ingest", json={**batch, "records": [record]}), 413)
    zipped = gzip.compress(json.dumps({**batch, "records": [record]}).encode())
    assert len(zipped) < Limits().max_body_bytes
    assert_error(api.post("/api/ingest", content=zipped, headers=GZIP), 413)
    assert sorted(_messages(api, "big")) == [10, longest]
