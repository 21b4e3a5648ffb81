"""Cancelling a running job: CANCEL_REQUESTED at once, then SIGTERM to the job's whole
process group, the grace period, SIGKILL, and CANCELLED once the group is gone."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from runwatch.jobs import control
from tests.support.jobs import events, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, group_gone, pid_alive, workers

__all__ = ["workers"]  # the fixture

# Trains until stopped: the SDK records CANCEL_REQUESTED on SIGTERM, unwinds, and
# finishes CANCELLED.
TRAIN_FOREVER = """
import time, runwatch
run = runwatch.init(project="p")
run.set_phase("RUNNING")
step = 0
with run:
    while True:
        run.log({"train/loss": 1.0}, step=step)
        step += 1
        time.sleep(0.05)
"""

# A job whose process and its child both note SIGTERM and carry on, so only SIGKILL
# ends them; each writes its pid, then "up" once its handler is in place.
STUBBORN_CHILD = """
import os, signal, time
def noted(*_):
    open(f"term-{os.getpid()}", "w").close()
signal.signal(signal.SIGTERM, noted)
open(f"pid-child", "w").write(str(os.getpid()))
while True:
    time.sleep(0.05)
"""
STUBBORN = f"""
import os, signal, subprocess, sys, time
def noted(*_):
    open(f"term-{{os.getpid()}}", "w").close()
signal.signal(signal.SIGTERM, noted)
open("pid-main", "w").write(str(os.getpid()))
subprocess.Popen([sys.executable, "-c", {STUBBORN_CHILD!r}])
while True:
    time.sleep(0.05)
"""


def test_cancel_while_running_is_requested_then_cancelled(engine: Engine, db_url: str,
                                                          runs_dir: Path, workers: Workers,
                                                          tmp_path: Path) -> None:
    run = submit_command(engine, runs_dir, "train", TRAIN_FOREVER)
    workers.start(runs_dir, db_url)
    wait_for(lambda: (run_row(engine, "train").observed_step or 0) >= 2,
             what="the job to train")
    assert control.cancel(engine, run_row(engine, "train")).phase == "CANCEL_REQUESTED"
    assert run_row(engine, "train").status == "CANCEL_REQUESTED"
    wait_for(lambda: run_row(engine, "train").status == "CANCELLED", what="the cancel")
    phases = [ev["phase"] for ev in events(run.dir)]
    assert phases[:3] == ["QUEUED", "PREPARING", "RUNNING"]
    assert phases[-2:] == ["CANCEL_REQUESTED", "CANCELLED"]
    assert events(run.dir)[-1]["code"] == "cancelled"
    assert run_row(engine, "train").reason_code == "cancelled"


def test_a_job_that_ignores_sigterm_is_killed_with_its_group_after_the_grace(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, tmp_path: Path) -> None:
    run = submit_command(engine, runs_dir, "stubborn", STUBBORN)
    workers.start(runs_dir, db_url, grace_s=1.0)
    pids = wait_for(lambda: _pids(runs_dir), what="the job and its child to start")
    assert pids is not None
    assert control.cancel(engine, run_row(engine, "stubborn")).phase == "CANCEL_REQUESTED"
    wait_for(lambda: run_row(engine, "stubborn").status == "CANCELLED", what="the cancel")
    # both got SIGTERM (the whole group), noted it and went on; SIGKILL ended them
    for pid in pids:
        assert (runs_dir / f"term-{pid}").exists(), f"pid {pid} got no SIGTERM"
        assert not pid_alive(pid)
    assert group_gone(pids[0])
    last = events(run.dir)[-1]
    assert (last["phase"], last["code"]) == ("CANCELLED", "cancelled")
    # a command without the SDK records no CANCEL_REQUESTED of its own: its worker does,
    # so the grace it stopped in is not counted as PREPARING (found in a trial)
    assert [ev["phase"] for ev in events(run.dir)][-3:] == [
        "PREPARING", "CANCEL_REQUESTED", "CANCELLED"]


def _pids(runs_dir: Path) -> list[int] | None:
    """The pids of the stubborn job and its child, once both have written theirs."""
    texts = [(runs_dir / f"pid-{who}").read_text() if (runs_dir / f"pid-{who}").exists()
             else "" for who in ("main", "child")]
    return [int(t) for t in texts] if all(texts) else None
