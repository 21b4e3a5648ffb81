"""Team-mode scale: gzip ingest bodies, many runs streamed over HTTP at once with no point
lost or stored twice (SQLite and PostgreSQL), and the run list paged over 10,000 runs.

Sizes are small (the bench, bench/bench_team.py, measures the full load); no timed
assertions."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func, insert, select

from runwatch.server.app import create_app
from runwatch.server.runner import Runner, free_port
from runwatch.server.state import Limits
from runwatch.store import schema as s
from runwatch.store.db import open_engine
from tests.support import http, manifest

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
def server(engine: Engine) -> Iterator[Runner]:
    """The real server on the `engine` fixture's index (SQLite, and PostgreSQL where the
    suite has it), on a free port."""
    with Runner(engine, port=free_port(), prewarm=False, save_series=False, warm=False) as runner:
        yield runner


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
    with http.client(base_url=server.url) as client:
        resp = client.post("/api/ingest", content=_gz(_batch("g", range(20))), headers=GZIP)
        assert resp.status_code == 200, resp.text
        # sent again, gzip or not, nothing new is stored
        for again in (client.post("/api/ingest", content=_gz(_batch("g", range(20))),
                                  headers=GZIP),
                      client.post("/api/ingest", json=_batch("g", range(20)))):
            assert again.status_code == 200 and again.json()["results"][0]["rows"] == 0, again.text
        series = client.get("/api/series", params={"run": "g", "key": "loss"}).json()
        assert series["series"][0]["step"] == list(range(20))


def test_gzip_bodies_are_capped_inflated_and_refused_clearly(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "index.db")  # the limits do not depend on the store
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


RUNS, STEPS, METRICS = 50, 4, 5


async def _stream(url: str, run_ids: list[str]) -> int:
    """Each run sends its steps one request at a time, all runs at once, gzip, the way the
    SDK's sender does; every request but the first also carries the previous step again
    (a retry after a lost answer), and the last step goes before the one before it.
    Returns how many requests were answered 200."""
    names = [f"m/{k}" for k in range(METRICS)]

    def record(step: int) -> dict[str, Any]:
        return {"seq": step, "step": step, "ts": 1e9 + step,
                **{n: step + k / 10 for k, n in enumerate(names)}}

    async def one_run(client: httpx.AsyncClient, run_id: str) -> int:
        ok = 0
        order = [*range(STEPS - 2), STEPS - 1, STEPS - 2]
        for i, step in enumerate(order):
            records = [record(step)] + ([record(order[i - 1])] if i else [])
            batch = {"run_id": run_id, "file": "metrics.jsonl", "records": records,
                     "manifest": manifest(run_id, run_id=run_id,
                                          project=f"p{int(run_id[-3:]) % 3}")}
            resp = await client.post("/api/ingest", content=_gz({"batches": [batch]}),
                                     headers=GZIP)
            ok += resp.status_code == 200
        return ok

    limits = httpx.Limits(max_connections=RUNS)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60,
                                 verify=http.tls()) as client:
        answers = await asyncio.gather(*(one_run(client, r) for r in run_ids))
    return sum(answers)


def test_many_runs_streamed_at_once_lose_and_duplicate_nothing(server: Runner,
                                                                engine: Engine) -> None:
    run_ids = [f"live-{i:03d}" for i in range(RUNS)]
    assert asyncio.run(_stream(server.url, run_ids)) == RUNS * STEPS
    with engine.connect() as conn:
        stored = conn.execute(select(func.count()).select_from(s.metric_points)).scalar()
        counted = conn.execute(select(func.sum(s.metric_keys.c.points))).scalar()
    assert stored == counted == RUNS * STEPS * METRICS
    with http.client(base_url=server.url) as client:
        for run_id in run_ids[::7]:
            series = client.get("/api/series", params={"run": run_id, "key": "m/3"}).json()
            s0 = series["series"][0]
            assert s0["step"] == list(range(STEPS)) and s0["count"] == STEPS
            assert s0["value"] == [step + 0.3 for step in range(STEPS)]
            detail = client.get(f"/api/runs/{run_id}").json()
            assert detail["run"]["observed_step"] == STEPS - 1, detail


async def _post_all(url: str, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    """All bodies posted at once (the server stores requests that wait together)."""
    limits = httpx.Limits(max_connections=len(bodies))
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60,
                                 verify=http.tls()) as client:
        return list(await asyncio.gather(*(
            client.post("/api/ingest", content=_gz(b), headers=GZIP) for b in bodies)))


def test_a_bad_batch_among_many_at_once_is_refused_alone_and_whole(server: Runner,
                                                                   engine: Engine) -> None:
    runs = [f"mixed-{i:02d}" for i in range(24)]
    bodies = [{"batches": [_batch(r, range(5))]} for r in runs]
    # run 7's batch has a bad record after good ones; run 8's request has a good batch and
    # a bad one: a bad batch is stored whole or not at all, the others of its request are kept
    bodies[7]["batches"][0]["records"][3]["loss"] = "not a number"
    bodies[8]["batches"].append(_batch("mixed-08b", range(3)))
    bodies[8]["batches"][1]["records"][1]["step"] = -1
    answers = asyncio.run(_post_all(server.url, bodies))
    for i, resp in enumerate(answers):
        if i in (7, 8):
            assert resp.status_code == 400 and "bad record" in resp.json()["error"], resp.text
        else:
            assert resp.status_code == 200, resp.text
    assert [r["ok"] for r in answers[8].json()["results"]] == [True, False]
    with engine.connect() as conn:
        counts = dict(conn.execute(
            select(s.runs.c.run_id, func.coalesce(func.sum(s.metric_keys.c.points), 0))
            .select_from(s.runs.outerjoin(s.metric_keys))
            .group_by(s.runs.c.run_id)).all())
        stored = conn.execute(select(func.count()).select_from(s.metric_points)).scalar()
    # a refused batch is not stored at all: not even the run its manifest would have made
    assert {r: counts.get(r) for r in runs} == {r: None if r == "mixed-07" else 5 for r in runs}
    assert "mixed-08b" not in counts and stored == 5 * 23


def _fill(engine: Engine, n: int) -> list[tuple[float, int, str, str]]:
    """n runs in 7 projects, created_at with many ties (the cursor must break them by pk);
    returns every run's (created_at, pk, project, status), newest first as the list orders
    them."""
    rows = [{"run_id": f"r{i:05d}", "name": f"run-{i:05d}", "project": f"p{i % 7}",
             "created_at": 1e9 + i // 3, "status": "RUNNING" if i % 10 == 0 else "SUCCEEDED",
             "tags": "[]", "manifest": "{}", "problems": 0} for i in range(n)]
    with engine.begin() as conn:
        conn.execute(insert(s.runs), rows)
        got = conn.execute(select(s.runs.c.created_at, s.runs.c.pk, s.runs.c.project,
                                  s.runs.c.status)).all()
    return sorted(((r.created_at, r.pk, r.project, r.status) for r in got), reverse=True)


def _walk(client: httpx.Client, params: dict[str, Any]) -> list[str]:
    names: list[str] = []
    cursor = None
    for _ in range(1_000):
        body = client.get("/api/runs", params={**params, **({"cursor": cursor} if cursor
                                                             else {})}).json()
        names += [r["name"] for r in body["runs"]]
        cursor = body["next_cursor"]
        if cursor is None:
            return names
    raise AssertionError("the cursor never ran out")


def test_the_run_list_pages_through_10000_runs(server: Runner, engine: Engine) -> None:
    every = _fill(engine, 10_000)
    by_pk = {pk: f"run-{i:05d}" for i, pk in enumerate(sorted(pk for _, pk, _, _ in every))}
    with http.client(base_url=server.url, timeout=60) as client:
        assert _walk(client, {"limit": 500}) == [by_pk[pk] for _, pk, _, _ in every]
        assert _walk(client, {"limit": 333, "project": "p3"}) == [
            by_pk[pk] for _, pk, p, _ in every if p == "p3"]
        assert _walk(client, {"limit": 400, "status": "RUNNING"}) == [
            by_pk[pk] for _, pk, _, st in every if st == "RUNNING"]
        found = client.get("/api/runs", params={"q": "RUN-0421"}).json()["runs"]
        assert sorted(r["name"] for r in found) == [f"run-0421{d}" for d in range(10)]


def test_a_connection_idle_longer_than_a_clients_pool_keeps_it_is_still_served(
        tmp_path: Path) -> None:
    """A client's pool (httpx, the SDK's sender) drops an idle connection after 5 s. The
    server must keep it longer: one that closed at the same moment lost requests sent on it
    as it closed (seen as httpx.ReadError with 50 runs streaming at once)."""
    engine = open_engine(tmp_path / "index.db")
    request = b"GET /api/projects HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    try:
        with Runner(engine, port=free_port(), prewarm=False, save_series=False,
                    warm=False) as runner, \
                socket.create_connection(("127.0.0.1", runner.port), timeout=30) as sock:
            for idle_s in (5.5, 0.0):  # past httpx's keepalive_expiry, then no more wait
                sock.sendall(request)
                head = _read_answer(sock)
                assert head.startswith(b"HTTP/1.1 200"), head
                time.sleep(idle_s)  # the server must not close the connection meanwhile
    finally:
        engine.dispose()


def _read_answer(sock: socket.socket) -> bytes:
    """One HTTP/1.1 answer with a Content-Length, read whole off a kept-alive socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, f"the server closed the connection: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length")))
    while len(body) < length:
        chunk = sock.recv(4096)
        assert chunk, "the server closed the connection mid-answer"
        body += chunk
    return head
