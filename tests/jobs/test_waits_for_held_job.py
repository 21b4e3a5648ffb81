"""What a job waits for is one judgement (runwatch.jobs.executors.held_waits, through
jobs.control.queued_waits): the run detail (`runwatch runs get`, `job.waits_for`) says of
a job that a lost Ray worker holds, with no Ray worker up to reap it, what the workers view
(`runwatch resources`) says of it, and both stop saying it once a Ray worker runs.

The run detail said nothing of such a job (it judged only unclaimed queued jobs): a job a
Ray worker had submitted to its cluster reads QUEUED while it waits there, and `runs get`
showed it QUEUED, held, with no word of what it waited for.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from runwatch.cli.context import default_db
from runwatch.jobs import reaper
from runwatch.rundir.append import locked, write_events
from runwatch.store import jobs as store_jobs
from runwatch.store.db import open_engine
from tests.support.cli import cli_here


def _views(runs: Path, name: str, holder: str) -> tuple[Any, Any]:
    """(the run detail's job.waits_for, the workers view's waits_for of the job)."""
    detail = json.loads(cli_here("runs", "get", name, "--dir", str(runs), "-o", "json").stdout)
    view = json.loads(cli_here("resources", str(runs), "-o", "json").stdout)
    worker = next(w for w in view["workers"] if w["id"] == holder)
    [job] = [j for j in worker["jobs"] if j["name"] == name]
    return detail["job"]["waits_for"], job["waits_for"]


def _register(runs: Path, worker_id: str, executor: str, heartbeat_at: float) -> None:
    engine = open_engine(default_db(runs))
    try:
        with engine.begin() as conn:
            store_jobs.register_worker(conn, store_jobs.WorkerRow(
                worker_id, "host-a", 4242, 1, "cpu", heartbeat_at - 60, executor=executor))
            store_jobs.heartbeat(conn, worker_id, heartbeat_at)
    finally:
        engine.dispose()


def test_a_lost_ray_worker_s_queued_job_says_the_same_in_the_detail_and_the_workers_view(
        runs_dir: Path) -> None:
    cli_here("submit", "--dir", str(runs_dir), "--name", "orphan", "--", "python", "-c", "pass")
    _register(runs_dir, "w-ray", "ray", time.time())
    engine = open_engine(default_db(runs_dir))
    try:
        with engine.begin() as conn:
            claim = store_jobs.claim(conn, "w-ray", 1, time.time())
        assert claim is not None
        # submitted to its cluster, which has not started it: QUEUED, held by its worker
        with locked(Path(claim.dir), 5.0):
            write_events(Path(claim.dir), [reaper.start_event(
                claim.attempt, "w-ray", "waiting for the Ray cluster to start it")])
        with engine.begin() as conn:  # its worker dies: no heartbeat for 300 s
            store_jobs.heartbeat(conn, "w-ray", time.time() - 300)
    finally:
        engine.dispose()
    _register(runs_dir, "w-local", "local", time.time())  # cannot reap a Ray worker's job

    in_detail, in_view = _views(runs_dir, "orphan", "w-ray")
    assert in_detail == in_view
    assert "it waits for a Ray worker (runwatch worker --executor ray" in (in_detail or "")
    shown = cli_here("runs", "get", "orphan", "--dir", str(runs_dir)).stdout
    assert "QUEUED" in shown and "it waits for a Ray worker" in " ".join(shown.split())

    _register(runs_dir, "w-ray-2", "ray", time.time())  # one that can reap it runs
    assert _views(runs_dir, "orphan", "w-ray") == (None, None)
