"""A retry accepted while the ended attempt's process is still exiting starts nothing beside it.

The index shows a job's run ended as soon as its SDK records the end, while the process
goes on (what follows finish(), the sender's last send, the interpreter's exit: seconds
on a loaded machine). A retry then (the web app's button, `runwatch runs retry`) used to
make the job claimable at once, so a worker with a free device started attempt 2 while
attempt 1's process still ran (seen with a real worker of two devices). Now the job stays
its worker's until that worker concludes attempt 1, its process gone, and only then can
attempt 2 be claimed.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from sqlalchemy import Engine

from runwatch.ingest import Indexer
from runwatch.jobs import control, reaper
from runwatch.jobs.control import Outcome
from runwatch.jobs.failures import AttemptEnd
from runwatch.sdk.lock import RunLock
from runwatch.store import jobs as q
from tests.support.jobs import events, job, record_attempt, run_row, submit_command


def test_a_job_retried_before_its_process_exited_is_claimable_once_it_has(
        engine: Engine, runs_dir: Path) -> None:
    run = submit_command(engine, runs_dir, "exiting")
    with engine.begin() as conn:
        first = q.claim(conn, "w", 1, time.time())
    assert first is not None and first.attempt == 1
    record_attempt(run.dir, 1, "FAILED")  # its SDK recorded the end; the process runs on
    Indexer(engine, runs_dir).index_once()
    assert run_row(engine, "exiting").status == "FAILED"

    assert control.retry(engine, run.run_pk).phase == "QUEUED"
    held = job(engine, "exiting")
    assert held is not None and (held["attempt"], held["worker_id"]) == (2, "w")
    with engine.begin() as conn:
        assert q.claim(conn, "w2", 1, time.time()) is None, "attempt 1's process still runs"

    # its process has exited: the worker concludes attempt 1, which lets the job go
    assert reaper.conclude(engine, first, "w", AttemptEnd(exit_code=1),
                           lambda _: None) is None
    with engine.begin() as conn:
        second = q.claim(conn, "w2", 1, time.time())
    assert second is not None and (second.name, second.attempt) == ("exiting", 2)
    assert [(e["phase"], e.get("attempt")) for e in events(run.dir)][-2:] == [
        ("FAILED", None), ("QUEUED", 2)], "attempt 1 got no second verdict"


def test_a_retry_that_waited_for_the_folder_leaves_the_job_to_no_one_once_its_worker_let_go(
        engine: Engine, runs_dir: Path) -> None:
    """Seen in CI (the web app's retry after a failure): the retry read the job while its
    worker still held it, then waited for the folder while that worker concluded attempt 1
    under the folder's lock and let the job go; the retry handed the job back to the
    worker, which had nothing left to conclude, so attempt 2 stayed QUEUED and no worker
    ever started it. The retry now reads the job under the folder's lock."""
    run = submit_command(engine, runs_dir, "waited", max_attempts=1)
    with engine.begin() as conn:
        first = q.claim(conn, "w", 1, time.time())
    assert first is not None
    record_attempt(run.dir, 1, "FAILED")
    Indexer(engine, runs_dir).index_once()

    held = RunLock(run.dir)  # something holds the folder when the retry comes
    answers: list[Outcome] = []
    retry = threading.Thread(target=lambda: answers.append(
        control.retry(engine, run.run_pk, wait_s=60)))
    retry.start()
    time.sleep(0.5)  # the retry has come to the folder's lock
    held.release()
    # the worker concludes attempt 1 now: before the retry takes the folder (the order
    # that lost the job), or after it, when it sees attempt 2 and lets the job go
    reaper.conclude(engine, first, "w", AttemptEnd(exit_code=1), lambda _: None, wait_s=60)
    retry.join(60)
    assert [a.phase for a in answers] == ["QUEUED"]
    left = job(engine, "waited")
    assert left is not None and (left["attempt"], left["worker_id"]) == (2, None), left
    with engine.begin() as conn:
        second = q.claim(conn, "w2", 1, time.time())
    assert second is not None and (second.name, second.attempt) == ("waited", 2)
