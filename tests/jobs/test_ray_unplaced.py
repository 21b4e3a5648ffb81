"""A Ray job the cluster cannot place stays PENDING on Ray: Ray takes a stop of it and does
nothing with it until its own start timeout (RAY_JOB_START_TIMEOUT_SECONDS, 900 s). Its
startup timeout ends the attempt `devices_unreachable` (and the next attempt starts at
once, not 30 s later as `could_not_start`), a cancel ends it CANCELLED, its worker's stop
CANCELLED `worker_stopped`, and a cancel of a dead worker's job CANCELLED as the reaper
concludes it; before, each waited for Ray's 900 s. Each stays QUEUED until it ends, with
no device time: it never held devices (it was billed from its submission). A job given up
while PENDING never runs its command, even when Ray places it later: its entrypoint finds
the attempt's GIVEN_UP note and exits.

The head (the one the Ray files share) has two CPUs and no GPU: a job of a GPU profile
waits for a GPU forever, and a two-CPU job waits while another job holds one of the CPUs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.jobs import control
from runwatch.jobs.cost import CPU, run_cost
from runwatch.rundir import format as fmt
from tests.jobs.rayhelp import (
    JOB_DEADLINE_S,
    PLAIN,
    RayHead,
    dead_worker_reaper,
    held_by_a_dead_worker,
    needs_ray,
    ray_status,
    spawn_ray_worker,
    wait_ended,
)
from tests.support.jobs import events, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, workers

__all__ = ["workers"]  # the fixture


# Its tests run on the Ray head the files of this group share (tests/jobs/conftest.py).
pytestmark = pytest.mark.xdist_group("ray-head")

# Touches the file it is given: whether the command ran.
TOUCH = "import pathlib, sys\npathlib.Path(sys.argv[1]).touch()\n"


def _output(runs_dir: Path, name: str, attempt: int = 1) -> str:
    return (runs_dir / name / "attempts" / str(attempt) / fmt.OUTPUT_LOG).read_text()


def _never_held_devices(runs_dir: Path, name: str) -> bool:
    """Whether no attempt of run `name` held devices so far: none left QUEUED but to
    end, and its cost is 0 device seconds."""
    evs = events(runs_dir / name)
    return (run_cost(evs, 1, CPU).device_seconds == 0
            and {ev["phase"] for ev in evs} <= {"QUEUED", *fmt.TERMINAL_PHASES})


@needs_ray
@pytest.mark.slow
def test_a_ray_job_no_node_can_place_ends_at_its_startup_timeout_cancel_and_workers_stop(
        ray_head: RayHead, sqlite_index: Engine, runs_dir: Path, tmp_path: Path,
        workers: Workers) -> None:
    from runwatch.jobs.ray_executor import connect, given_up_path

    engine, ray = sqlite_index, connect(ray_head.address)
    profiles = runs_dir / ".runwatch" / "profiles.yaml"
    profiles.parent.mkdir(parents=True, exist_ok=True)
    profiles.write_text("profiles:\n  gpu1: {devices: 1, hourly_rate: 4.0}\n")
    ran = tmp_path / "ran"
    command = [sys.executable, "-c", TOUCH, str(ran)]
    submit_command(engine, runs_dir, "timed-out", command, device_profile="gpu1",
                   startup_timeout_s=2, max_attempts=2, priority=2)
    worker = spawn_ray_worker(workers, runs_dir, tmp_path / "index.db", ray_head,
                              "--device-profile=gpu1")

    # the startup timeout ends each attempt, and the next one is submitted at once (the
    # first, which Ray keeps PENDING, is given up, not waited for)
    timed_out = wait_ended(engine, "timed-out")
    assert (timed_out.status, timed_out.reason_code, timed_out.attempt) == \
        ("FAILED", "devices_unreachable", 2)
    assert [ev.get("code") for ev in events(runs_dir / "timed-out") if ev["phase"] == "FAILED"] \
        == ["devices_unreachable"] * 2
    for attempt in (1, 2):
        assert ray_status(ray, engine, "timed-out", attempt) == "PENDING"  # Ray's 900 s
        assert given_up_path(runs_dir / "timed-out", attempt).is_file()
        assert "Ray had not started job" in _output(runs_dir, "timed-out", attempt)
    assert _never_held_devices(runs_dir, "timed-out")

    # a cancel ends it CANCELLED within a poll or two
    submit_command(engine, runs_dir, "cancelled", command, device_profile="gpu1")
    wait_for(lambda: ray_status(ray, engine, "cancelled") == "PENDING",
             what="the job to cancel to wait on Ray", deadline=JOB_DEADLINE_S, interval=0.2)
    assert control.cancel(engine, run_row(engine, "cancelled").pk, runs_dir).phase == \
        "CANCEL_REQUESTED"
    cancelled = wait_ended(engine, "cancelled")
    # the cluster never placed it: cancelled before it started
    assert (cancelled.status, cancelled.reason_code) == ("CANCELLED", "cancelled_before_start")
    assert given_up_path(runs_dir / "cancelled", 1).is_file()
    assert _never_held_devices(runs_dir, "cancelled")

    # the worker's stop ends it CANCELLED worker_stopped, and the worker exits
    submit_command(engine, runs_dir, "stopped", command, device_profile="gpu1")
    wait_for(lambda: ray_status(ray, engine, "stopped") == "PENDING",
             what="the last job to wait on Ray", deadline=JOB_DEADLINE_S, interval=0.2)
    assert workers.stop(worker) == 0
    stopped = wait_ended(engine, "stopped")
    assert (stopped.status, stopped.reason_code) == ("CANCELLED", "worker_stopped")
    assert _never_held_devices(runs_dir, "stopped")
    assert not ran.exists()


@needs_ray
@pytest.mark.slow
def test_a_dead_worker_s_job_ray_never_started_is_cancelled_by_the_reaper_at_no_cost(
        ray_head: RayHead, sqlite_index: Engine, runs_dir: Path, tmp_path: Path) -> None:
    """A job of a GPU profile waits on the two-CPU head for ever; its worker dies. A cancel
    is carried out by another worker's reaper: the job is given up on Ray and ends
    CANCELLED, never having left QUEUED or held a device."""
    from runwatch.jobs.ray_executor import RayExecutor, connect, given_up_path

    engine, ray = sqlite_index, connect(ray_head.address)
    executor = RayExecutor(ray, ray_head.address)
    profiles = runs_dir / ".runwatch" / "profiles.yaml"
    profiles.parent.mkdir(parents=True, exist_ok=True)
    profiles.write_text("profiles:\n  gpu1: {devices: 1, hourly_rate: 4.0}\n")
    ran = tmp_path / "ran"
    submit_command(engine, runs_dir, "orphan", [sys.executable, "-c", TOUCH, str(ran)],
                   device_profile="gpu1")
    held_by_a_dead_worker(engine, runs_dir, "orphan", executor)
    wait_for(lambda: ray_status(ray, engine, "orphan") == "PENDING",
             what="the job to wait on Ray", deadline=JOB_DEADLINE_S, interval=0.2)

    reap = dead_worker_reaper(engine, executor)
    assert reap() == 0  # Ray has not started it: it still waits there
    assert _never_held_devices(runs_dir, "orphan")
    outcome = control.cancel(engine, run_row(engine, "orphan").pk, runs_dir)
    assert outcome.phase == "CANCEL_REQUESTED"
    wait_for(lambda: reap() == 1, what="the reaper to conclude the cancelled job",
             deadline=JOB_DEADLINE_S, interval=0.2)
    assert [ev["phase"] for ev in events(runs_dir / "orphan")][-1] == "CANCELLED"
    assert given_up_path(runs_dir / "orphan", 1).is_file()
    assert _never_held_devices(runs_dir, "orphan")
    assert ray_status(ray, engine, "orphan") == "PENDING"  # until Ray's 900 s
    assert not ran.exists()


@needs_ray
@pytest.mark.slow
def test_a_ray_job_given_up_while_pending_never_runs_its_command_once_placed(
        ray_head: RayHead, sqlite_index: Engine, runs_dir: Path, tmp_path: Path,
        workers: Workers) -> None:
    """A two-CPU job waits while a one-CPU job holds one of the head's two CPUs; its
    startup timeout ends it, and once the other job ends and Ray places it, its command
    does not run."""
    from runwatch.jobs.ray_executor import TERMINAL, connect

    engine, ray = sqlite_index, connect(ray_head.address)
    profiles = runs_dir / ".runwatch" / "profiles.yaml"
    profiles.parent.mkdir(parents=True, exist_ok=True)
    profiles.write_text("profiles:\n  cpu: {devices: 2}\n")
    gate, ran = tmp_path / "gate", tmp_path / "ran"
    submit_command(engine, runs_dir, "holds-a-cpu", [sys.executable, "-c", PLAIN, str(gate)],
                   priority=2)
    submit_command(engine, runs_dir, "two-cpus", [sys.executable, "-c", TOUCH, str(ran)],
                   devices=2, startup_timeout_s=2)
    spawn_ray_worker(workers, runs_dir, tmp_path / "index.db", ray_head, "--devices=3")
    wait_for(lambda: ray_status(ray, engine, "holds-a-cpu") == "RUNNING",
             what="the one-CPU job to run", deadline=JOB_DEADLINE_S, interval=0.2)
    two = wait_ended(engine, "two-cpus")
    assert (two.status, two.reason_code) == ("FAILED", "devices_unreachable")
    assert ray_status(ray, engine, "two-cpus") == "PENDING"

    gate.touch()  # its CPU is free: Ray places the job it was told to stop
    wait_for(lambda: ray_status(ray, engine, "two-cpus") in TERMINAL,
             what="Ray to place and end the given-up job", deadline=JOB_DEADLINE_S,
             interval=0.2)
    assert not ran.exists()
    two = wait_ended(engine, "two-cpus")
    assert (two.status, two.reason_code, two.attempt) == ("FAILED", "devices_unreachable", 1)


@needs_ray
@pytest.mark.slow
def test_an_entrypoint_exits_without_running_its_command_once_its_attempt_was_given_up(
        ray_head: RayHead, sqlite_index: Engine, runs_dir: Path, tmp_path: Path) -> None:
    from runwatch.jobs.ray_executor import RayExecutor, connect, give_up, given_up_path

    engine, ray = sqlite_index, connect(ray_head.address)
    ran = tmp_path / "ran"
    run = submit_command(engine, runs_dir, "given-up", [sys.executable, "-c", TOUCH, str(ran)])
    give_up(given_up_path(run.dir, 1), "before it was submitted")
    held_by_a_dead_worker(engine, runs_dir, "given-up", RayExecutor(ray, ray_head.address))
    wait_for(lambda: ray_status(ray, engine, "given-up") == "FAILED",
             what="the given-up job to exit", deadline=JOB_DEADLINE_S, interval=0.2)
    assert not ran.exists()
    logs = ray.get_job_logs(f"runwatch-{run.run_id}-1")
    assert "was given up before Ray started it" in logs
