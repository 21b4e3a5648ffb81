"""A job cancelled before any process of it ran (cancelled while QUEUED) says so: its reason
is `cancelled_before_start`, and its advice is to retry it, not to resume it from a
checkpoint it cannot hold. A job cancelled once its process ran keeps `cancelled`.

Found in an audit (s40 hB, D3): a job cancelled while QUEUED read "Reason: the training
job was stopped", and its "What to do" said to resume it from its last checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import Engine

from runwatch.jobs import control, reaper
from runwatch.jobs.failures import CATALOGUE, RESUME, AttemptEnd, classify
from tests.support.cli import cli_here
from tests.support.jobs import events, run_row, submit_command


def test_a_job_cancelled_while_queued_reads_as_one_that_never_started(
        engine: Engine, db_url: str, runs_dir: Path) -> None:
    run = submit_command(engine, runs_dir, "qcancel")
    assert control.cancel(engine, run.run_pk, runs_dir).phase == "CANCELLED"
    last = events(run.dir)[-1]
    assert (last["phase"], last["code"], last["reason"]) == (
        "CANCELLED", "cancelled_before_start", "the training job was cancelled before it started")
    row = run_row(engine, "qcancel")
    assert (row.status, row.reason_code) == ("CANCELLED", "cancelled_before_start")

    where = ("--dir", str(runs_dir), "--db", db_url)
    shown = " ".join(cli_here("runs", "get", "qcancel", *where).stdout.split())
    assert "Reason: the training job was cancelled before it started" in shown, shown
    assert f"What to do: {CATALOGUE['cancelled_before_start'].what_to_do}" in shown, shown
    assert "was stopped" not in shown and "checkpoint" not in shown, shown
    failure = json.loads(cli_here("runs", "get", "qcancel", *where, "-o", "json").stdout
                         )["failure"]
    assert failure["code"] == "cancelled_before_start"
    assert "Retry the run" in failure["what_to_do"]
    assert "resume" not in failure["what_to_do"].lower()


def test_only_an_attempt_no_process_of_which_ran_is_cancelled_before_start() -> None:
    # what job control writes for a cancel before the start (control.cancel, a worker that
    # saw the cancel before it started the process, a reaper letting go of one)
    assert reaper.cancelled_event(2)["code"] == "cancelled_before_start"
    for never_ran in (AttemptEnd(cancel_requested=True),
                      # a Ray job runwatch gave up while the cluster kept it PENDING
                      AttemptEnd(devices_timed_out=True, cancel_requested=True),
                      AttemptEnd(start_failed=True, cancel_requested=True)):
        assert classify(never_ran).code == "cancelled_before_start", never_ran
    for ran in (AttemptEnd.from_returncode(-15, cancel_requested=True),
                AttemptEnd(exit_code=1, sdk_phase="CANCELLED", sdk_code="cancelled",
                           cancel_requested=True),
                AttemptEnd(stderr_tail="step 3\n", cancel_requested=True),
                # a lost worker's attempt may have run: it is not said never to have
                AttemptEnd(worker_lost=True, cancel_requested=True),
                AttemptEnd(signal=9, startup_timed_out=True, cancel_requested=True)):
        assert classify(ran).code == "cancelled", ran
    # a run that ran keeps the advice to resume it; one that never did is not told to
    assert RESUME in CATALOGUE["cancelled"].what_to_do
    assert "checkpoint" not in CATALOGUE["cancelled_before_start"].what_to_do
