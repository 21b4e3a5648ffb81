"""What the folder's indexer reads of a run, a team server gets: a record line longer than the
sender's 1 MiB read, up to the format's longest line (`fmt.MAX_LINE_BYTES`), is read alone
and sent alone, in a request the server takes past its 8 MiB body limit; a longer one is
skipped by both, and said. A line a server refuses as too large (one that takes less) is
counted and said, and the lines after it are sent.

Found by reading the code (session 37): the sender read lines of at most 1 MiB and skipped
longer ones as broken, a server took at most 8 MiB a request, and nothing was said: a 2 MiB
and a 10 MiB log line were in the folder's index and never on the server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn
from sqlalchemy import Engine, select

import runwatch
from runwatch.ingest.indexer import Indexer
from runwatch.rundir import format as fmt
from runwatch.sdk.sender import PROBLEMS_SAID
from runwatch.sdk.sendhttp import Client
from runwatch.sdk.upload import sync_run
from runwatch.server.app import create_app
from runwatch.server.runner import Runner, free_port
from runwatch.server.settings import new_token
from runwatch.server.state import Limits
from runwatch.store import schema as s
from runwatch.store.db import open_engine
from tests.support import wait_for, write_manifest

MiB = 1024 * 1024


def messages(engine: Engine, name: str) -> list[tuple[int, int]]:
    """(seq, length of the message) of each log line an index holds of run `name`."""
    with engine.connect() as conn:
        pk = conn.execute(select(s.runs.c.pk).where(s.runs.c.name == name)).scalar_one()
        rows = conn.execute(select(s.logs.c.seq, s.logs.c.message)
                            .where(s.logs.c.run_pk == pk).order_by(s.logs.c.seq)).all()
    return [(seq, len(message)) for seq, message in rows]


def folder_index(runs_dir: Path, tmp_path: Path) -> tuple[Engine, list[str]]:
    """The runs folder indexed into an index of its own, and the problems the pass met."""
    engine = open_engine(tmp_path / "folder-index.db")
    return engine, Indexer(engine, runs_dir).index_once().problems


def log_line(seq: int, size: int) -> str:
    """A logs.jsonl line of exactly `size` bytes, its newline included."""
    record = {"seq": seq, "ts": 1e9, "level": "info", "message": ""}
    record["message"] = "x" * (size - len(json.dumps(record)) - 1)
    return json.dumps(record) + "\n"


def test_long_log_lines_reach_the_server_as_the_folder_s_index_reads_them(
        runs_dir: Path, engine: Engine, tmp_path: Path) -> None:
    with Runner(engine, port=free_port(), token=new_token(), warm=False) as srv:
        run = runwatch.init(name="long", dir=runs_dir, server=srv.url, token=srv.token)
        assert isinstance(run, runwatch.Run)
        run.log({"loss": 1.0}, step=0)
        run.log_text("before")
        run.log_text("two MiB", data={"x": "a" * (2 * MiB)})
        run.log_text("ten MiB " + "b" * (10 * MiB))
        run.log_text("after")
        run.log_samples(0, [{"prompt": "p", "completion": "c" * (2 * MiB), "reward": 1.0}])
        run.finish()
    indexed, problems = folder_index(runs_dir, tmp_path)
    assert problems == []
    try:
        in_folder = messages(indexed, "long")
    finally:
        indexed.dispose()
    assert len(in_folder) == 4 and in_folder[2][1] > 10 * MiB
    assert messages(engine, "long") == in_folder
    with engine.connect() as conn:
        assert conn.execute(select(s.samples.c.file)).scalars().all() == [
            "step_0000_completions.json"]


def test_sync_sends_lines_up_to_the_longest_a_reader_reads_and_says_the_longer_one(
        runs_dir: Path, engine: Engine, tmp_path: Path) -> None:
    run = write_manifest(runs_dir / "edge", run_id="edge-1")
    (run / fmt.LOGS).write_text(
        log_line(0, 100) + log_line(1, fmt.MAX_LINE_BYTES) + log_line(2, fmt.MAX_LINE_BYTES + 1)
        + log_line(3, 3 * MiB) + log_line(4, 100))
    indexed, problems = folder_index(runs_dir, tmp_path)
    try:
        in_folder = messages(indexed, "edge")
    finally:
        indexed.dispose()
    assert [seq for seq, _ in in_folder] == [0, 1, 3, 4]
    assert len(problems) == 1 and "line 3: the line is longer than" in problems[0]
    with Runner(engine, port=free_port(), token=new_token(), warm=False) as srv:
        client = Client(srv.url, srv.token)
        try:
            report = sync_run(run, client, retry_for=0)
        finally:
            client.close()
    assert messages(engine, "edge") == in_folder
    assert report.records == {fmt.LOGS: 4} and report.skipped == 0
    assert len(report.problems) == 1
    assert "logs.jsonl line 3: the line is longer than" in report.problems[0]


@contextmanager
def serving(engine: Engine, limits: Limits) -> Iterator[str]:
    """The app on `engine` with `limits`, served over HTTP on a free loopback port (a
    server that takes less than this one does by default); its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(engine, limits=limits), host="127.0.0.1",
                                           port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, what="the server to start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def test_a_line_a_server_refuses_as_too_large_is_counted_and_said(
        runs_dir: Path, engine: Engine) -> None:
    run = write_manifest(runs_dir / "older", run_id="older-1")
    (run / fmt.LOGS).write_text(log_line(0, 100) + log_line(1, 3 * MiB) + log_line(2, 100))
    # the body limit of the server that took one record no larger than any other request
    with serving(engine, Limits(max_body_bytes=2 * MiB, max_one_record_bytes=2 * MiB)) as url:
        client = Client(url)
        try:
            report = sync_run(run, client, retry_for=0)
            again = sync_run(run, client, retry_for=0)  # said once: the offsets moved on
        finally:
            client.close()
    assert [seq for seq, _ in messages(engine, "older")] == [0, 2]
    assert report.records == {fmt.LOGS: 2} and report.skipped == 1
    assert len(report.problems) == 1
    assert "logs.jsonl line 2: the server refused it" in report.problems[0]
    assert "2097152 bytes" in report.problems[0]
    assert again.problems == [] and again.skipped == 0


def test_the_live_sender_warns_of_what_the_server_refused(runs_dir: Path,
                                                          engine: Engine) -> None:
    """The SDK's sender says each record it could not send (the first PROBLEMS_SAID, then
    once that there are more), where it kept them in a report nothing showed."""
    limits = Limits(max_body_bytes=2 * MiB, max_one_record_bytes=2 * MiB)
    with serving(engine, limits) as url, pytest.warns(RuntimeWarning) as said:
        run = runwatch.init(name="refused", dir=runs_dir, server=url)
        assert isinstance(run, runwatch.Run)
        run.log_text("small")
        for i in range(PROBLEMS_SAID + 2):
            run.log_text(f"big {i} " + "x" * (3 * MiB))
        run.log_text("after")
        run.finish()
    texts = [str(w.message) for w in said if "runwatch:" in str(w.message)]
    refused = [t for t in texts if "the server refused it" in t]
    assert len(refused) == PROBLEMS_SAID, texts
    assert "logs.jsonl line 2: the server refused it" in refused[0]
    assert sum("more records of" in t and "were not sent" in t for t in texts) == 1, texts
    # the records around them are sent
    assert [n for _, n in messages(engine, "refused")] == [len("small"), len("after")]
