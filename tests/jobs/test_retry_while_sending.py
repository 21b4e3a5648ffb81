"""A retry of a run that shows ended waits for its process's last send instead of
answering busy.

A job's process that streams to a team server (RUNWATCH_SERVER) records its end, then
`finish()` waits up to the sender's FINISH_WAIT_S (15 s) for the last records to go out,
holding the run folder's lock. The index shows the run ended as soon as the end is
written, so the web app offers Retry; the retry waited 10 s for the folder and answered
503 ("being recorded by a live process ... try again in a moment", RunBusy). Now a retry
waits as long as a finishing process can hold the folder. Here the team server does not
answer (a closed port), so the last send takes the whole finish wait: the job sets it to
HOLD_S (RUNWATCH_FINISH_WAIT_S), long enough for the test to see the run ended while its
process holds the folder, and the retry waits for that hold however long it is.
"""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import Engine

from runwatch.ingest import Indexer
from runwatch.jobs import control
from runwatch.jobs.worker import Worker
from runwatch.server.runner import free_port
from tests.support.jobs import events, job, run_row, submit_command
from tests.support.wait import DEADLINE_S, wait_for
from tests.support.workers import FAST, group_gone

# How long the job's finish() waits for its last send (RUNWATCH_FINISH_WAIT_S): its
# process holds the folder that long after the run shows ended.
HOLD_S = 4


def test_a_retry_while_the_ended_run_still_sends_waits_for_it(
        engine: Engine, runs_dir: Path) -> None:
    closed = free_port()  # nothing listens there: every send is refused
    train = (f"import os, runwatch\nos.environ['RUNWATCH_FINISH_WAIT_S'] = '{HOLD_S}'\n"
             f"run = runwatch.init(server='http://127.0.0.1:{closed}')\n"
             "run.log({'loss': 1.0})\nrun.finish()\n")
    run = submit_command(engine, runs_dir, "sending", train)
    worker = Worker(engine, runs_dir, indexer=Indexer(engine, runs_dir), **FAST)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run_forever, args=(stop,), daemon=True)
    thread.start()
    try:
        started = wait_for(lambda: (row := job(engine, "sending")) and row["pid"],
                           what="the job to start")
        assert isinstance(started, int)  # the row's pid: a row is never an empty dict
        pid = int(started)
        wait_for(lambda: run_row(engine, "sending").status == "SUCCEEDED",
                 what="the run to show ended")
        assert not group_gone(pid), "its process should still be sending"
        assert control.retry(engine, run_row(engine, "sending"), runs_dir).phase == "QUEUED"
        # the retry's QUEUED follows the end (a worker may have started attempt 2 since)
        phases = [(ev["phase"], ev.get("attempt")) for ev in events(run.dir)]
        assert phases[phases.index(("QUEUED", 2)) - 1] == ("SUCCEEDED", None), phases
    finally:
        stop.set()
        thread.join(DEADLINE_S)
