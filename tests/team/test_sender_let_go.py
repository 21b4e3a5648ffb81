"""A sender that finish() stopped waiting for writes nothing more into the run folder.

finish() waits the sender's FINISH_WAIT_S for the last records to go out, then lets the
run folder's lock go: a resumed run or a retry's next attempt may hold it from then on.
The sender's thread may still be waiting on its request; when the answer came after
that, it wrote its offsets (`.runwatch/sent.json`) into the folder it no longer held.
Here a proxy before the real server holds every answer until the folder is free.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

import runwatch
from runwatch.sdk import sender
from runwatch.sdk.lock import RunLock
from runwatch.server.runner import Runner
from tests.support import wait_for
from tests.team.test_sender_reconnect import ClosesOnSecondRequest, read_message


class HoldsAnswers(ClosesOnSecondRequest):
    """A proxy to the server at `upstream` that forwards each request at once and passes
    its answer on only once `release` is set; `hung_up` is set when a client closes its
    connection after its answers (the reconnect test's proxy, serving another way)."""

    def __init__(self, upstream: int) -> None:
        self.release = threading.Event()
        self.held = threading.Event()  # a request went out and its answer waits
        self.hung_up = threading.Event()
        super().__init__(upstream)

    def _serve(self, conn: socket.socket) -> None:
        rest = b""
        with conn, socket.create_connection(("127.0.0.1", self.upstream)) as up:
            while (request := read_message(conn, rest)) is not None:
                message, rest = request
                up.sendall(message)
                answer = read_message(up, b"")
                assert answer is not None
                self.held.set()
                self.release.wait()
                conn.sendall(answer[0])
            self.hung_up.set()


@pytest.fixture
def proxy(engine: Engine) -> Iterator[HoldsAnswers]:
    with Runner(engine, port=0, prewarm=False, save_series=False, warm=False) as server:
        proxy = HoldsAnswers(server.port)
        yield proxy
        proxy.release.set()
        proxy.close()


def _files(run_dir: Path) -> dict[str, int]:
    return {str(p.relative_to(run_dir)): p.stat().st_mtime_ns for p in run_dir.rglob("*")}


def test_an_answer_after_finish_gave_up_writes_nothing_into_the_folder(
        tmp_path: Path, proxy: HoldsAnswers, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sender, "FINISH_WAIT_S", 1.0)
    run = runwatch.init("team", name="late", dir=tmp_path / "runs", server=proxy.url)
    assert run.dir is not None
    run.log({"loss": 1.0}, step=0)
    wait_for(proxy.held.is_set, what="the sender's first request to wait for its answer")
    with pytest.warns(RuntimeWarning, match="has not taken all"):
        run.finish()
    lock = RunLock(run.dir)  # the folder is free: a resumed run could hold it now
    try:
        before = _files(run.dir)
        proxy.release.set()
        wait_for(proxy.hung_up.is_set, what="the sender to take its answer and end")
        assert _files(run.dir) == before
    finally:
        lock.release()
