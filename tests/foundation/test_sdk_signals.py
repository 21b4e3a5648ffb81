"""SIGTERM while a run records: the SDK records CANCEL_REQUESTED, unwinds the loop like
Ctrl-C and ends the run CANCELLED (code "cancelled"), for a job and a hand-started run
alike; the handler is the main thread's only while a run is live, chains a handler the
process had, and the one it replaced comes back when the run finishes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import runwatch
from runwatch.jobs.failures import CATALOGUE
from tests.support import first_line

STOPPED = CATALOGUE["cancelled"].sentence
CHILD_TIMEOUT_S = 60

# A training loop that logs until it is stopped; "ready" once its first steps are on disk.
LOOP = """
import signal, sys, time, runwatch
{setup}
run = runwatch.init(name="job", dir=sys.argv[1], flush_interval=0.05)
{enter}
    step = 0
    while {condition}:
        try:
            run.log({{"loss": 1.0 / (step + 1)}}, step=step)
        except Exception:  # a loop that swallows its own errors still stops
            pass
        if step == 5:
            run._writer.flush_now()
            time.sleep(0.3)
            print("ready", flush=True)
        step += 1
        time.sleep(0.01)
{after}
"""


@contextlib.contextmanager
def _child(code: str, runs_dir: Path) -> Iterator[subprocess.Popen[str]]:
    """A Python child in its own process group, killed (group and all) however the test ends."""
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), str(runs_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=CHILD_TIMEOUT_S)


def _stopped(code: str, runs_dir: Path) -> tuple[int, str, str]:
    """Start `code`, SIGTERM it once it is ready, and return (returncode, stdout, stderr)."""
    with _child(code, runs_dir) as proc:
        assert first_line(proc, what="the child's loop to log its first steps") == "ready"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
        return proc.returncode, out, err


def _events(runs_dir: Path) -> list[dict]:
    path = runs_dir / "job" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_sigterm_ends_a_with_block_run_cancelled(runs_dir: Path) -> None:
    code = LOOP.format(setup="", enter="with run:", condition="True",
                       after="print('unreachable', flush=True)")
    returncode, out, err = _stopped(code, runs_dir)
    assert returncode != 0 and "unreachable" not in out
    events = _events(runs_dir)
    assert [e["phase"] for e in events] == ["RUNNING", "CANCEL_REQUESTED", "CANCELLED"]
    assert (events[-1]["code"], events[-1]["reason"]) == ("cancelled", STOPPED)
    # the loop unwound through StopRequested, as on Ctrl-C; asked to stop, not crashed, the
    # process says so in one line that names where it stopped (it printed a traceback of
    # the SDK's signal handler)
    assert "Traceback" not in err and "StopRequested" not in err, err
    assert re.fullmatch(r"runwatch: SIGTERM asked this process to stop \(a cancel, or a stop "
                        r"from outside\); it stopped at <string>:\d+ \(<module>\), and its "
                        r"run records the stop", err.strip().splitlines()[-1]), err
    logs = [json.loads(line) for line in (runs_dir / "job" / "logs.jsonl").read_text()
            .splitlines()]
    assert [(e["level"], "SIGTERM" in e["message"]) for e in logs] == [("warning", True)]
    steps = [json.loads(line)["step"] for line in (runs_dir / "job" / "metrics.jsonl")
             .read_text().splitlines()]
    assert steps == list(range(len(steps))) and len(steps) >= 6, "what it logged is on disk"


def test_sigterm_ends_a_hand_started_run_without_with_cancelled(runs_dir: Path) -> None:
    code = LOOP.format(setup="", enter="if True:", condition="True", after="run.finish()")
    returncode, _, _ = _stopped(code, runs_dir)
    assert returncode != 0
    events = _events(runs_dir)
    assert [e["phase"] for e in events] == ["RUNNING", "CANCEL_REQUESTED", "CANCELLED"]
    assert events[-1]["code"] == "cancelled"


@pytest.mark.parametrize(("enter", "end"), [("with run:", ""), ("if True:", "run.finish()")],
                         ids=["with", "finish"])
def test_a_handler_the_process_had_runs_and_decides_how_the_loop_stops(
        runs_dir: Path, enter: str, end: str) -> None:
    # A framework's graceful stop: its handler sets a flag, the loop ends at the next step.
    setup = """
