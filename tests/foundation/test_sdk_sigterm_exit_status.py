"""A process whose run SIGTERM stopped ends as SIGTERM ends a process (killed by it: -15,
143 in a shell), as Ctrl-C's ends killed by SIGINT, once the run's end is recorded and the
interpreter has done all it does at exit; a loop that catches the stop keeps its own exit.

Found in a trial (trial37, defect 2): docs/sdk.md said the process ends as on Ctrl-C, and
it exited 1 (the uncaught StopRequested), which a scheduler, a job runner or `timeout`
reads as an ordinary failure."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import first_line

CHILD_TIMEOUT_S = 60

# What runs before and after the loop, to show that the whole exit still happens: an atexit
# function registered before the run and one after it, and a file left open whose buffered
# text only the interpreter's own clean-up writes.
SCRIPT = """
import atexit, sys, time, runwatch
from runwatch.sdk import StopRequested
out = sys.argv[1]
atexit.register(lambda: open(out + "/before.txt", "w").write("ran"))
left_open = open(out + "/left_open.txt", "w")
left_open.write("flushed at exit")
run = runwatch.init(name="job", dir=out + "/runs", flush_interval=0.05)
atexit.register(lambda: open(out + "/after.txt", "w").write("ran"))
{body}
"""
LOOP = """
    for step in range(100_000):
        run.log({"loss": 1.0}, step=step)
        if step == 5:
            run._writer.flush_now()
            print("ready", flush=True)
        time.sleep(0.01)
"""
BODIES = {
    "with": "with run:" + LOOP,
    "unfinished": "if True:" + LOOP,  # no finish(): the exit's atexit ends the run
    "caught-exit-3": "try:\n    with run:" + textwrap.indent(LOOP, "    ")
                     + "except StopRequested:\n    print('caught', flush=True)\n"
                       "    sys.exit(3)",
    "caught-goes-on": "try:\n    with run:" + textwrap.indent(LOOP, "    ")
                      + "except StopRequested:\n    print('caught', flush=True)",
}


def _stopped(body: str, out: Path) -> tuple[int, str, str]:
    """Run the script with `body`, SIGTERM it once it logs, and return (returncode, stdout,
    stderr)."""
    code = SCRIPT.format(body=BODIES[body])
    proc = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert first_line(proc, what="the script to log its first steps") == "ready"
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=CHILD_TIMEOUT_S)
        return proc.returncode, stdout, stderr
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=CHILD_TIMEOUT_S)


def _end(out: Path) -> dict[str, object]:
    events = (out / "runs" / "job" / "events.jsonl").read_text().splitlines()
    last: dict[str, object] = json.loads(events[-1])
    return last


@pytest.mark.parametrize("body", ["with", "unfinished"])
def test_an_uncaught_stop_ends_the_process_killed_by_sigterm(body: str, tmp_path: Path) -> None:
    returncode, stdout, stderr = _stopped(body, tmp_path)
    assert returncode == -signal.SIGTERM, stderr
    assert stderr.strip().splitlines()[-1].startswith("runwatch: SIGTERM asked this process "
                                                      "to stop"), stderr
    end = _end(tmp_path)
    assert (end["phase"], end["code"]) == ("CANCELLED", "cancelled")
    # everything the interpreter does at exit was done before SIGTERM ended it
    for name in ("before.txt", "after.txt"):
        assert (tmp_path / name).read_text() == "ran", name
    assert (tmp_path / "left_open.txt").read_text() == "flushed at exit"
    assert stdout == "", stdout  # ("ready" was read before the signal)


@pytest.mark.parametrize(("body", "code"), [("caught-exit-3", 3), ("caught-goes-on", 0)])
def test_a_script_that_catches_the_stop_keeps_its_own_exit(body: str, code: int,
                                                           tmp_path: Path) -> None:
    returncode, stdout, stderr = _stopped(body, tmp_path)
    assert returncode == code, stderr
    assert stdout == "caught\n"
    assert _end(tmp_path)["phase"] == "CANCELLED"
