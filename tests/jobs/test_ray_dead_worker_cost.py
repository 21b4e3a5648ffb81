"""A dead worker's Ray job costs the time it held its devices: from when Ray started it to
when Ray says it ended, not to the reap that concludes it.

Its worker's heartbeat goes stale first (30 s by default) and only then does another
worker's reaper ask Ray and conclude the attempt, so a job that ended meanwhile was billed
until that reap: its verdict is now dated at Ray's end time. A job Ray started after its
worker died is recorded PREPARING by the reaper as it sees it run (the dead worker
recorded it QUEUED, waiting for the cluster), so it is billed from then.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.jobs.cost import CPU, run_cost
from tests.jobs.rayhelp import (
    JOB_DEADLINE_S,
    PLAIN,
    RayHead,
    dead_worker_reaper,
    held_by_a_dead_worker,
    needs_ray,
    ray_status,
)
from tests.support.jobs import events, run_row, submit_command
from tests.support.wait import wait_for

# Its tests run on the Ray head the files of this group share (tests/jobs/conftest.py).
pytestmark = pytest.mark.xdist_group("ray-head")


@needs_ray
@pytest.mark.slow
def test_a_dead_worker_s_ray_job_is_billed_until_ray_says_it_ended_not_until_its_reap(
        ray_head: RayHead, sqlite_index: Engine, runs_dir: Path, tmp_path: Path) -> None:
    from runwatch.jobs.ray_executor import RayExecutor, connect, submission_id

    engine, ray = sqlite_index, connect(ray_head.address)
    executor = RayExecutor(ray, ray_head.address)
    gate = tmp_path / "gate"
    submit_command(engine, runs_dir, "orphan", [sys.executable, "-c", PLAIN, str(gate)])
    claim = held_by_a_dead_worker(engine, runs_dir, "orphan", executor)
    wait_for(lambda: ray_status(ray, engine, "orphan") == "RUNNING",
             what="the Ray job to run", deadline=JOB_DEADLINE_S, interval=0.2)
    reap = dead_worker_reaper(engine, executor, runs_dir)

    # the reaper sees it run, and records its start: its devices are held from then
    wait_for(lambda: reap() == 0 and [ev["phase"] for ev in events(Path(claim.dir))]
             == ["QUEUED", "QUEUED", "PREPARING"], what="the reaper to record its start",
             deadline=JOB_DEADLINE_S, interval=0.2)
    assert run_row(engine, "orphan").status == "PREPARING"
    gate.touch()
    wait_for(lambda: ray_status(ray, engine, "orphan") == "SUCCEEDED",
             what="the Ray job to end", deadline=JOB_DEADLINE_S, interval=0.2)
    seen_ended = time.time()  # the job had ended by now; it is concluded after
    ended_ms = ray.get_job_info(submission_id(claim)).end_time
    wait_for(lambda: reap() == 1, what="the reaper to conclude the job",
             deadline=JOB_DEADLINE_S, interval=0.2)

    evs = events(Path(claim.dir))
    assert [ev["phase"] for ev in evs] == ["QUEUED", "QUEUED", "PREPARING", "SUCCEEDED"]
    started, ended = evs[2]["ts"], evs[3]["ts"]
    assert ended == pytest.approx(ended_ms / 1000, abs=0.002) and ended < seen_ended
    cost = run_cost(evs, 1, CPU)
    assert not cost.estimate
    assert cost.device_seconds == pytest.approx(ended - started, abs=0.002)  # in ms
    assert run_row(engine, "orphan").status == "SUCCEEDED"
