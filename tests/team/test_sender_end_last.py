"""A run sent over HTTP is never shown ended before what it recorded before its end: the
sender holds back the events that end a run until the other record files are sent to
their end. A finished run whose metrics take several requests (the sender reads at most
1 MiB of a file per request) showed SUCCEEDED on the server after the first, with a
quarter of its points."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from runwatch.rundir import format as fmt
from runwatch.sdk import init, upload
from runwatch.sdk.sendhttp import Client
from runwatch.sdk.upload import RunUpload, UploadReport, sync_run
from runwatch.server.runner import Runner, free_port
from runwatch.server.settings import new_token
from runwatch.store import schema as s
from tests.support.wait import wait_for
from tests.team.serving import stored

STEPS = 3_000


@pytest.fixture
def small_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sender that reads 64 KiB of a file per request, not 1 MiB: the 3,000 steps of
    `long_run` then take several requests, as 30,000 would at 1 MiB."""
    monkeypatch.setattr(upload, "READ_BYTES", 64 * 1024)


class Watching(Client):
    """A real client that, after each request the server answered, reads what the
    server's index shows of the run: its status, its points and its samples; with `stop`,
    it sets that after the first request (finish() gave up on the sender)."""

    def __init__(self, server: str, token: str, engine: Engine, run_id: str,
                 stop: threading.Event | None = None) -> None:
        super().__init__(server, token)
        self.engine, self.run_id, self.stop = engine, run_id, stop
        self.seen: list[tuple[str | None, int, int]] = []

    def post(self, body: bytes) -> tuple[int, Any]:
        answer = super().post(body)
        with self.engine.connect() as conn:
            row = conn.execute(select(s.runs.c.pk, s.runs.c.status)
                               .where(s.runs.c.run_id == self.run_id)).first()
            samples = 0 if row is None else conn.execute(
                select(func.count()).select_from(s.samples)
                .where(s.samples.c.run_pk == row.pk)).scalar_one()
        got = stored(self.engine, self.run_id)
        points = 0 if got is None else sum(map(len, got["points"].values()))
        self.seen.append((None if row is None else row.status, points, int(samples)))
        if self.stop is not None:
            self.stop.set()
        return answer


def long_run(runs: Path, name: str) -> str:
    """A finished run whose metrics take several requests, with a validation's samples
    written before its end."""
    run = init(name=name, dir=runs, method="sft")
    for i in range(STEPS):
        run.log({"loss": 1.0 / (i + 1), "learning_rate": 1e-3}, step=i)
    run.log_samples(STEPS - 1, [{"prompt": "1+1=", "completion": "2", "reward": 1.0}],
                    split="val")
    run.finish()
    assert (runs / name / fmt.METRICS).stat().st_size > 2 * upload.READ_BYTES
    return str(run.id)


def test_a_run_sent_in_several_requests_is_shown_ended_only_with_all_its_records(
        tmp_path: Path, engine: Engine, small_reads: None) -> None:
    run_id = long_run(tmp_path, "long")
    total = 2 * STEPS
    with Runner(engine, port=free_port(), token=new_token(), warm=False) as srv:
        client = Watching(srv.url, srv.token or "", engine, run_id)
        try:
            report = sync_run(tmp_path / "long", client, retry_for=0)
        finally:
            client.close()
    assert report.records[fmt.METRICS] == STEPS and len(client.seen) >= 3, client.seen
    ended = [seen for seen in client.seen if seen[0] in fmt.TERMINAL_PHASES]
    # its points and its samples are all there whenever it shows ended
    assert ended and all(seen[1:] == (total, 1) for seen in ended), client.seen
    assert client.seen[-1] == ("SUCCEEDED", total, 1)
    # while its metrics were still on their way, it showed running
    assert client.seen[0][0] == "RUNNING" and client.seen[0][1] < total, client.seen


def test_a_sender_told_to_stop_while_the_end_waits_sends_the_end(
        tmp_path: Path, engine: Engine, small_reads: None) -> None:
    """finish() gives up on a sender still behind (its 15 s): the end it held for the
    backlog goes at once, so the server shows the run ended, not running for ever, and
    `runwatch sync` sends the rest after."""
    run_id = long_run(tmp_path, "behind")
    stop = threading.Event()
    with Runner(engine, port=free_port(), token=new_token(), warm=False) as srv:
        client = Watching(srv.url, srv.token or "", engine, run_id, stop=stop)
        try:
            RunUpload(tmp_path / "behind", client).send_new(UploadReport(), stop)
            assert [seen[0] for seen in client.seen] == ["RUNNING", "SUCCEEDED"], client.seen
            assert client.seen[-1][1] < 2 * STEPS, "the end went before the rest"
            client.stop = None
            sync_run(tmp_path / "behind", client, retry_for=0)
        finally:
            client.close()
    assert client.seen[-1] == ("SUCCEEDED", 2 * STEPS, 1)


def test_a_last_flush_of_samples_and_the_end_sends_the_samples_first(
        tmp_path: Path, engine: Engine) -> None:
    """All but the last validation's samples and the end were sent: the samples file goes
    before the end (it went after it, so a `runs wait` then `runs rollouts` missed it)."""
    run = init(name="val", dir=tmp_path, method="sft")
    for i in range(5):
        run.log({"loss": 1.0 / (i + 1)}, step=i)
    metrics = tmp_path / "val" / fmt.METRICS
    wait_for(lambda: metrics.exists() and len(metrics.read_bytes().splitlines()) == 5,
             what="the writer to write the 5 steps")
    with Runner(engine, port=free_port(), token=new_token(), warm=False) as srv:
        client = Watching(srv.url, srv.token or "", engine, str(run.id))
        try:
            sync_run(tmp_path / "val", client, retry_for=0)
            assert client.seen[-1] == ("RUNNING", 5, 0), client.seen
            run.log_samples(4, [{"prompt": "1+1=", "completion": "2", "reward": 1.0}],
                            split="val")
            run.finish()
            client.seen.clear()
            sync_run(tmp_path / "val", client, retry_for=0)
        finally:
            client.close()
    ended = [seen for seen in client.seen if seen[0] in fmt.TERMINAL_PHASES]
    assert ended and all(seen[1:] == (5, 1) for seen in ended), client.seen
