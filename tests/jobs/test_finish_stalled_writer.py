"""A run's folder stays locked while its writer still writes, even after `finish()` gave up
waiting for it.

`finish()` waits 30 s for the background writer to write what is queued and the run's
end. On a stalled disk (a hung network filesystem) the writer can still be writing
then; `finish()` used to release the folder's lock anyway, so job control (a retry's
next attempt, a cancel's event) or a resumed run wrote into the folder beside the
writer, which went on appending the old attempt's records to the new one's files. Now
the lock stays held until the process exits (the kernel lets it go then).

The stalled disk is a real one for the writer: its logs file is a FIFO nobody reads, so
the writer's open() blocks in the kernel, as on a hung filesystem.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runwatch.rundir import format as fmt
from runwatch.sdk.lock import RunLock
from tests.support import first_line

# Records a run whose logs file is a FIFO, finishes it, says so, then waits for a line
# on stdin before exiting (each wait with a deadline).
STALLED = textwrap.dedent("""
    import os, select, sys, runwatch
    run = runwatch.init(name="stalled", dir=sys.argv[1])
    os.mkfifo(run.dir / "logs.jsonl")
    run.log_text("the writer blocks opening its logs file")
    run.finish()
    print("finished", flush=True)
    if not select.select([sys.stdin], [], [], 120)[0]:
        sys.exit("no line on stdin within 120 s")
""")


@pytest.mark.slow
def test_finish_keeps_the_folder_locked_while_its_writer_still_writes(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", STALLED, str(tmp_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    run_dir = tmp_path / "stalled"
    try:
        # finish() waits 30 s for the writer before it returns
        assert first_line(proc, what="finish() to return", deadline=90) == "finished"
        with pytest.raises(fmt.RunDirError, match="being recorded by a live process"):
            RunLock(run_dir)
    finally:
        fifo = None
        if (run_dir / "logs.jsonl").exists():
            # a reader lets the writer's open() return: it writes the rest and stops
            fifo = os.open(run_dir / "logs.jsonl", os.O_RDONLY | os.O_NONBLOCK)
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.close()
        proc.wait(timeout=60)
        if fifo is not None:
            os.close(fifo)
    assert proc.returncode == 0
    RunLock(run_dir).release()  # the process is gone: so is its lock
