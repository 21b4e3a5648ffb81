"""A job a Ray cluster keeps PENDING (no node has the devices it asks for free) is QUEUED,
waiting for the cluster, and costs nothing until Ray starts it: its device time and its
PREPARING start then, and the wait shows as queue wait (`timing.phaseMillis`' QUEUED).

It was PREPARING from its submission, billed as holding its devices all the while Ray
kept it PENDING (up to Ray's 900 s start timeout), and its wait counted as training
time. The head (the one the Ray files share) has two CPUs: a two-CPU job waits while a
one-CPU job holds one of them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from runwatch.rundir import format as fmt
from tests.jobs.rayhelp import (
    JOB_DEADLINE_S,
    PLAIN,
    RayHead,
    needs_ray,
    ray_status,
    reported,
    spawn_ray_worker,
    told,
    wait_ended,
)
from tests.jobs.test_resume import RESUMABLE, records
from tests.support.cli import cli_here
from tests.support.jobs import events, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, workers

__all__ = ["workers"]  # the fixture

# Its tests run on the Ray head the files of this group share (tests/jobs/conftest.py).
pytestmark = pytest.mark.xdist_group("ray-head")


def _detail(runs_dir: Path, db: Path, name: str) -> dict[str, Any]:
    """The run as `runwatch runs get NAME -o json` shows it."""
    out = cli_here("runs", "get", name, "--dir", str(runs_dir), "--db", str(db), "-o", "json")
    detail: dict[str, Any] = json.loads(out.stdout)
    return detail


def _not_ended(engine: Engine, *names: str) -> bool:
    """True while none of runs `names` has ended; a wait for them to run fails at once,
    saying how, when one has (it would wait out its deadline for what cannot happen)."""
    ended = {name: run_row(engine, name) for name in names}
    ended = {name: row for name, row in ended.items() if row.status in fmt.TERMINAL_PHASES}
    if ended:
        pytest.fail("gave up: " + ", ".join(f"{name} ended {row.status} ({row.reason_code})"
                                            for name, row in ended.items()))
    return True


def _listed(runs_dir: Path, db: Path, name: str) -> str:
    """The run's status as `runwatch runs list -o json` shows it."""
    out = cli_here("runs", "list", "--dir", str(runs_dir), "--db", str(db), "-o", "json")
    rows = json.loads(out.stdout)
    rows = rows["runs"] if isinstance(rows, dict) else rows
    return str(next(r for r in rows if r["name"] == name)["status"])


@needs_ray
@pytest.mark.slow
def test_a_job_ray_keeps_pending_is_queued_and_costs_nothing_until_ray_starts_it(
        ray_head: RayHead, sqlite_index: Engine, runs_dir: Path, tmp_path: Path,
        workers: Workers) -> None:
    from runwatch.jobs.ray_executor import RayExecutor, connect

    engine, ray, db = sqlite_index, connect(ray_head.address), tmp_path / "index.db"
    profiles = runs_dir / ".runwatch" / "profiles.yaml"
    profiles.parent.mkdir(parents=True, exist_ok=True)
    profiles.write_text("profiles:\n  cpu: {devices: 2}\n")
    holds, waits = tmp_path / "holds-gate", tmp_path / "waits-gate"
    submit_command(engine, runs_dir, "holds-a-cpu", [sys.executable, "-c", PLAIN, str(holds)],
                   priority=2)
    submit_command(engine, runs_dir, "two-cpus", [sys.executable, "-c", PLAIN, str(waits)],
                   devices=2, startup_timeout_s=600)
    spawn_ray_worker(workers, runs_dir, db, ray_head, "--devices=3")
    with reported(ray_head, lambda: told(ray_head, engine, "holds-a-cpu", "two-cpus")):
        wait_for(lambda: _not_ended(engine, "holds-a-cpu", "two-cpus")
                 and ray_status(ray, engine, "holds-a-cpu") == "RUNNING"
                 and ray_status(ray, engine, "two-cpus") == "PENDING",
                 what="one job to run on Ray and the two-CPU one to wait",
                 deadline=JOB_DEADLINE_S, interval=0.2)

    # Ray keeps it PENDING: every surface says it waits, and it has cost nothing
    first = _detail(runs_dir, db, "two-cpus")
    assert ray_status(ray, engine, "two-cpus") == "PENDING"
    assert first["cost"]["device_seconds"] == 0 and first["cost"]["spend"] == 0
    assert first["state"]["phase"] == _listed(runs_dir, db, "two-cpus") == "QUEUED"
    assert first["state"]["stage"] == RayExecutor.queue
    assert first["cost"]["duration_s"] is None  # it has not trained
    assert set(first["timing"]["phaseMillis"]) == {"QUEUED"}
    assert first["attempts"][0]["started_at"] is None
    assert [ev["phase"] for ev in events(runs_dir / "two-cpus")] == ["QUEUED", "QUEUED"]
    wait_for(lambda: _detail(runs_dir, db, "two-cpus")["cost"]["queue_wait_s"]
             > first["cost"]["queue_wait_s"], what="the queue wait to grow")
    later = _detail(runs_dir, db, "two-cpus")
    assert ray_status(ray, engine, "two-cpus") == "PENDING"
    assert later["cost"]["device_seconds"] == 0
    assert set(later["timing"]["phaseMillis"]) == {"QUEUED"}

    # its CPUs are free: Ray starts it, and it holds its devices from then
    holds.touch()
    with reported(ray_head, lambda: told(ray_head, engine, "two-cpus")):
        wait_for(lambda: _not_ended(engine, "two-cpus")
                 and ray_status(ray, engine, "two-cpus") == "RUNNING",
                 what="Ray to start the two-CPU job", deadline=JOB_DEADLINE_S, interval=0.2)
    wait_for(lambda: _detail(runs_dir, db, "two-cpus")["state"]["phase"] == "PREPARING",
             what="the run to show its start", deadline=JOB_DEADLINE_S)
    waits.touch()
    ended = wait_ended(engine, "two-cpus", ray_head)
    assert (ended.status, ended.reason_code) == ("SUCCEEDED", None)
    evs = events(runs_dir / "two-cpus")
    assert [ev["phase"] for ev in evs] == ["QUEUED", "QUEUED", "PREPARING", "SUCCEEDED"]
    submitted_at, started_at, ended_at = (evs[0]["ts"], evs[2]["ts"], evs[3]["ts"])
    detail = _detail(runs_dir, db, "two-cpus")
    cost, attempt = detail["cost"], detail["attempts"][0]
    assert attempt["started_at"] == started_at
    assert cost["device_seconds"] == pytest.approx((ended_at - started_at) * 2, abs=0.01)
    # queue wait: for a worker, then for the cluster
    assert cost["queue_wait_s"] == pytest.approx(started_at - submitted_at, abs=0.01)
    assert cost["queue_wait_s"] > later["cost"]["queue_wait_s"]
    assert cost["device_seconds_estimate"] is False
    # the duration is the time it ran, not the wait
    assert detail["cost"]["duration_s"] == pytest.approx(ended_at - started_at, abs=0.01)
    assert (runs_dir / "two-cpus" / "attempts" / "1" / fmt.OUTPUT_LOG).is_file()


