"""A Ray worker whose cluster stops answering (its head stopped, as `ray stop` does)
claims no job meanwhile, says so in its log once, and takes jobs again once the cluster
answers. Before, it claimed every queued job and failed each attempt `could_not_start`
within milliseconds, spending all of a job's `--max-attempts` during an outage.

The head is this file's own (the one the other Ray files share stays up for their tests),
stopped with everything it started and started again on the same dashboard port. Each test
stops it: the first starts it again, and the second takes that one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from runwatch.jobs.control import queued_waits
from runwatch.store import jobs as store_jobs
from tests.jobs.rayhelp import JOB_DEADLINE_S, KeptHead, needs_ray, wait_ended
from tests.support.cli import cli_here
from tests.support.jobs import events, job, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import FAST, Workers, workers

__all__ = ["workers"]  # the fixture

SILENT = "does not answer"
AGAIN = "answers again"


@pytest.fixture(scope="module")
def kept_head() -> Iterator[KeptHead]:
    """This file's Ray head: `up()` takes the one a test before left running, or starts
    one; a test stops it with `down()`."""
    heads = KeptHead()
    yield heads
    heads.down()


def _worker(engine: Engine) -> dict[str, Any]:
    with engine.connect() as conn:
        return store_jobs.list_workers(conn)[0]


def _ray_worker(workers: Workers, runs_dir: Path, tmp_path: Path, address: str,
                *extra: str) -> Path:
    """Start a Ray worker on `runs_dir` (FAST timings); the path of its log."""
    log = tmp_path / "worker.log"
    settings = [f"--{key.replace('_', '-')}={value}" for key, value in FAST.items()]
    workers.spawn(runs_dir, ["worker", str(runs_dir), "--db", str(tmp_path / "index.db"),
                             *settings, *extra, "--executor=ray", f"--address={address}"],
                  log=log)
    return log


@needs_ray
@pytest.mark.slow
def test_a_ray_worker_claims_nothing_while_its_cluster_is_down_and_again_once_it_answers(
        kept_head: KeptHead, sqlite_index: Engine, runs_dir: Path, tmp_path: Path,
        workers: Workers) -> None:
    engine = sqlite_index
    head = kept_head.up()
    log = _ray_worker(workers, runs_dir, tmp_path, head.address)

    def registered() -> bool:
        with engine.connect() as conn:
            return bool(store_jobs.list_workers(conn))

    wait_for(registered, what="the Ray worker to register", deadline=JOB_DEADLINE_S)
    kept_head.down()  # the cluster goes away (maintenance, a restart, a crash)

    submit_command(engine, runs_dir, "later", "print('ran')", max_attempts=2)
    wait_for(lambda: SILENT in log.read_text()
             or run_row(engine, "later").status != "QUEUED",
             what="the worker to find its cluster silent", deadline=JOB_DEADLINE_S)
    queued = run_row(engine, "later")
    assert (queued.status, queued.reason_code) == ("QUEUED", None)
    assert ((job(engine, "later") or {})["worker_id"], queued.attempt) == (None, 1)
    # the worker's row says so, so resources and "who starts it" do not count on it
    wait_for(lambda: _worker(engine)["unavailable"] is not None,
             what="the worker to record that it starts no job", deadline=JOB_DEADLINE_S)
    assert "does not answer" in _worker(engine)["unavailable"]
    with engine.connect() as conn:
        waits = queued_waits(conn, job(engine, "later"), "QUEUED", str(runs_dir / "later"),
                             time.time())
    assert waits is not None and "start no job now" in waits, waits
    shown = cli_here("resources", str(runs_dir), "--db", str(tmp_path / "index.db"))
    assert "unavailable" in shown.stdout and "starts no job now" in shown.stdout, (
        shown.stdout)

    kept_head.up(int(head.address.rsplit(":", 1)[1]))  # the same address; left running
    ended = wait_ended(engine, "later")
    assert (ended.status, ended.reason_code, ended.attempt) == ("SUCCEEDED", None, 1)
    assert [(ev["phase"], ev.get("attempt")) for ev in events(runs_dir / "later")] == [
        ("QUEUED", 1), ("QUEUED", 1), ("PREPARING", 1), ("SUCCEEDED", 1)], \
        "no attempt was spent"  # submitted to Ray (QUEUED), then started by it
    said = log.read_text()
    assert (said.count(SILENT), said.count(AGAIN)) == (1, 1), said
    wait_for(lambda: _worker(engine)["unavailable"] is None,
             what="the worker to record that it starts jobs again",
             deadline=JOB_DEADLINE_S)


@needs_ray
@pytest.mark.slow
def test_a_queued_job_too_big_for_the_free_devices_has_the_worker_ask_its_cluster_nothing(
        kept_head: KeptHead, sqlite_index: Engine, runs_dir: Path, tmp_path: Path,
        workers: Workers) -> None:
    """The worker asks its cluster whether it answers only when it would claim a job: a
    job asking for more devices than it has free waits without a question at each tick
    (before, it asked at every 0.2 s tick, and so found the stopped cluster silent)."""
    engine = sqlite_index
    head = kept_head.up()
    log = _ray_worker(workers, runs_dir, tmp_path, head.address, "--devices=1")

    def heartbeat() -> float:
        with engine.connect() as conn:
            found = store_jobs.list_workers(conn)
            return float(found[0]["heartbeat_at"]) if found else 0.0

    wait_for(lambda: heartbeat() > 0, what="the Ray worker to register",
             deadline=JOB_DEADLINE_S)
    kept_head.down()

    submit_command(engine, runs_dir, "wide", "print('ran')", devices=2)
    since = heartbeat()
    wait_for(lambda: heartbeat() > since + 2.0,
             what="the worker to go round its loop for 2 s", deadline=JOB_DEADLINE_S)
    assert SILENT not in log.read_text(), "it asked its cluster for a job it cannot claim"

    submit_command(engine, runs_dir, "narrow", "print('ran')")
    wait_for(lambda: SILENT in log.read_text(),
             what="the worker to ask its cluster for the job it can claim",
             deadline=JOB_DEADLINE_S)
    assert (run_row(engine, "wide").status, run_row(engine, "narrow").status) == (
        "QUEUED", "QUEUED")
