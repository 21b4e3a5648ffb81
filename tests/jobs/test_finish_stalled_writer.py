"""A run's folder stays locked while its writer still writes, even after `finish()` gave up
waiting for it, and is let go once the writer is done.

`finish()` waits CLOSE_WAIT_S (30 s) for the background writer to write what is queued
and the run's end. On a stalled disk (a hung network filesystem) the writer can still be
writing then; `finish()` used to release the folder's lock anyway, so job control (a
retry's next attempt, a cancel's event) or a resumed run wrote into the folder beside
the writer, which went on appending the old attempt's records to the new one's files.
Now the lock stays held while the writer writes.

Once the stall clears, the writer writes the rest and the run's end, closes its files
and lets the folder go, while the process lives on (a notebook, a sweep of runs in one
process). `finish()` used to close the writer's files under it and count what the
thread had not written yet as lost (a "could not be written ... and are lost" warning
and `dropped_lines`, though the thread wrote them), and the folder stayed locked until
the process exited.

The stalled disk is a real one for the writer: its logs file is a FIFO nobody reads, so
the writer's open() blocks in the kernel, as on a hung filesystem, until the test opens
the FIFO for reading. The test shortens finish()'s wait to 1 s (CLOSE_WAIT_S, read when
finish() runs): the writer is stuck however long finish() waits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line
from runwatch.sdk.lock import RunLock
from tests.support import first_line
from tests.support.wait import wait_for

# Records a run whose logs file is a FIFO and finishes it, saying so; then, at each line
# on stdin (each waited for with a deadline), says what the run lost, and exits.
STALLED = textwrap.dedent("""
    import os, select, sys, runwatch
    from runwatch.sdk import writer
    writer.CLOSE_WAIT_S = 1.0

    def next_line():
        if not select.select([sys.stdin], [], [], 120)[0]:
            sys.exit("no line on stdin within 120 s")
        sys.stdin.readline()

    run = runwatch.init(name="stalled", dir=sys.argv[1])
    os.mkfifo(run.dir / "logs.jsonl")
    run.log_text("the writer blocks opening its logs file")
    run.finish()
    print("finished", flush=True)
    next_line()
    print(run.dropped_lines, flush=True)
    next_line()
""")
LINE = "the writer blocks opening its logs file"


def test_finish_keeps_the_folder_locked_while_its_writer_still_writes(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", STALLED, str(tmp_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stderr is not None
    run_dir = tmp_path / "stalled"
    fifo = None
    try:
        assert first_line(proc, what="finish() to return") == "finished"
        with pytest.raises(fmt.RunDirError, match="being recorded by a live process"):
            RunLock(run_dir)
        # a reader lets the writer's open() return: it writes the rest, the run's end last
        fifo = os.open(run_dir / "logs.jsonl", os.O_RDONLY | os.O_NONBLOCK)
        wait_for(lambda: _free(run_dir), what="the folder to be let go once its writer is done")
        assert proc.poll() is None, "the folder was let go only as the process exited"
        assert LINE in os.read(fifo, 1 << 16).decode()
        last = loads_line((run_dir / fmt.EVENTS).read_bytes().splitlines()[-1])
        assert last["phase"] == "SUCCEEDED" and "unwritten" not in last
        proc.stdin.write("report\n")
        proc.stdin.flush()
        assert first_line(proc, what="run.dropped_lines") == "0"
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        finally:
            if fifo is not None:
                os.close(fifo)
    errors = proc.stderr.read()
    assert proc.returncode == 0, errors
    assert "lost" not in errors, errors


def _free(run_dir: Path) -> bool:
    """Whether no process holds the run folder's lock now."""
    try:
        RunLock(run_dir).release()
    except fmt.RunDirError:
        return False
    return True
