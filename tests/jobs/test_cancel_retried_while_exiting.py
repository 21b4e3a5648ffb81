"""A cancel of an attempt retried while the ended attempt's process still exits is the new
attempt's: the old process, which recorded its end and goes on with its work after
finish() (its last send to a team server, a checkpoint upload), is left to exit, and the
cancel's answer does not say that a process is told to stop.

Found in a trial (trial35, defect 4): `runs retry` then `runs cancel` right after a run
SUCCEEDED SIGTERMed attempt 1's process partway through its upload, since the worker that
still held the job read the cancel as one of the process it watched; and the worker's log
had no line for the end of either attempt.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from runwatch.jobs import control
from runwatch.rundir import format as fmt
from tests.support.jobs import events, job, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, pid_alive, workers

__all__ = ["workers"]  # the fixture


def lingering(tmp_path: Path) -> str:
    """An SDK job that finishes, then works on until the file `gate` appears; it notes its
    pid, and a SIGTERM it gets after finish() in the file `sigterm`."""
    return f"""
import os, signal, sys, time
import runwatch
run = runwatch.init(project="p")
run.log({{"train/loss": 1.0}}, step=0)
run.finish()
def stopped(*_):
    open({str(tmp_path / "sigterm")!r}, "w").write("1")
    sys.exit(1)
signal.signal(signal.SIGTERM, stopped)
print("finished; uploading the checkpoint", flush=True)
open({str(tmp_path / "pid")!r}, "w").write(str(os.getpid()))
while not os.path.exists({str(tmp_path / "gate")!r}):
    time.sleep(0.05)
print("upload done", flush=True)
"""


def test_a_cancel_of_the_retried_attempt_leaves_the_finished_attempt_s_process_alone(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers,
        tmp_path: Path) -> None:
    run = submit_command(engine, runs_dir, "linger", lingering(tmp_path))
    log = tmp_path / "worker.log"
    workers.start(runs_dir, db_url, devices=2, log=log)
    wait_for(lambda: run_row(engine, "linger").status == "SUCCEEDED",
             what="attempt 1 to record SUCCEEDED")
    pid = int(wait_for(lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text(),
                       what="attempt 1 to go on after finish()"))

    assert control.retry(engine, run.run_pk).phase == "QUEUED"
    cancel = control.cancel(engine, run.run_pk)
    assert cancel == control.Outcome("CANCEL_REQUESTED", control.NOT_STARTED), cancel
    # A job submitted after the cancel, which the worker starts and concludes: its loop
    # watched the held job after the cancel by then (each pass watches its jobs in the
    # order it claimed them, the held one first, before it concludes the later one).
    submit_command(engine, runs_dir, "after", "pass")
    wait_for(lambda: run_row(engine, "after").status == "SUCCEEDED",
             what="the job submitted after the cancel to end")
    wait_for(lambda: (job(engine, "after") or {}).get("worker_id", "") is None,
             what="the worker to conclude it")
    assert not (tmp_path / "sigterm").exists(), "attempt 1's process was told to stop"
    assert pid_alive(pid)
    assert run_row(engine, "linger").status == "CANCEL_REQUESTED"

    (tmp_path / "gate").touch()  # its upload is done: it exits, and attempt 2 ends
    wait_for(lambda: run_row(engine, "linger").status == "CANCELLED",
             what="attempt 2 to end CANCELLED once attempt 1's process has gone")
    assert [(e["phase"], e.get("attempt")) for e in events(run.dir)][-3:] == [
        ("SUCCEEDED", None), ("QUEUED", 2), ("CANCELLED", 2)]
    output = (fmt.attempt_dir(run.dir, 1) / fmt.OUTPUT_LOG).read_text()
    assert output.endswith("finished; uploading the checkpoint\nupload done\n"), output
    assert not (fmt.attempt_dir(run.dir, 2) / fmt.OUTPUT_LOG).exists()
    # the worker says how each attempt ended
    wait_for(lambda: "linger attempt 2: CANCELLED" in log.read_text(),
             what="the worker's log line for attempt 2")
    said = log.read_text()
    assert "linger attempt 1: SUCCEEDED; its process has exited" in said, said
