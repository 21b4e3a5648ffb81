"""Waiting for something that happens elsewhere (a thread, a subprocess, the server), always
with a deadline, and failing with what was waited for instead of hanging."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

T = TypeVar("T")
# Long enough for a loaded CI machine; a wait only ever takes this long when it fails.
DEADLINE_S = 30.0


def wait_for(predicate: Callable[[], T], *, what: str, deadline: float = DEADLINE_S,
             interval: float = 0.02) -> T:
    """Call `predicate` until it returns something truthy and return that; fail the test
    naming `what` when `deadline` seconds pass first."""
    end = time.monotonic() + deadline
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > end:
            pytest.fail(f"gave up after {deadline:g} s waiting for {what}")
        time.sleep(interval)


def _read(proc: subprocess.Popen[str], read: Callable[[Any], str], what: str,
          deadline: float) -> str:
    """`read(proc.stdout)` in a thread; fail the test naming `what` when it has not
    returned within `deadline` seconds (the process is then killed)."""
    assert proc.stdout is not None, "start the process with stdout=subprocess.PIPE"
    stdout = proc.stdout
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(read(stdout)), daemon=True)
    reader.start()
    reader.join(deadline)
    if not got:
        proc.kill()
        pytest.fail(f"gave up after {deadline:g} s waiting for {what}")
    return got[0]


def first_line(proc: subprocess.Popen[str], *, what: str, deadline: float = DEADLINE_S) -> str:
    """The next line `proc` writes to its stdout pipe, stripped; fail the test naming `what`
    when none comes within `deadline` seconds (the process is then killed)."""
    return _read(proc, lambda f: f.readline(), what, deadline).strip()


def rest_of_output(proc: subprocess.Popen[str], *, what: str,
                   deadline: float = DEADLINE_S) -> str:
    """What `proc` writes to its stdout pipe from here until it exits, read through the
    same buffered pipe `first_line` reads (`Popen.communicate` with a timeout reads the raw
    pipe, and loses the lines that buffer took in with the first one); fail the test
    naming `what` when it has not exited within `deadline` seconds (it is then killed)."""
    out = _read(proc, lambda f: f.read(), what, deadline)
    proc.wait(deadline)
    return out
