"""Cancel and retry against a worker concluding the same job, on real folders and a real
index: each order of the two ends the run in a phase the folder records and the index
shows, and never leaves a job that nothing will claim or end.

Found by reading job control for values read in one step and acted on in a later one
(after a retry read its job before the folder's lock and handed it back to a worker that
had already let it go): a cancel of a retried run whose old process was still exiting
stayed CANCEL_REQUESTED for good; a cancel that landed while a worker concluded a failed
attempt was wiped by the requeue, so attempt 2 ran anyway; a cancel of a run requeued but
not yet indexed (the index still read RUNNING) left it QUEUED with nobody to claim it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from runwatch.ingest import Indexer
from runwatch.jobs import control, reaper
from runwatch.jobs.attempts import start_attempt
from runwatch.jobs.failures import AttemptEnd, classify
from runwatch.jobs.lifecycle import TransitionError
from runwatch.rundir.append import append_events, locked, write_events
from runwatch.store import jobs as q
from runwatch.store import queries as q_runs
from runwatch.store.jobs import Claim
from tests.support import first_line, wait_for
from tests.support.jobs import events, job, record_attempt, run_row, submit_command


def index(engine: Engine, runs_dir: Path) -> None:
    Indexer(engine, runs_dir).index_once()


def claimable(engine: Engine) -> str | None:
    with engine.begin() as conn:
        got = q.claim(conn, "other", 8, time.time())
    return None if got is None else got.name


def phases(run_dir: Path) -> list[tuple[str, int | None]]:
    return [(e["phase"], e.get("attempt")) for e in events(run_dir)]


def running(engine: Engine, runs_dir: Path, name: str, **fields: Any) -> tuple[Any, Claim]:
    """Job `name` claimed by worker "w", its attempt 1 RUNNING and indexed so."""
    run = submit_command(engine, runs_dir, name, **fields)
    with engine.begin() as conn:
        first = q.claim(conn, "w", 1, time.time())
    assert first is not None
    record_attempt(run.dir, 1, end=None)
    index(engine, runs_dir)
    return run, first


def failed(engine: Engine, runs_dir: Path, name: str) -> tuple[Any, Claim]:
    """Job `name` claimed by worker "w", whose attempt 1's process recorded FAILED and
    has not exited yet (w still holds the job), indexed so."""
    run = submit_command(engine, runs_dir, name)
    with engine.begin() as conn:
        first = q.claim(conn, "w", 1, time.time())
    assert first is not None
    record_attempt(run.dir, 1, "FAILED")
    index(engine, runs_dir)
    return run, first


def test_a_cancel_of_a_retried_run_whose_old_process_still_exits_ends_it_cancelled(
        engine: Engine, runs_dir: Path) -> None:
    run, first = failed(engine, runs_dir, "lingers")
    control.retry(engine, run.run_pk)  # attempt 2, held by w until the process has gone
    assert control.cancel(engine, run.run_pk).phase == "CANCEL_REQUESTED"
    # the process exits (w sent it SIGTERM): w concludes attempt 1 and lets the job go
    reaper.conclude(engine, first, "w", AttemptEnd(signal=15, cancel_requested=True),
                    lambda d: index(engine, runs_dir))
    assert phases(run.dir)[-3:] == [("FAILED", None), ("QUEUED", 2), ("CANCELLED", 2)]
    row = run_row(engine, "lingers")
    # attempt 2 never started
    assert (row.status, row.attempt, row.reason_code) == (
        "CANCELLED", 2, "cancelled_before_start")
    left = job(engine, "lingers")
    assert left is not None and left["worker_id"] is None
    assert claimable(engine) is None
    assert control.retry(engine, run.run_pk).phase == "QUEUED", "it can be retried again"


def test_a_lost_worker_s_unstarted_job_with_a_cancel_ends_cancelled_when_reaped(
        engine: Engine, runs_dir: Path) -> None:
    run = submit_command(engine, runs_dir, "orphan")
    with engine.begin() as conn:
        claim = q.claim(conn, "gone", 1, 100.0)  # claimed, then its worker died at once
    assert claim is not None
    assert control.cancel(engine, run.run_pk).phase == "CANCEL_REQUESTED"
    assert reaper.conclude(engine, claim, "gone",
                           AttemptEnd(worker_lost=True, cancel_requested=True),
                           lambda d: index(engine, runs_dir), stale_before=time.time()
                           ) is not None
    assert phases(run.dir) == [("QUEUED", 1), ("CANCELLED", 1)]
    assert run_row(engine, "orphan").status == "CANCELLED"
    assert claimable(engine) is None


def test_a_cancel_the_worker_had_not_seen_keeps_a_failed_attempt_from_running_again(
        engine: Engine, runs_dir: Path) -> None:
    run, first = running(engine, runs_dir, "told", max_attempts=3)
    # the process crashed; the worker read no cancel, then the user's cancel came
    assert control.cancel(engine, run.run_pk).phase == "CANCEL_REQUESTED"
    verdict = reaper.conclude(engine, first, "w", AttemptEnd(exit_code=1),
                              lambda d: index(engine, runs_dir))
    assert verdict is not None and verdict.phase == "FAILED"
    assert ("QUEUED", 2) not in phases(run.dir), "the cancel stopped the automatic retry"
    assert run_row(engine, "told").status == "FAILED"
    assert claimable(engine) is None


def test_the_automatic_requeue_leaves_a_job_a_cancel_was_asked_of(
        engine: Engine, runs_dir: Path) -> None:
    # the narrower window: the cancel lands after the worker read the job, before its
    # requeue; the requeue is conditional, and the caller ends the new attempt CANCELLED
    run = submit_command(engine, runs_dir, "late", max_attempts=3)
    with engine.begin() as conn:
        assert q.claim(conn, "w", 1, time.time()) is not None
        assert not q.request_cancel(conn, run.run_pk, time.time())
        assert not q.requeue(conn, run.run_pk, 2, unless_cancelled=True)
    held = job(engine, "late")
    assert held is not None and (held["attempt"], held["worker_id"]) == (1, "w")
    with engine.begin() as conn:
        assert q.requeue(conn, run.run_pk, 2)  # a retry's requeue clears the cancel


def test_a_cancel_of_a_run_requeued_but_not_yet_indexed_ends_the_new_attempt(
        engine: Engine, runs_dir: Path) -> None:
    run, first = running(engine, runs_dir, "stale", max_attempts=2)
    # the process crashed; the worker requeues attempt 2, and the index has not caught up
    reaper.conclude(engine, first, "w", AttemptEnd(exit_code=1), lambda d: None)
    assert run_row(engine, "stale").status == "RUNNING"
    assert control.cancel(engine, run.run_pk).phase == "CANCELLED"
    assert phases(run.dir)[-2:] == [("QUEUED", 2), ("CANCELLED", 2)]
    assert run_row(engine, "stale").status == "CANCELLED"
    assert claimable(engine) is None


def test_a_cancel_of_a_run_that_ended_before_the_index_knew_is_refused_and_shows_the_end(
        engine: Engine, runs_dir: Path) -> None:
    run, first = running(engine, runs_dir, "done")
    append_events(run.dir, [{"phase": "SUCCEEDED"}])
    reaper.conclude(engine, first, "w", AttemptEnd(exit_code=0), lambda d: None)
    assert run_row(engine, "done").status == "RUNNING"  # the index has not caught up
    with pytest.raises(TransitionError, match=r"ended \(SUCCEEDED\) before this cancel"):
        control.cancel(engine, run.run_pk)
    assert run_row(engine, "done").status == "SUCCEEDED"
    assert phases(run.dir)[-1] == ("SUCCEEDED", None), "no end recorded twice"


def test_a_retry_counted_from_an_older_reading_starts_nothing(
        engine: Engine, runs_dir: Path) -> None:
    run = submit_command(engine, runs_dir, "twice")
    record_attempt(run.dir, 1, "FAILED")
    with locked(run.dir):
        start_attempt(run.dir, 2)
    record_attempt(run.dir, 2, "FAILED")
    with locked(run.dir), pytest.raises(TransitionError, match="at attempt 2 now, not 1"):
        start_attempt(run.dir, 2)  # a second retry that read attempt 1 before the first
    assert phases(run.dir).count(("QUEUED", 2)) == 1


def test_a_cancel_committed_after_the_worker_read_the_job_still_ends_the_retried_run(
        engine: Engine, runs_dir: Path) -> None:
    # The worker read the job (no cancel yet) while it concluded the old attempt; the
    # cancel, which saw the worker hold the job, commits before the worker lets it go.
    # The worker decides from what it reads after its own release, not from that reading.
    run, first = failed(engine, runs_dir, "between")
    control.retry(engine, run.run_pk)
    done: list[object] = []
    with engine.begin() as conn:
        assert not q.request_cancel(conn, run.run_pk, time.time())  # held by w
        worker = threading.Thread(target=lambda: done.append(reaper.conclude(
            engine, first, "w", AttemptEnd(exit_code=0), lambda d: index(engine, runs_dir))))
        worker.start()
        time.sleep(0.5)  # the worker has read the job; its release waits for this commit
    worker.join(60)
    assert done == [None]
    assert phases(run.dir)[-2:] == [("QUEUED", 2), ("CANCELLED", 2)]
    assert run_row(engine, "between").status == "CANCELLED"
    assert claimable(engine) is None


def test_a_cancel_a_worker_recorded_before_it_was_lost_is_not_recorded_again(
        engine: Engine, runs_dir: Path) -> None:
    run = submit_command(engine, runs_dir, "once")
    with engine.begin() as conn:
        claim = q.claim(conn, "gone", 1, 100.0)
    assert claim is not None
    assert control.cancel(engine, run.run_pk).phase == "CANCEL_REQUESTED"
    # its worker saw the cancel before starting the process, recorded the end, and died
    # before it let the job go
    with locked(run.dir):
        write_events(run.dir, [reaper.verdict_event(
            classify(AttemptEnd(cancel_requested=True)), 1)])
    reaper.conclude(engine, claim, "gone", AttemptEnd(worker_lost=True, cancel_requested=True),
                    lambda d: index(engine, runs_dir), stale_before=time.time())
    assert phases(run.dir) == [("QUEUED", 1), ("CANCELLED", 1)]
    assert run_row(engine, "once").status == "CANCELLED"
    assert claimable(engine) is None


def test_a_job_s_run_resumed_by_hand_is_cancelled_as_a_run_started_by_hand(
        engine: Engine, runs_dir: Path) -> None:
    # no worker holds the job, but a process records its folder: it gets SIGTERM (it used
    # to wait for the folder and answer "busy" every time)
    run = submit_command(engine, runs_dir, "resumed")
    record_attempt(run.dir, 1, "FAILED")
    code = ("import sys, time, runwatch\n"
            "run = runwatch.init(name='resumed', dir=sys.argv[1], resume=True)\n"
            "print('up', flush=True)\n"
            "while True:\n"
            "    time.sleep(0.05)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(runs_dir)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert first_line(proc, what="the resumed run to start") == "up"

        def resumed() -> bool:
            index(engine, runs_dir)
            return bool(run_row(engine, "resumed").status == "RUNNING")

        wait_for(resumed, what="the index to read the resumed run RUNNING")
        out = control.cancel(engine, run.run_pk)
        assert (out.phase, out.next) == ("CANCEL_REQUESTED", control.SENT_SIGTERM)
        proc.wait(timeout=60)
        index(engine, runs_dir)
        assert run_row(engine, "resumed").status == "CANCELLED"
        held = job(engine, "resumed")
        assert held is not None and held["cancel_requested_at"] is None, "the mark taken back"
    finally:
        proc.kill()
        proc.wait()


def test_a_run_started_by_hand_in_the_queued_phase_whose_process_died_is_process_gone(
        engine: Engine, runs_dir: Path) -> None:
    code = ("import os, sys, runwatch\n"
            "runwatch.init(name='hq', dir=sys.argv[1], phase='QUEUED')\n"
            "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", code, str(runs_dir)], check=True, timeout=60)
    index(engine, runs_dir)
    row = run_row(engine, "hq")
    assert row.status == "QUEUED" and q_runs.process_gone(row)


def test_a_cancel_committed_while_the_worker_requeues_a_failure_ends_the_new_attempt(
        engine: Engine, runs_dir: Path) -> None:
    run, first = running(engine, runs_dir, "requeued", max_attempts=3)
    with engine.begin() as conn:
        assert not q.request_cancel(conn, run.run_pk, time.time())  # held by w
        worker = threading.Thread(target=lambda: reaper.conclude(
            engine, first, "w", AttemptEnd(exit_code=1), lambda d: index(engine, runs_dir)))
        worker.start()
        time.sleep(0.5)  # the worker read no cancel; its requeue waits for this commit
    worker.join(60)
    seen = phases(run.dir)
    assert seen[3] == ("FAILED", 1)
    # read before the commit, the failure is queued again and that attempt ends CANCELLED
    # unstarted; read after it (a slow worker), the failure is not queued again at all
    assert seen[4:] in ([("QUEUED", 2), ("CANCELLED", 2)], []), seen
    assert run_row(engine, "requeued").status == ("CANCELLED" if seen[4:] else "FAILED")
    assert claimable(engine) is None
