"""What a live stream sends first, as docs/api.md says: a run stream opens with the run's
`phase`, with or without a cursor (a client that reconnects learns the run's state before
the records it missed); the list stream opens with `ready`, `{"runs": N}`.

Found in a trial (trial37, defect 4): with `?cursor=` a run stream opened with `points`,
and the list stream's `ready` event was in no doc."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from runwatch.server.runner import Runner
from tests.support import http, wait_for

from .apiclient import MakeRun, read_events

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
GUARD = httpx.Timeout(30.0)  # only stops a broken test from hanging


def _first_events(client: httpx.Client, path: str, count: int,
                  params: dict[str, str] | None = None) -> list[dict[str, object]]:
    with client.stream("GET", path, params=params) as resp:
        assert resp.status_code == 200
        return read_events(resp.iter_lines(), lambda ev: len(ev) >= count)


def test_a_run_stream_opens_with_its_phase_with_or_without_a_cursor(
        server: Runner, make_run: MakeRun) -> None:
    make_run("s1", steps=5)
    with http.client(base_url=server.url, timeout=GUARD) as client:

        def indexed() -> bool:
            resp = client.get("/api/runs/s1")
            run = resp.json().get("run") or {}
            return resp.status_code == 200 and (run.get("status"), run.get("observed_step")) \
                == ("SUCCEEDED", 4)

        wait_for(indexed, what="the server to index all of s1")
        opened = _first_events(client, "/api/runs/s1/stream", 1)
        assert opened[0]["event"] == "phase"
        # a client that reconnects after step 2 and the run's first event
        resumed = _first_events(client, "/api/runs/s1/stream", 2, {"cursor": "2.-1.0.-1"})
    assert [e["event"] for e in resumed] == ["phase", "points"], resumed
    phase = resumed[0]["data"]
    assert isinstance(phase, dict) and phase["status"] == "SUCCEEDED"
    points = resumed[1]["data"]
    assert isinstance(points, list) and [p["step"] for p in points] == [3, 4]


def test_the_list_stream_opens_with_ready_as_the_api_doc_says(server: Runner,
                                                              make_run: MakeRun) -> None:
    make_run("s1", steps=2)
    with http.client(base_url=server.url, timeout=GUARD) as client:
        wait_for(lambda: client.get("/api/runs").json()["runs"], what="the server to index s1")
        first = _first_events(client, "/api/stream/runs", 1)[0]
    assert (first["event"], first["id"], first["data"]) == ("ready", "0", {"runs": 1})
    streams = API_DOC.read_text().split("## Live streams", 1)[1].split("\n## ", 1)[0]
    said = " ".join(streams.split())
    assert re.search(r"`ready` event, `\{\"runs\": N\}`", said), said
