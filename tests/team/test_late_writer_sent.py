"""What a writer finish() gave up on (a stalled disk) writes late still reaches the server.

finish() waits writer.CLOSE_WAIT_S for the writer, then sender.FINISH_WAIT_S for the
sender. When the writer was still stuck then, the sender caught up with the folder as it
was and stopped for good: the run's end and the lines the writer wrote after it were never
sent, the server showed the run still going, and the one warning did not say how to send
them. Now finish() waits for the sender only until it has sent what the folder holds, and
the sender stops once the late writer is done, with FINISH_WAIT_S from then for its last
pass; where it cannot send, its warning names the command that does.

The stalls are real, in the kernel: the writer's temporary sample file is a FIFO nobody
reads, so its open() blocks until the test reads it; a proxy before the real server holds
the sender's requests.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

import runwatch
from runwatch.rundir import atomic
from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line
from runwatch.sdk import sender, writer
from runwatch.sdk.run import Run
from runwatch.server.runner import Runner
from tests.support import cli_here, wait_for
from tests.support.wait import DEADLINE_S
from tests.team.serving import in_folder, stored
from tests.team.test_finish_lets_go_last import SAMPLE, _take, _waits_in
from tests.team.test_finish_lets_go_last import server as server  # the fixture
from tests.team.test_sender_reconnect import ClosesOnSecondRequest, read_message


class HoldsRequests(ClosesOnSecondRequest):
    """A proxy to the server at `upstream` that passes each request on while `open` is set
    and holds one that comes while it is not until it is (the reconnect test's proxy,
    serving another way)."""

    def __init__(self, upstream: int) -> None:
        self.open = threading.Event()
        self.open.set()
        super().__init__(upstream)

    def _serve(self, conn: socket.socket) -> None:
        rest = b""
        with conn:
            while (request := read_message(conn, rest)) is not None:
                message, rest = request
                self.open.wait()
                with socket.create_connection(("127.0.0.1", self.upstream)) as up:
                    up.sendall(message)
                    answer = read_message(up, b"")
                assert answer is not None
                conn.sendall(answer[0])

    def __enter__(self) -> HoldsRequests:
        return self

    def __exit__(self, *exc: object) -> None:
        self.open.set()
        self.close()


@pytest.fixture
def proxy(server: Runner) -> Iterator[HoldsRequests]:
    with HoldsRequests(server.port) as proxy:
        yield proxy


def _finish_stalled(runs: Path, url: str, monkeypatch: pytest.MonkeyPatch,
                    sender_wait: float) -> tuple[Run, threading.Thread, str]:
    """A team run finished while its writer is stuck writing its first sample file, with a
    metric and a log line queued behind it (written late), so that finish() gives up on
    the writer (0.1 s); the sender's FINISH_WAIT_S is `sender_wait`. The writer's thread,
    and the warning finish() gave."""
    monkeypatch.setattr(writer, "CLOSE_WAIT_S", 0.1)
    monkeypatch.setattr(sender, "FINISH_WAIT_S", sender_wait)
    before = set(threading.enumerate())
    run = runwatch.init("team", name="late", dir=runs, server=url)
    assert isinstance(run, Run)
    (writing,) = (t for t in set(threading.enumerate()) - before if t.name == "runwatch-writer")
    os.mkfifo(run.dir / f"{SAMPLE}.tmp")
    run.log({"loss": 1.0}, step=0)
    run.log_samples(0, [{"prompt": "p", "completion": "c"}])
    wait_for(lambda: _waits_in(writing, atomic.write_atomic.__code__),
             what="the writer to be stuck writing the sample file")
    run.log({"loss": 0.5}, step=1)
    run.log_text("written late")
    finishing = threading.Thread(target=run.finish)
    with pytest.warns(RuntimeWarning, match="still being written") as warned:
        finishing.start()
        finishing.join(DEADLINE_S)
    assert not finishing.is_alive(), "finish() waits for a writer whose disk takes nothing"
    return run, writing, _said(warned, f"runwatch: {run.dir} is still being written")


def _unstall(run: Run, writing: threading.Thread) -> None:
    """Read the FIFO (its open() returns as the writer's does) and wait for the writer's
    thread to end: it writes the rest and the run's end, then tells the sender."""
    with open(run.dir / f"{SAMPLE}.tmp", "rb") as fifo:
        assert b'"completion":"c"' in fifo.read()
    writing.join(DEADLINE_S)
    assert not writing.is_alive(), "the writer did not end once its disk took writes"


def _written_late(run: Run) -> dict[str, object]:
    """The folder's records, checked to hold what the late writer wrote: step 1, the log
    line and the run's end."""
    folder = in_folder(run.dir)
    assert [step for _, step, _ in folder["points"]["loss"]] == [0, 1]
    assert b"written late" in (run.dir / fmt.LOGS).read_bytes()
    last = loads_line((run.dir / fmt.EVENTS).read_bytes().splitlines()[-1])
    assert last["phase"] == "SUCCEEDED"
    return folder


def _said(warned: pytest.WarningsRecorder, start: str) -> str:
    """The one warning whose message starts with `start`."""
    (message,) = (str(w.message) for w in warned if str(w.message).startswith(start))
    return message


def test_what_a_late_writer_writes_after_the_sender_caught_up_reaches_the_server(
        tmp_path: Path, engine: Engine, server: Runner,
        monkeypatch: pytest.MonkeyPatch) -> None:
    run, writing, said = _finish_stalled(tmp_path / "runs", server.url, monkeypatch,
                                         sender_wait=4 * DEADLINE_S)
    _unstall(run, writing)
    taken = wait_for(lambda: _take(run.dir), what="the folder to be let go")
    assert taken is not None
    taken.release()
    assert stored(engine, run.id) == _written_late(run)
    # had the process exited before the writer was done: what to run, exactly
    assert f"`runwatch sync {run.dir} --server {server.url}`" in said


def test_a_late_writer_whose_end_the_server_does_not_take_in_time_names_the_command_that_sends_it(
        tmp_path: Path, engine: Engine, proxy: HoldsRequests,
        monkeypatch: pytest.MonkeyPatch) -> None:
    run, writing, _ = _finish_stalled(tmp_path / "runs", proxy.url, monkeypatch,
                                      sender_wait=0.1)
    proxy.open.clear()  # the server gets nothing of the late pass in its 0.1 s
    with pytest.warns(RuntimeWarning, match="has not taken all") as warned:
        _unstall(run, writing)
    # the sender gave up and writes nothing more: the folder is free
    taken = wait_for(lambda: _take(run.dir), what="the folder to be let go")
    assert taken is not None
    taken.release()
    assert stored(engine, run.id) != _written_late(run)
    said = _said(warned, f"runwatch: {proxy.url} has not taken all")
    command = re.search(r"`(runwatch sync [^`]*)`", said)
    assert command is not None, said
    proxy.open.set()
    cli_here(*shlex.split(command[1])[1:])
    assert stored(engine, run.id) == _written_late(run)
