"""The app's Retry waits for a finishing process as long as job control does.

`create_app` defaulted its retry wait to the run folder's append wait (10 s), while job
control and `runwatch server` wait RETRY_WAIT_S (20 s: as long as a finishing job's last
send can hold its folder). An app made without the setting answered 503 to a retry of a
run that already showed ended; it now has one default, job control's. The job here
streams to a team server that does not answer (a closed port), so its finish() holds the
folder for the sender's whole finish wait after the run shows SUCCEEDED: HOLD_S here
(RUNWATCH_FINISH_WAIT_S), and FINISH_WAIT_S at most, which the app's wait outlasts.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from runwatch.jobs import control
from runwatch.sdk.sender import FINISH_WAIT_S
from runwatch.server.app import create_app
from runwatch.server.runner import free_port
from tests.support.jobs import events, job, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, group_gone, workers

from .apiclient import Api

__all__ = ["workers"]  # the fixture

# How long the job's finish() waits for its last send (RUNWATCH_FINISH_WAIT_S): its
# process holds the folder that long after the run shows ended.
HOLD_S = 4


def test_the_apps_retry_of_an_ended_run_still_sending_waits_for_it(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers) -> None:
    closed = free_port()  # nothing listens there: every send is refused
    train = (f"import os, runwatch\nos.environ['RUNWATCH_FINISH_WAIT_S'] = '{HOLD_S}'\n"
             f"run = runwatch.init(server='http://127.0.0.1:{closed}')\n"
             "run.log({'loss': 1.0})\nrun.finish()\n")
    run = submit_command(engine, runs_dir, "sending", train)
    workers.start(runs_dir, db_url)
    started = wait_for(lambda: (row := job(engine, "sending")) and row["pid"],
                       what="the job to start")
    assert isinstance(started, int)  # the row's pid: a row is never an empty dict
    pid = int(started)
    wait_for(lambda: run_row(engine, "sending").status == "SUCCEEDED",
             what="the run to show ended")
    assert not group_gone(pid), "its process should still be sending"
    app = create_app(engine, runs_dir=runs_dir)
    # made without the setting, it waits as long as job control, which outlasts the
    # longest finish wait (the run folder's append wait does not)
    assert app.state.runwatch.lock_wait_s == control.RETRY_WAIT_S > FINISH_WAIT_S
    answer = Api(app).post(f"/api/runs/{run.name}/retry", json={})
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "QUEUED"
    # the retry's QUEUED follows the end (a worker may have started attempt 2 since)
    phases = [(ev["phase"], ev.get("attempt")) for ev in events(run.dir)]
    assert phases[phases.index(("QUEUED", 2)) - 1] == ("SUCCEEDED", None), phases
