"""A run sent over HTTP is never shown ended before what it recorded before its end: the
sender holds back the events that end a run until the other record files are sent to
their end. A finished run whose metrics take several requests (the sender reads at most
1 MiB of a file per request) showed SUCCEEDED on the server after the first, with a
quarter of its points."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from runwatch.rundir import format as fmt
from runwatch.sdk.sendhttp import Client
from runwatch.sdk.upload import READ_BYTES, sync_run
from runwatch.server.runner import Runner, free_port
from runwatch.server.settings import new_token
from runwatch.store import schema as s
from tests.support import sdk_run
from tests.team.serving import stored

STEPS = 30_000


class Watching(Client):
    """A real client that, after each request the server answered, reads what the
    server's index shows of the run: its status and its points."""

    def __init__(self, server: str, token: str, engine: Engine, run_id: str) -> None:
        super().__init__(server, token)
        self.engine, self.run_id = engine, run_id
        self.seen: list[tuple[str | None, int]] = []

    def post(self, body: bytes) -> tuple[int, Any]:
        answer = super().post(body)
        with self.engine.connect() as conn:
            status = conn.execute(select(s.runs.c.status)
                                  .where(s.runs.c.run_id == self.run_id)).scalar()
        got = stored(self.engine, self.run_id)
        points = 0 if got is None else sum(map(len, got["points"].values()))
        self.seen.append((status, points))
        return answer


def test_a_run_sent_in_several_requests_is_shown_ended_only_with_all_its_points(
        tmp_path: Path, engine: Engine) -> None:
    run_id = sdk_run(tmp_path, "long", steps=STEPS,
                     metrics=lambda i: {"loss": 1.0 / (i + 1), "learning_rate": 1e-3})
    assert (tmp_path / "long" / fmt.METRICS).stat().st_size > 2 * READ_BYTES
    total = 2 * STEPS
    with Runner(engine, port=free_port(), token=new_token(), warm=False) as srv:
        client = Watching(srv.url, srv.token or "", engine, run_id)
        try:
            report = sync_run(tmp_path / "long", client, retry_for=0)
        finally:
            client.close()
    assert report.records[fmt.METRICS] == STEPS and len(client.seen) >= 3, client.seen
    ended = [(status, points) for status, points in client.seen
             if status in fmt.TERMINAL_PHASES]
    assert ended and all(points == total for _, points in ended), client.seen
    assert client.seen[-1] == ("SUCCEEDED", total)
    # while its metrics were still on their way, it showed running
    assert client.seen[0][0] == "RUNNING" and client.seen[0][1] < total, client.seen