@needs_ray
@pytest.mark.slow
def test_a_resumed_job_ray_keeps_pending_is_queued_with_its_record_back(
        ray_head: RayHead, sqlite_index: Engine, runs_dir: Path, tmp_path: Path,
        workers: Workers) -> None:
    """`runs retry RUN --resume` of a job on Ray: its worker puts the run's record up to its
    checkpoint back as it submits the attempt, and the run stays QUEUED while Ray keeps
    the job PENDING, as a fresh job does (it read RUNNING: the index took the records put
    back for the attempt's start)."""
    from runwatch.jobs.ray_executor import RayExecutor, connect

    engine, ray, db = sqlite_index, connect(ray_head.address), tmp_path / "index.db"
    profiles = runs_dir / ".runwatch" / "profiles.yaml"
    profiles.parent.mkdir(parents=True, exist_ok=True)
    profiles.write_text("profiles:\n  cpu: {devices: 2}\n")
    run = submit_command(engine, runs_dir, "resumed", [sys.executable, "-c", RESUMABLE],
                         devices=2)
    spawn_ray_worker(workers, runs_dir, db, ray_head, "--devices=3")
    first = wait_ended(engine, "resumed", ray_head)
    assert first.reason_code == "failed", told(ray_head, engine, "resumed")  # after step 3

    holds = tmp_path / "holds-gate"
    submit_command(engine, runs_dir, "holds-a-cpu", [sys.executable, "-c", PLAIN, str(holds)])
    with reported(ray_head, lambda: told(ray_head, engine, "holds-a-cpu")):
        wait_for(lambda: _not_ended(engine, "holds-a-cpu")
                 and ray_status(ray, engine, "holds-a-cpu") == "RUNNING",
                 what="a one-CPU job to run on Ray", deadline=JOB_DEADLINE_S, interval=0.2)
    cli_here("runs", "retry", "resumed", "--resume", "--dir", str(runs_dir), "--db", str(db))
    with reported(ray_head, lambda: told(ray_head, engine, "resumed", "holds-a-cpu")):
        wait_for(lambda: ray_status(ray, engine, "resumed", 2) == "PENDING"
                 and run_row(engine, "resumed").observed_step == 3,
                 what="the resumed attempt to wait on Ray with its record back",
                 deadline=JOB_DEADLINE_S, interval=0.2)

    shown = _detail(runs_dir, db, "resumed")
    assert ray_status(ray, engine, "resumed", 2) == "PENDING"
    assert shown["state"]["phase"] == _listed(runs_dir, db, "resumed") == "QUEUED"
    assert shown["state"]["stage"] == RayExecutor.queue
    assert shown["attempts"][-1]["started_at"] is None
    assert shown["attempts"][-1]["device_seconds"] == 0
    row = run_row(engine, "resumed")
    assert (row.attempt, row.observed_step, row.saved_step) == (2, 3, 3)

    holds.touch()  # Ray starts it: it goes on from step 3
    ended = wait_ended(engine, "resumed", ray_head)
    assert (ended.attempt, ended.reason_code) == (2, "failed")
    assert [(m["step"], m["loss"]) for m in records(run.dir / fmt.METRICS)] == [
        (1, 101), (2, 102), (3, 103), (4, 204), (5, 205), (6, 206), (7, 207), (8, 208)]
