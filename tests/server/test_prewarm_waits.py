"""The start-up warming (Runner._prewarm) reads the newest runs' series only while no
request waits for its answer: read beside a request, the two threads took turns on the
interpreter and a fresh server's first compare took seconds, not its own 0.2 s."""

from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path

from runwatch.ingest import Indexer
from runwatch.server.runner import Runner
from runwatch.store import open_engine
from tests.support.rundirs import sdk_run
from tests.support.wait import wait_for


def _waiting_in_prewarm(thread: threading.Thread) -> bool:
    """The warming thread sits in its wait for requests to be answered."""
    frame = sys._current_frames().get(thread.ident or -1)
    names = []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return "_prewarm" in names and "wait" in names


def test_the_warming_waits_while_a_request_waits_for_its_answer(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    sdk_run(runs, "newest", steps=30)
    engine = open_engine(tmp_path / "index.db")
    Indexer(engine, runs).index_once()
    try:
        with Runner(engine, port=0, prewarm=False, save_series=False) as runner, \
                socket.create_connection(("127.0.0.1", runner.port), timeout=30) as sock:
            # a request whose body has not all come: taken, not yet answered
            sock.sendall(b"POST /api/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Content-Type: application/json\r\nContent-Length: 64\r\n\r\n{")
            wait_for(lambda: runner.metrics.answering == 1, what="the request to be counted")
            warming = threading.Thread(target=runner._prewarm, daemon=True)
            warming.start()
            wait_for(lambda: _waiting_in_prewarm(warming), what="the warming to wait")
            assert runner.cache.held_points == 0, "the warming read while a request waited"
            sock.close()  # the client leaves: its request is over, answered or not
            wait_for(lambda: not warming.is_alive(), what="the warming to finish")
            assert runner.metrics.answering == 0
            assert runner.cache.held_points >= 30, "the warming read nothing once free"
    finally:
        engine.dispose()
