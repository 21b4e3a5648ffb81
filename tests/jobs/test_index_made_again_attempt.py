"""An index made again from a runs folder holds the job state the folder's events say
(s40 G1).

A job retried (events.jsonl: QUEUED attempt 2), then indexed into a new index (the old one
deleted, or a second index over the folder), had a jobs row at attempt 1: the next worker
started "attempt 1", the SDK refused to attach (the folder is at attempt 2), the retry
ended FAILED `failed`, attempt 1's output.log took the new output, and the events' attempts
went 1,1,1,2,1,1. Now the row takes the attempt from the events, and is made only once
the pass has read them, so no worker is offered in between a job at an attempt the folder
is not at, nor one that has ended or is being stopped.

Real runs folders, the real indexer, job control and `runwatch worker` processes, on
SQLite and PostgreSQL (the new index is the suite's `engine`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Connection, Engine, event

from runwatch.ingest import Indexer
from runwatch.jobs import control
from runwatch.rundir import format as fmt
from runwatch.rundir.append import locked, write_events
from runwatch.store import jobs as store_jobs
from runwatch.store.db import database_url, open_engine
from tests.support.jobs import events, job, record_attempt, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, workers

__all__ = ["workers"]  # the fixture

# A job that records a step with the SDK, prints the attempt it was started as, and fails
# until the file named by its first argument exists.
FLAKY = ("import os, sys, runwatch\n"
         "with runwatch.init() as run:\n"
         "    run.log({'loss': 1.0}, step=0)\n"
         "    print('started as attempt', os.environ['RUNWATCH_ATTEMPT'], flush=True)\n"
         "    if not os.path.exists(sys.argv[1]):\n"
         "        raise RuntimeError('not this time')\n")


def _retried(tmp_path: Path, runs_dir: Path, name: str, *, end: str | None = "FAILED",
             worker: Workers | None = None, argv: list[str] | None = None) -> Path:
    """Run `name`'s attempt 1 to its `end` (None: still running) through a first index (by
    a real worker given `worker`, else as its worker and process would leave it) and, when
    it FAILED, retry it there: the folder then says QUEUED attempt 2. The first index is
    disposed of; returns the run's folder."""
    first_db = tmp_path / f"first-{name}.db"
    first = open_engine(first_db)
    try:
        run = submit_command(first, runs_dir, name, argv or "pass", max_attempts=1)
        if worker is None:
            record_attempt(run.dir, 1, end)
            Indexer(first, runs_dir).index_once()
        else:
            proc = worker.start(runs_dir, database_url(first_db))
            wait_for(lambda: run_row(first, name).status == end
                     and (job(first, name) or {}).get("worker_id") is None,
                     what=f"attempt 1 to end {end} and its worker to let it go")
            worker.stop(proc)
        if end == "FAILED":
            assert control.retry(first, run_row(first, name), runs_dir).phase == "QUEUED"
    finally:
        first.dispose()
    return run.dir


def test_a_retried_job_starts_its_queued_attempt_from_an_index_made_again(
        engine: Engine, db_url: str, tmp_path: Path, runs_dir: Path,
        workers: Workers) -> None:
    flag = tmp_path / "second-try"
    run_dir = _retried(tmp_path, runs_dir, "flaky", worker=workers,
                       argv=[sys.executable, "-c", FLAKY, str(flag)])
    assert [(e["phase"], e.get("attempt")) for e in events(run_dir)][-1] == ("QUEUED", 2)
    flag.touch()  # attempt 2 succeeds

    Indexer(engine, runs_dir).index_once()  # the index made again from the folder

    row = run_row(engine, "flaky")
    assert (row.status, row.attempt) == ("QUEUED", 2)
    got = job(engine, "flaky")
    assert got is not None and (got["attempt"], got["worker_id"]) == (2, None)

    workers.start(runs_dir, db_url)
    wait_for(lambda: run_row(engine, "flaky").status in fmt.TERMINAL_PHASES,
             what="attempt 2 to end")
    row = run_row(engine, "flaky")
    assert (row.status, row.attempt, row.reason_code) == ("SUCCEEDED", 2, None)
    said = [(e["phase"], e["attempt"]) for e in events(run_dir) if "attempt" in e]
    assert [attempt for _, attempt in said] == sorted(attempt for _, attempt in said), said
    assert said[-2:] == [("QUEUED", 2), ("PREPARING", 2)]
    first_log = (fmt.attempt_dir(run_dir, 1) / fmt.OUTPUT_LOG).read_text()
    assert "started as attempt 1" in first_log and "attempt 2" not in first_log
    assert "started as attempt 2" in (fmt.attempt_dir(run_dir, 2) / fmt.OUTPUT_LOG).read_text()


