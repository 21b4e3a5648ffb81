"""One run folder, one recording process: a second `init` of a run that a live process
records (new or `resume=True`) is refused with what to do, and the lock goes with the
process that held it, however it ended."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import runwatch
from runwatch.rundir import format as fmt
from tests.support import first_line

# Records a run: prints "ready" once init returned, logs 500 steps, then waits for a
# line on stdin before finishing. A refused init prints the error and exits 3. Each
# wait has a deadline of WAIT_S: past it the child exits 1, saying what it waited for.
WAIT_S = 60
CHILD = textwrap.dedent(f"""
    import os, select, sys, time, runwatch
    from runwatch.rundir.format import RunDirError
    runs, resume, go = sys.argv[1], sys.argv[2] == "resume", sys.argv[3]
    deadline = time.monotonic() + {WAIT_S}
    while go != "-" and not os.path.exists(go):
        if time.monotonic() > deadline:
            sys.exit("the go file did not appear within {WAIT_S} s")
        time.sleep(0.001)
    try:
        run = runwatch.init(name="same", dir=runs, resume=resume)
    except RunDirError as exc:
        print("refused", exc, flush=True)
        sys.exit(3)
    print("ready", flush=True)
    for step in range(500):
        run.log({{"pid": float(os.getpid())}}, step=step)
    if not select.select([sys.stdin], [], [], {WAIT_S})[0]:
        sys.exit("no line on stdin within {WAIT_S} s")
    sys.stdin.readline()
    run.finish()
""")


@pytest.fixture
def start() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Starts CHILD processes; any still running when the test ends is killed."""
    procs: list[subprocess.Popen[str]] = []

    def go(runs_dir: Path, resume: bool, go: str = "-") -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(runs_dir),
                                 "resume" if resume else "new", go],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        return proc

    yield go
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)


def end(proc: subprocess.Popen[str]) -> int:
    """Let a child that is recording finish, and its exit status."""
    proc.communicate("\n", timeout=60)
    return proc.returncode


def metric_lines(runs_dir: Path) -> list[dict[str, float]]:
    text = (runs_dir / "same" / fmt.METRICS).read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_resume_of_a_run_another_process_records_is_refused(runs_dir: Path,
        start: Callable[..., subprocess.Popen[str]]) -> None:
    first = start(runs_dir, resume=False)
    assert first_line(first, what="the first process to start its run") == "ready"
    second = start(runs_dir, resume=True)
    said = first_line(second, what="the second process's answer")
    assert said.startswith("refused") and "is being recorded" in said
    assert second.wait(timeout=60) == 3
    assert f"pid {first.pid}" in said, "the error names the process that holds the run"
    assert end(first) == 0
    recs = metric_lines(runs_dir)
    assert [r["seq"] for r in recs] == list(range(500))
    assert {r["pid"] for r in recs} == {float(first.pid)}

    # Finished, the run can be resumed: the lock went with the first process.
    third = start(runs_dir, resume=True)
    assert first_line(third, what="a resume after the first process finished") == "ready"
    assert end(third) == 0
    assert [r["seq"] for r in metric_lines(runs_dir)] == list(range(1000))


def test_processes_starting_one_run_at_the_same_instant_leave_one_writer(
        runs_dir: Path, tmp_path: Path, start: Callable[..., subprocess.Popen[str]]) -> None:
    go = tmp_path / "go"
    procs = [start(runs_dir, resume=resume, go=str(go)) for resume in (False, True) * 2]
    go.touch()
    answers = [first_line(p, what="each process's init") for p in procs]
    ready = [p for p, said in zip(procs, answers, strict=True) if said == "ready"]
    assert len(ready) == 1, answers
    for p, said in zip(procs, answers, strict=True):
        if p is not ready[0]:
            assert p.wait(timeout=60) == 3 and said.startswith("refused"), said
    assert end(ready[0]) == 0
    recs = metric_lines(runs_dir)
    assert [r["seq"] for r in recs] == list(range(500))
    assert {r["pid"] for r in recs} == {float(ready[0].pid)}


def test_a_killed_process_leaves_no_lock_behind(runs_dir: Path,
        start: Callable[..., subprocess.Popen[str]]) -> None:
    first = start(runs_dir, resume=False)
    assert first_line(first, what="the first process to start its run") == "ready"
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=60)
    with runwatch.init(name="same", dir=runs_dir, resume=True) as run:
        run.log({"pid": 0.0})
    assert metric_lines(runs_dir)[-1]["pid"] == 0.0


def test_a_run_held_in_this_process_is_refused_too(runs_dir: Path) -> None:
    with runwatch.init(name="same", dir=runs_dir), \
            pytest.raises(fmt.RunDirError, match=r"this process records .* already"):
        runwatch.init(name="same", dir=runs_dir, resume=True)
    runwatch.init(name="same", dir=runs_dir, resume=True).finish()