stop = []
def graceful(signum, frame):
    stop.append(signum)
signal.signal(signal.SIGTERM, graceful)
"""
    code = LOOP.format(
        setup=setup, enter=enter, condition="not stop",
        after=f"{end}\nprint('handler', stop, signal.getsignal(signal.SIGTERM) is graceful, "
              "flush=True)")
    returncode, out, _ = _stopped(code, runs_dir)
    assert returncode == 0
    assert out.splitlines()[-1] == "handler [15] True", "ours chained theirs, theirs is back"
    events = _events(runs_dir)
    assert [e["phase"] for e in events] == ["RUNNING", "CANCEL_REQUESTED", "CANCELLED"]
    assert events[-1]["code"] == "cancelled", "a loop that stops on SIGTERM did not succeed"


@pytest.mark.parametrize("finish", [
    "run.finish()", "t = threading.Thread(target=run.finish); t.start(); t.join()",
], ids=["main-thread", "other-thread"])
def test_after_the_run_finishes_sigterm_ends_the_process_as_before(runs_dir: Path,
                                                                   finish: str) -> None:
    code = f"""
        import os, signal, sys, threading, runwatch
        run = runwatch.init(name="job", dir=sys.argv[1])
        {finish}
        os.kill(os.getpid(), signal.SIGTERM)
        print("survived", flush=True)
    """
    with _child(code, runs_dir) as proc:
        out, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
    assert (proc.returncode, out) == (-signal.SIGTERM, ""), err
    assert _events(runs_dir)[-1]["phase"] == "SUCCEEDED"


def test_the_handler_is_in_only_while_a_run_is_live(runs_dir: Path) -> None:
    def theirs(signum: int, frame: object) -> None:
        raise AssertionError("not called in this test")

    before = signal.getsignal(signal.SIGTERM)
    try:
        for previous in (signal.SIG_DFL, theirs):
            signal.signal(signal.SIGTERM, previous)
            with runwatch.init(name=f"live-{id(previous)}", dir=runs_dir):
                assert signal.getsignal(signal.SIGTERM) not in (previous, before)
            assert signal.getsignal(signal.SIGTERM) == previous
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a process that ignores SIGTERM
        with runwatch.init(name="ignored", dir=runs_dir):
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        first = runwatch.init(name="first", dir=runs_dir)
        second = runwatch.init(name="second", dir=runs_dir)
        ours = signal.getsignal(signal.SIGTERM)
        first.finish()
        assert signal.getsignal(signal.SIGTERM) is ours, "a run is still live"
        second.finish()
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_run_started_off_the_main_thread_installs_no_handler(runs_dir: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def record() -> None:
        with runwatch.init(name="threaded", dir=runs_dir):
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=record)
    thread.start()
    thread.join(CHILD_TIMEOUT_S)
    assert seen == [before] and signal.getsignal(signal.SIGTERM) == before


def test_sigterm_in_this_process_unwinds_as_stop_requested(runs_dir: Path) -> None:
    # in a child: the test runner's own process (an xdist worker) must not take a signal
    # whose handler raises a KeyboardInterrupt
    code = """
        import signal, sys, runwatch
        from runwatch.sdk import StopRequested
        before = signal.getsignal(signal.SIGTERM)
        try:
            with runwatch.init(name="job", dir=sys.argv[1]) as run:
                run.log({"loss": 1.0}, step=0)
                signal.raise_signal(signal.SIGTERM)
            print("not raised")
        except StopRequested as exc:
            print("raised", isinstance(exc, KeyboardInterrupt),
                  signal.getsignal(signal.SIGTERM) == before)
    """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), str(runs_dir)],
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    assert proc.stdout.split() == ["raised", "True", "True"], proc.stdout + proc.stderr
    assert [e["phase"] for e in _events(runs_dir)] == ["RUNNING", "CANCEL_REQUESTED",
                                                      "CANCELLED"]