@contextmanager
def _claims_offered(engine: Engine) -> Iterator[list[store_jobs.Claim]]:
    """What a worker polling `engine` would be handed at each moment between the
    transactions of whatever runs meanwhile (an index pass): a claim is tried, in a
    transaction of its own that is rolled back, as each of them begins."""
    offered: list[store_jobs.Claim] = []
    trying = False

    def begins(_conn: Connection) -> None:
        nonlocal trying
        if trying:  # the claim's own transaction
            return
        trying = True
        try:
            with engine.connect() as other:
                tx = other.begin()
                got = store_jobs.claim(other, "poller", 8, time.time())
                tx.rollback()
            if got is not None:
                offered.append(got)
        finally:
            trying = False

    event.listen(engine, "begin", begins)
    try:
        yield offered
    finally:
        event.remove(engine, "begin", begins)


def test_a_pass_into_a_new_index_never_offers_a_job_at_an_attempt_the_folder_is_not_at(
        engine: Engine, tmp_path: Path, runs_dir: Path) -> None:
    _retried(tmp_path, runs_dir, "retried")
    _retried(tmp_path, runs_dir, "ended", end="SUCCEEDED")
    stopping = _retried(tmp_path, runs_dir, "stopping", end=None)  # still running…
    with locked(stopping):
        write_events(stopping, [{"phase": "CANCEL_REQUESTED"}])  # …and asked to stop

    with _claims_offered(engine) as offered:
        Indexer(engine, runs_dir).index_once()

    # the retried job's attempt 2 may be offered once its events are in; never its attempt
    # 1, nor the ended job or the one being stopped (a worker would start them again)
    assert {(c.name, c.attempt) for c in offered} <= {("retried", 2)}
    assert [(c.name, c.attempt) for c in offered][-1:] == [("retried", 2)]
    assert {name: ((job(engine, name) or {}).get("attempt"), run_row(engine, name).status)
            for name in ("retried", "ended", "stopping")} == {
        "retried": (2, "QUEUED"), "ended": (1, "SUCCEEDED"), "stopping": (1, "CANCEL_REQUESTED")}


def test_a_second_index_follows_a_retry_made_through_the_other(
        engine: Engine, tmp_path: Path, runs_dir: Path) -> None:
    run = submit_command(engine, runs_dir, "shared", max_attempts=1)
    record_attempt(run.dir, 1, "FAILED")
    Indexer(engine, runs_dir).index_once()
    before = job(engine, "shared")
    assert before is not None and before["attempt"] == 1

    other = open_engine(tmp_path / "other.db")  # a server with another --db, say
    try:
        Indexer(other, runs_dir).index_once()
        assert control.retry(other, run_row(other, "shared"), runs_dir).phase == "QUEUED"
    finally:
        other.dispose()
    Indexer(engine, runs_dir).index_once()

    assert (run_row(engine, "shared").status, run_row(engine, "shared").attempt) == \
        ("QUEUED", 2)
    after = job(engine, "shared")
    assert after is not None and (after["attempt"], after["worker_id"]) == (2, None)
    with engine.begin() as conn:
        got = store_jobs.claim(conn, "w", 1, time.time())
    assert got is not None and (got.name, got.attempt) == ("shared", 2)
