"""The run folder's lock goes only once nothing of the process writes into the folder:
neither the writer nor the sender.

finish() waits CLOSE_WAIT_S for the writer, then FINISH_WAIT_S for the sender. A writer it
gave up on (a stalled disk) lets the folder go once it has written the rest; it did so
even while finish() still waited on the sender, whose answer then moved the offsets in
`.runwatch/sent.json` of a folder a resumed run or a retry's next attempt could hold by
then. A sender finish() gave up on, stuck writing those offsets on a stalled disk, had the
folder let go after LET_GO_WAIT_S, with its write still to land.

The stalls are real, in the kernel: a temporary file the writer (a sample file's) or the
sender (sent.json's) writes through is a FIFO nobody reads, so its open() blocks until the
test reads it (neither ever reads a .tmp file); a proxy before the real server holds the
sender's answers.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import CodeType

import pytest
from sqlalchemy import Engine

import runwatch
from runwatch.rundir import atomic
from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line
from runwatch.sdk import sender, upload, writer
from runwatch.sdk.lock import RunLock
from runwatch.server.runner import Runner
from tests.support import wait_for
from tests.support.wait import DEADLINE_S
from tests.team.serving import in_folder, stored
from tests.team.test_sender_let_go import HoldsAnswers

SAMPLE = fmt.sample_file_name(0, "train")


@pytest.fixture
def server(engine: Engine) -> Iterator[Runner]:
    with Runner(engine, port=0, prewarm=False, save_series=False, warm=False) as srv:
        yield srv


@pytest.fixture
def proxy(server: Runner) -> Iterator[HoldsAnswers]:
    proxy = HoldsAnswers(server.port)
    yield proxy
    proxy.release.set()
    proxy.close()


def test_a_late_writer_leaves_the_folder_locked_while_the_sender_may_still_write(
        tmp_path: Path, engine: Engine, proxy: HoldsAnswers,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the writer is stuck however long finish() waits for it; the sender's answer comes
    # when the test says, well within finish()'s wait for it
    monkeypatch.setattr(writer, "CLOSE_WAIT_S", 0.1)
    monkeypatch.setattr(sender, "FINISH_WAIT_S", 4 * DEADLINE_S)
    before = set(threading.enumerate())
    run = runwatch.init("team", name="late", dir=tmp_path / "runs", server=proxy.url)
    assert run.dir is not None
    (writing,) = (t for t in set(threading.enumerate()) - before if t.name == "runwatch-writer")
    os.mkfifo(run.dir / f"{SAMPLE}.tmp")
    run.log({"loss": 1.0}, step=0)
    wait_for(proxy.held.is_set, what="the sender's first request to wait for its answer")
    run.log_samples(0, [{"prompt": "p", "completion": "c"}])
    finishing = threading.Thread(target=run.finish)
    with pytest.warns(RuntimeWarning, match="still being written"):
        finishing.start()
        wait_for(lambda: _waits_in(finishing, sender.Sender.close.__code__),
                 what="finish() to give up on the writer and wait for the sender")
        # a reader lets the writer's open() return: it writes the rest and the run's end
        fifo = os.open(run.dir / f"{SAMPLE}.tmp", os.O_RDONLY | os.O_NONBLOCK)
        try:
            writing.join(DEADLINE_S)
            assert not writing.is_alive(), "the writer did not end once its disk took writes"
            assert b'"completion":"c"' in os.read(fifo, 1 << 16)
        finally:
            os.close(fifo)
        assert finishing.is_alive(), "finish() stopped waiting on a sender it holds"
        files = _files(run.dir)
        # while the sender's answer is on its way, no one else may hold the folder
        taken = _take(run.dir)
        proxy.release.set()
        finishing.join(DEADLINE_S)
        assert not finishing.is_alive(), "finish() did not end once the server answered"
    if taken is not None:
        taken.release()
        changed = sorted(k for k, v in _files(run.dir).items() if files.get(k) != v)
        pytest.fail(f"the folder was free while finish() still waited on its sender, which "
                    f"then wrote {changed} into it")
    _take_now(run.dir)
    # nothing recorded is lost: the server holds all of it, the run's end included
    assert stored(engine, run.id) == in_folder(run.dir)
    last = loads_line((run.dir / fmt.EVENTS).read_bytes().splitlines()[-1])
    assert last["phase"] == "SUCCEEDED"
    assert run.dropped_lines == 0


def test_a_sender_stuck_writing_its_offsets_keeps_the_folder_until_the_write_lands(
        tmp_path: Path, server: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sender, "FINISH_WAIT_S", 0.1)
    monkeypatch.setattr(sender, "LET_GO_WAIT_S", 0.1)
    before = set(threading.enumerate())
    run = runwatch.init("team", name="stuck", dir=tmp_path / "runs", server=server.url)
    assert run.dir is not None
    (sending,) = (t for t in set(threading.enumerate()) - before if t.name == "runwatch-sender")
    state = run.dir / fmt.STATE_DIR / upload.STATE_FILE
    state.parent.mkdir(exist_ok=True)
    os.mkfifo(state.with_name(state.name + ".tmp"))
    run.log({"loss": 1.0}, step=0)
    wait_for(lambda: _waits_in(sending, atomic.write_atomic.__code__),
             what="the sender to be stuck writing its offsets")
    with pytest.warns(RuntimeWarning, match="has not taken all"):
        run.finish()
    taken = _take(run.dir)
    if taken is not None:
        taken.release()
        pytest.fail("the folder was free while the sender's offsets were still to be written")
    fifo = os.open(state.with_name(state.name + ".tmp"), os.O_RDONLY | os.O_NONBLOCK)
    try:
        sending.join(DEADLINE_S)
        assert not sending.is_alive(), "the sender did not end once its disk took writes"
        assert os.read(fifo, 1 << 16).startswith(b"{")
    finally:
        os.close(fifo)
    _take_now(run.dir)


def _waits_in(thread: threading.Thread, code: CodeType) -> bool:
    """Whether `thread` is inside a call of the function whose code is `code` now."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def _take(run_dir: Path) -> RunLock | None:
    """The folder's lock, as a resumed run would take it; None while a process holds it."""
    try:
        return RunLock(run_dir)
    except fmt.RunDirError:
        return None


def _take_now(run_dir: Path) -> None:
    """Fail unless the folder is free now."""
    lock = _take(run_dir)
    assert lock is not None, "the folder is still locked once nothing writes into it"
    lock.release()


def _files(run_dir: Path) -> dict[str, int]:
    return {str(p.relative_to(run_dir)): p.lstat().st_mtime_ns for p in run_dir.rglob("*")}

