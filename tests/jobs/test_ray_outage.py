"""A Ray worker whose cluster stops answering (its head stopped, as `ray stop` does)
claims no job meanwhile, says so in its log once, and takes jobs again once the cluster
answers. Before, it claimed every queued job and failed each attempt `could_not_start`
within milliseconds, spending all of a job's `--max-attempts` during an outage.

The head is this test's own (test_ray's module head stays up for the other tests), stopped
with everything it started and started again on the same dashboard port.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.store import jobs as store_jobs
from tests.jobs.test_ray import (
    JOB_DEADLINE_S,
    _wait_ended,
    needs_ray,
    sqlite_index,
    start_head,
    stop_head,
)
from tests.support.jobs import events, job, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import FAST, Workers, workers

__all__ = ["sqlite_index", "workers"]  # the fixtures

SILENT = "does not answer"
AGAIN = "answers again"


@needs_ray
@pytest.mark.slow
def test_a_ray_worker_claims_nothing_while_its_cluster_is_down_and_again_once_it_answers(
        sqlite_index: Engine, runs_dir: Path, tmp_path: Path, workers: Workers) -> None:
    engine = sqlite_index
    head = start_head()
    try:
        log = tmp_path / "worker.log"
        settings = [f"--{key.replace('_', '-')}={value}" for key, value in FAST.items()]
        workers.spawn(runs_dir, ["worker", str(runs_dir), "--db", str(tmp_path / "index.db"),
                                 *settings, "--executor=ray", f"--address={head.address}"],
                      log=log)

        def registered() -> bool:
            with engine.connect() as conn:
                return bool(store_jobs.list_workers(conn))

        wait_for(registered, what="the Ray worker to register", deadline=JOB_DEADLINE_S)
        stop_head(head)  # the cluster goes away (maintenance, a restart, a crash)

        submit_command(engine, runs_dir, "later", "print('ran')", max_attempts=2)
        wait_for(lambda: SILENT in log.read_text()
                 or run_row(engine, "later").status != "QUEUED",
                 what="the worker to find its cluster silent", deadline=JOB_DEADLINE_S)
        queued = run_row(engine, "later")
        assert (queued.status, queued.reason_code) == ("QUEUED", None)
        assert ((job(engine, "later") or {})["worker_id"], queued.attempt) == (None, 1)

        head = start_head(int(head.address.rsplit(":", 1)[1]))  # the same address
        ended = _wait_ended(engine, "later")
        assert (ended.status, ended.reason_code, ended.attempt) == ("SUCCEEDED", None, 1)
        assert [(ev["phase"], ev.get("attempt")) for ev in events(runs_dir / "later")] == [
            ("QUEUED", 1), ("PREPARING", 1), ("SUCCEEDED", 1)], "no attempt was spent"
        said = log.read_text()
        assert (said.count(SILENT), said.count(AGAIN)) == (1, 1), said
    finally:
        stop_head(head)
