"""Live streams under load, against the real server: 60 run streams and 5 list streams
watch 20 runs that the SDK writes for about 15 s. Every stream gets every point of its run
exactly once and in order, no request fails, and the run list keeps answering."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runwatch.sdk import init
from runwatch.server.runner import Runner
from tests.support import wait_for

RUNS = 20
STREAMS_PER_RUN = 3
LIST_STREAMS = 5
STEPS = 150
STEP_S = 0.1  # the writers log a step of every run this often: 15 s of logging
# only stops a broken test from hanging; no figure here is judged by how long it took
GUARD = httpx.Timeout(60.0)
DEADLINE_S = 120.0


def _loss(run: int, step: int) -> float:
    return round(run + 1 / (step + 1), 6)


async def _events(resp: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The server-sent events of a streamed response, data parsed."""
    current: dict[str, Any] = {}
    async for line in resp.aiter_lines():
        if line == "":
            if "data" in current:
                current["data"] = json.loads(current["data"])
                yield current
            current = {}
        elif not line.startswith(":") and ":" in line:
            field, _, value = line.partition(":")
            current[field] = value[1:] if value.startswith(" ") else value


async def _watch_run(client: httpx.AsyncClient, name: str, cursor: str) -> list[int]:
    """The steps of every point the run's stream sends, until the last step arrives."""
    steps: list[int] = []
    async with client.stream("GET", f"/api/runs/{name}/stream",
                             params={"cursor": cursor}) as resp:
        assert resp.status_code == 200
        async for event in _events(resp):
            if event["event"] != "points":
                continue
            for point in event["data"]:
                run = int(name.removeprefix("load-"))
                assert point["values"]["loss"] == _loss(run, point["step"])
                steps.append(point["step"])
            if steps and steps[-1] == STEPS - 1:
                return steps
    return steps


async def _watch_list(client: httpx.AsyncClient) -> set[str]:
    """The runs the list stream says have finished, until all of them have."""
    done: set[str] = set()
    async with client.stream("GET", "/api/stream/runs") as resp:
        assert resp.status_code == 200
        async for event in _events(resp):
            if event["event"] == "run" and event["data"]["status"] == "SUCCEEDED":
                done.add(event["data"]["name"])
                if len(done) == RUNS:
                    break
    return done


async def _probe(client: httpx.AsyncClient, stop: asyncio.Event) -> list[int]:
    """Statuses of GET /api/runs, asked every half second until `stop`."""
    statuses = []
    while not stop.is_set():
        statuses.append((await client.get("/api/runs")).status_code)
        await asyncio.sleep(0.5)
    return statuses


def _write(runs: list[Any]) -> None:
    for step in range(STEPS):
        for i, run in enumerate(runs):
            run.log({"loss": _loss(i, step), "reward": step / STEPS}, step=step)
        time.sleep(STEP_S)
    for run in runs:
        run.finish("SUCCEEDED")


@pytest.mark.slow
def test_streams_under_load_lose_nothing(server: Runner, runs_dir: Path) -> None:
    runs = [init(name=f"load-{i}", dir=runs_dir, flush_interval=0.05) for i in range(RUNS)]
    with httpx.Client(base_url=server.url, timeout=GUARD) as client:
        cursors = {}
        for i in range(RUNS):
            def detail(name: str = f"load-{i}") -> str | None:
                resp = client.get(f"/api/runs/{name}")
                return str(resp.json()["cursor"]) if resp.status_code == 200 else None

            cursors[f"load-{i}"] = wait_for(detail, what=f"the server to index load-{i}")

    async def main() -> tuple[list[list[int]], list[set[str]], list[int]]:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        async with httpx.AsyncClient(base_url=server.url, timeout=GUARD,
                                     limits=limits) as client:
            watchers = [asyncio.create_task(_watch_run(client, name, cursor))
                        for name, cursor in cursors.items() for _ in range(STREAMS_PER_RUN)]
            lists = [asyncio.create_task(_watch_list(client)) for _ in range(LIST_STREAMS)]
            stop = asyncio.Event()
            prober = asyncio.create_task(_probe(client, stop))
            writer = threading.Thread(target=_write, args=(runs,), daemon=True)
            writer.start()
            try:
                got = await asyncio.wait_for(asyncio.gather(*watchers), DEADLINE_S)
                listed = await asyncio.wait_for(asyncio.gather(*lists), DEADLINE_S)
            finally:
                stop.set()
                for task in [*watchers, *lists]:
                    task.cancel()
            writer.join(DEADLINE_S)
            return got, listed, await prober

    got, listed, statuses = asyncio.run(main())
    assert all(steps == list(range(STEPS)) for steps in got), \
        [(len(s), s[:5]) for s in got if s != list(range(STEPS))]
    assert all(done == {f"load-{i}" for i in range(RUNS)} for done in listed)
    assert statuses and set(statuses) == {200}
