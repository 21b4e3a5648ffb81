"""The start-up warming (Runner._prewarm) reads the newest runs' series only while no
request waits for its answer: read beside a request, the two threads took turns on the
interpreter and a fresh server's first compare took seconds, not its own 0.2 s."""

from __future__ import annotations

import json
import socket
import sys
import threading
from pathlib import Path

import runwatch
from runwatch.ingest import Indexer
from runwatch.rundir import format as fmt
from runwatch.server.runner import Runner
from runwatch.store import open_engine
from runwatch.store.series import PAUSE_ROWS
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


def _frames(thread: threading.Thread) -> list[str]:
    frame = sys._current_frames().get(thread.ident or -1)
    names = []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return names


def _long_run(runs: Path, keys: int, steps: int) -> None:
    """A run of `keys` metrics over `steps` steps, each series longer than the warming reads
    at a time (store.series.PAUSE_ROWS), its metrics file written whole."""
    run = runwatch.init(name="long", dir=runs, method="sft")
    run.finish()
    lines = (json.dumps({"seq": i, "step": i, "ts": 1.0e9 + i,
                         **{f"m{k}": float(i + k) for k in range(keys)}})
             for i in range(steps))
    (runs / run.name / fmt.METRICS).write_text("\n".join(lines) + "\n")


def test_the_warming_gives_way_inside_a_series_read(tmp_path: Path) -> None:
    # A request that comes while the warming reads one long series waits for one piece of
    # it (store.series.pausing), not for the whole series: the warming is seen waiting
    # inside the read. A request may come just as a read ends (the warming then waits
    # between series): then it is tried again on a later series.
    runs = tmp_path / "runs"
    keys, steps = 8, 3 * PAUSE_ROWS
    _long_run(runs, keys, steps)
    engine = open_engine(tmp_path / "index.db")
    Indexer(engine, runs).index_once()
    inside = False
    try:
        with Runner(engine, port=0, prewarm=False, save_series=False) as runner:
            warming = threading.Thread(target=runner._prewarm, daemon=True)
            warming.start()
            while not inside and warming.is_alive():
                wait_for(lambda: "read_rows" in _frames(warming) or not warming.is_alive(),
                         what="the warming to read a series", interval=0.0005)
                if not warming.is_alive():
                    break
                with socket.create_connection(("127.0.0.1", runner.port), timeout=30) as sock:
                    sock.sendall(b"POST /api/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                 b"Content-Type: application/json\r\n"
                                 b"Content-Length: 64\r\n\r\n{")
                    wait_for(lambda: runner.metrics.answering == 1,
                             what="the request to be counted")
                    wait_for(lambda: _waiting_in_prewarm(warming),
                             what="the warming to wait for the request")
                    inside = "read_rows" in _frames(warming)
                wait_for(lambda: runner.metrics.answering == 0, what="the request to end")
                wait_for(lambda: "read_rows" not in _frames(warming),
                         what="the warming to finish that series")
            warming.join(timeout=120)
            assert not warming.is_alive()
    finally:
        engine.dispose()
    assert inside, "the warming never waited inside a series read"
