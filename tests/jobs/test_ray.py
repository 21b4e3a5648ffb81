"""`runwatch worker --executor ray`: queued jobs run as jobs of a real Ray cluster (a head
started here by `ray start --head` on free ports, in a temp folder of its own, stopped at
teardown), through Ray's job submission API.

One worker with two devices on a two-CPU head: two jobs run at once and both finish with
their metrics indexed; a cancelled job is stopped on Ray (STOPPED) and ends CANCELLED; a
job whose script raises and one whose program does not exist end FAILED with their
reasons from the failure catalogue; a worker told to stop stops its Ray job. How Ray's
other ends (a lost node, its memory monitor, no devices) map into the catalogue is
checked on Ray's own JobDetails; what the worker does when the cluster stops answering,
forgets the job or does not take a stop, with a stand-in client; a dashboard that takes
requests and never answers times out. A SIGKILLed worker's Ray jobs run on: the reaper
asks Ray and concludes each only once Ray says it ended, from Ray's report; the sweep
stops one cancelled after its worker died; a run's next attempt starts on Ray only once
its earlier one has ended.
"""

from __future__ import annotations

import http.server
import importlib.util
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from runwatch.jobs import control
from runwatch.jobs.executors import attempt_env
from runwatch.jobs.failures import classify, exception_verdict
from runwatch.rundir import format as fmt
from runwatch.server.runner import free_port
from runwatch.store import jobs as store_jobs
from runwatch.store import schema as s
from runwatch.store.jobs import Claim
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
from tests.support.jobs import events, job, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, workers

__all__ = ["workers"]  # the fixture

SCRIPTS = Path(__file__).parent / "scripts"


# Its tests run on the Ray head the files of this group share (tests/jobs/conftest.py).
pytestmark = pytest.mark.xdist_group("ray-head")


def _loss_points(engine: Engine, name: str) -> int:
    pk = run_row(engine, name).pk
    with engine.connect() as conn:
        points = conn.execute(select(s.metric_keys.c.points).where(
            s.metric_keys.c.run_pk == pk, s.metric_keys.c.key == "loss")).scalar()
    return int(points or 0)


def _wait_concluded(engine: Engine, *names: str) -> None:
    """Wait until the worker has concluded these jobs: it saw their Ray jobs end, copied
    their output and let them go. (A run's status can say it ended earlier: its SDK
    records the end before its process exits and Ray reports it.)"""
    wait_for(lambda: all((job(engine, n) or {}).get("worker_id", "") is None for n in names),
             what=f"the worker to conclude {', '.join(names)}", deadline=JOB_DEADLINE_S)


def _wait_points(engine: Engine, name: str, expected: int) -> None:
    wait_for(lambda: _loss_points(engine, name) == expected,
             what=f"{name}'s {expected} loss points in the index")


@needs_ray
@pytest.mark.slow
def test_ray_worker_runs_two_at_once_cancels_and_classifies(
        ray_head: RayHead, sqlite_index: Engine, runs_dir: Path, tmp_path: Path,
        workers: Workers) -> None:
    from runwatch.jobs.ray_executor import connect

    engine, ray = sqlite_index, connect(ray_head.address)
    gate, never = tmp_path / "gate", tmp_path / "never"
    gated = [sys.executable, str(SCRIPTS / "gated.py")]
    # Claimed by priority: the pair first, then the cancel and the failures.
    for name in ("one", "two"):
        submit_command(engine, runs_dir, name, [*gated, str(gate)], priority=2)
    submit_command(engine, runs_dir, "cancelled", [*gated, str(never)], priority=1)
    submit_command(engine, runs_dir, "raises", [sys.executable, str(SCRIPTS / "crash.py")],
                   priority=1)
    submit_command(engine, runs_dir, "no-program", [str(tmp_path / "no-such-program")])
    submit_command(engine, runs_dir, "last", [*gated, str(never)], priority=-1)
    worker = spawn_ray_worker(workers, runs_dir, tmp_path / "index.db", ray_head, "--devices=2")

    def status(name: str) -> str:
        return str(run_row(engine, name).status)

    wait_for(lambda: status("one") == status("two") == "RUNNING",
             what="jobs one and two to run at once", deadline=JOB_DEADLINE_S, interval=0.1)
    assert [ray_status(ray, engine, n) for n in ("one", "two")] == ["RUNNING"] * 2
    gate.touch()
    wait_for(lambda: status("one") in fmt.TERMINAL_PHASES and status("two") in
             fmt.TERMINAL_PHASES, what="jobs one and two to end", deadline=JOB_DEADLINE_S)
    _wait_concluded(engine, "one", "two")
    for name in ("one", "two"):
        assert status(name) == "SUCCEEDED"
        assert ray_status(ray, engine, name) == "SUCCEEDED"
        lines = (runs_dir / name / fmt.METRICS).read_text().splitlines()
        _wait_points(engine, name, len(lines))
        output = (runs_dir / name / "attempts" / "1" / fmt.OUTPUT_LOG).read_text()
        assert f"Ray job runwatch-{run_row(engine, name).run_id}-1" in output

    wait_for(lambda: status("cancelled") == "RUNNING", what="the job to cancel to run",
             deadline=JOB_DEADLINE_S)
    assert control.cancel(engine, run_row(engine, "cancelled").pk, runs_dir).phase == \
        "CANCEL_REQUESTED"
    wait_for(lambda: status("cancelled") == "CANCELLED", what="the cancel to end the job",
             deadline=JOB_DEADLINE_S)
    # The job's SDK recorded CANCELLED on Ray's SIGTERM; Ray says STOPPED once it is gone.
    wait_for(lambda: ray_status(ray, engine, "cancelled") == "STOPPED",
             what="Ray to say the cancelled job STOPPED", interval=0.2)
    assert run_row(engine, "cancelled").reason_code == "cancelled"

    wait_for(lambda: all(status(n) in fmt.TERMINAL_PHASES for n in ("raises", "no-program")),
             what="the failing jobs to end", deadline=JOB_DEADLINE_S)
    _wait_concluded(engine, "raises", "no-program")
    raises, missing = run_row(engine, "raises"), run_row(engine, "no-program")
    assert (raises.status, raises.reason_code) == ("FAILED", "failed")
    assert (missing.status, missing.reason_code) == ("FAILED", "could_not_start")
    assert ray_status(ray, engine, "raises") == "FAILED"
    # The reason keeps no exception text; the run's logs keep what the job printed.
    assert "runwatch_e2e_secret" not in (raises.reason or "")
    assert "runwatch_e2e_secret" in (runs_dir / "raises" / "attempts" / "1" /
                                     fmt.OUTPUT_LOG).read_text()

    # A worker told to stop stops its Ray jobs, as a cancel would.
    wait_for(lambda: status("last") == "RUNNING", what="the last job to run",
             deadline=JOB_DEADLINE_S)
    assert workers.stop(worker) == 0
    assert ray_status(ray, engine, "last") == "STOPPED"
    assert status("last") == "CANCELLED"


@needs_ray
@pytest.mark.slow
def test_a_dead_workers_ray_jobs_run_on_and_end_as_ray_says(
        ray_head: RayHead, sqlite_index: Engine, runs_dir: Path, tmp_path: Path,
        workers: Workers) -> None:
    """A SIGKILLed worker's Ray jobs run on (plain commands: no SDK records their end). The
    worker started after it asks Ray before it concludes them: the one that then exits 0
    ends SUCCEEDED (it was concluded FAILED `stopped_early` while it still ran on Ray, and
    only then stopped by the sweep); the other, with an attempt left, runs on held by the
    dead worker with no next attempt beside it until it is cancelled, when the sweep
    stops it and it ends CANCELLED."""
    from runwatch.jobs.ray_executor import connect

    engine, ray = sqlite_index, connect(ray_head.address)
    for name, attempts in (("again", 2), ("once", 1)):
        submit_command(engine, runs_dir, name, [sys.executable, "-c", PLAIN,
                                                str(tmp_path / f"{name}-gate")],
                       max_attempts=attempts)
    first = spawn_ray_worker(workers, runs_dir, tmp_path / "index.db", ray_head, "--devices=2")
    wait_for(lambda: [ray_status(ray, engine, n) for n in ("again", "once")] == ["RUNNING"] * 2,
             what="both Ray jobs to run", deadline=JOB_DEADLINE_S, interval=0.2)
    dead = (job(engine, "again") or {})["worker_id"]
    workers.stop(first, signal.SIGKILL)
    # on the same index and runs folder
    spawn_ray_worker(workers, runs_dir, tmp_path / "index.db", ray_head, "--devices=2")
    (tmp_path / "once-gate").touch()
    once = wait_ended(engine, "once")
    assert (once.status, once.reason_code) == ("SUCCEEDED", None)
    assert ray_status(ray, engine, "once") == "SUCCEEDED"
    # Both claims went stale together and a pass reaps them in run order, so the pass that
    # concluded 'once' asked Ray of 'again' first: it runs on, still held, attempt 1 only.
    held = job(engine, "again") or {}
    assert (held["worker_id"], held["attempt"]) == (dead, 1)
    assert ray_status(ray, engine, "again") == "RUNNING"
    assert ray_status(ray, engine, "again", 2) == ""
    assert control.cancel(engine, run_row(engine, "again").pk, runs_dir).phase == "CANCEL_REQUESTED"
    again = wait_ended(engine, "again")
    assert (again.status, again.reason_code) == ("CANCELLED", "cancelled")
    assert ray_status(ray, engine, "again") == "STOPPED"
    assert ((job(engine, "again") or {})["attempt"], ray_status(ray, engine, "again", 2)) == \
        (1, "")


@needs_ray
@pytest.mark.slow
def test_the_reaper_concludes_a_dead_workers_ray_job_only_once_ray_says_it_ended(
        ray_head: RayHead, sqlite_index: Engine, runs_dir: Path, tmp_path: Path) -> None:
    """Another worker's reaper, past the heartbeat timeout, leaves the Ray job alone while
    Ray says it runs, and concludes it from Ray's report once it has ended: a command that
    raises ends FAILED `failed` with its output copied from Ray, queued again as attempt 2
    (it was concluded `stopped_early` while it still ran)."""
    from runwatch.jobs.ray_executor import RayExecutor, connect, submission_id

    engine, ray = sqlite_index, connect(ray_head.address)
    executor = RayExecutor(ray, ray_head.address)
    gate = tmp_path / "gate"
    code = PLAIN + "raise ValueError('the gate opened')\n"
    submit_command(engine, runs_dir, "held", [sys.executable, "-c", code, str(gate)],
                   max_attempts=2)
    claim = held_by_a_dead_worker(engine, runs_dir, "held", executor)
    wait_for(lambda: ray_status(ray, engine, "held") == "RUNNING", what="the Ray job to run",
             deadline=JOB_DEADLINE_S, interval=0.2)
    reap = dead_worker_reaper(engine, executor, runs_dir)

    assert reap() == 0
    held = job(engine, "held") or {}
    assert (held["worker_id"], held["attempt"]) == ("dead", 1)
    assert ray_status(ray, engine, "held") == "RUNNING"
    gate.touch()
    wait_for(lambda: ray_status(ray, engine, "held") == "FAILED",
             what="the Ray job to exit", deadline=JOB_DEADLINE_S, interval=0.2)
    wait_for(lambda: reap() == 1, what="the reaper to conclude the job",
             deadline=JOB_DEADLINE_S, interval=0.2)
    assert [ev.get("code") for ev in events(Path(claim.dir))
            if ev["phase"] == "FAILED"] == ["failed"]
    assert run_row(engine, "held").status == "QUEUED"
    assert (job(engine, "held") or {})["attempt"] == 2
    output = (Path(claim.dir) / "attempts" / "1" / fmt.OUTPUT_LOG).read_text()
    assert "ValueError: the gate opened" in output
    assert f"Ray job {submission_id(claim)}" in output


# Attempt 1 ignores SIGTERM (Ray SIGKILLs it after its stop wait); any later one exits.
STUBBORN = ("import os, signal, sys, time\n"
            "if os.environ['RUNWATCH_ATTEMPT'] == '1':\n"
            "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "    time.sleep(300)\n")


@needs_ray
@pytest.mark.slow
def test_an_attempt_starts_on_ray_only_once_the_earlier_one_has_ended(
        ray_head: RayHead, sqlite_index: Engine, runs_dir: Path) -> None:
    """Attempt 1 still runs on Ray (its worker gave it up) when attempt 2 starts: `start`
    stops it and submits attempt 2 only once Ray says attempt 1 ended (it submitted at
    once, with attempt 1 still running until Ray's SIGKILL)."""
    from runwatch.jobs.ray_executor import TERMINAL, RayExecutor, connect

    engine, ray = sqlite_index, connect(ray_head.address)
    executor = RayExecutor(ray, ray_head.address)
    submit_command(engine, runs_dir, "twice", STUBBORN, max_attempts=2)
    first = held_by_a_dead_worker(engine, runs_dir, "twice", executor)
    wait_for(lambda: ray_status(ray, engine, "twice") == "RUNNING",
             what="attempt 1 to run", deadline=JOB_DEADLINE_S, interval=0.2)
    with engine.begin() as conn:  # given up: queued again as attempt 2
        store_jobs.requeue(conn, first.run_pk, 2)
        conn.execute(update(s.runs).where(s.runs.c.pk == first.run_pk).values(status="QUEUED"))
    with engine.begin() as conn:
        second = store_jobs.claim(conn, "next", 1, time.time())
    assert second is not None and second.attempt == 2
    executor.start(second, attempt_env(second),
                   fmt.attempt_dir(Path(second.dir), 2) / fmt.OUTPUT_LOG)
    assert ray_status(ray, engine, "twice", 1) in TERMINAL
    assert ray_status(ray, engine, "twice", 2) != ""


def test_which_ray_jobs_a_sweep_stops() -> None:
    """Only the attempt a worker still holds runs on; a dead holder's is left to the reaper
    (its SDK records its end) unless it was cancelled; another index's run is left alone."""
    from runwatch.jobs.ray_executor import orphaned, parse_submission_id

    def row(**fields: Any) -> Any:
        held = {"attempt": 2, "status": "RUNNING", "worker_id": "w", "heartbeat_at": 100.0,
                "heartbeat_timeout_s": 50.0, "cancel_requested_at": None}
        return SimpleNamespace(**{**held, **fields})

    assert parse_submission_id("runwatch-ab-cd-2") == ("ab-cd", 2)
    assert parse_submission_id("raysubmit_x") is None
    assert parse_submission_id("runwatch-x-y") is None
    assert orphaned(2, row(), now=100.0) is None
    assert orphaned(2, row(heartbeat_at=10.0), now=100.0) is None  # a dead holder
    assert orphaned(2, None, now=100.0) is None
    assert "attempt 2" in (orphaned(1, row(), now=100.0) or "")
    # a run that ended while its live holder still watches the process (after finish())
    assert orphaned(2, row(status="SUCCEEDED"), now=100.0) is None
    assert "ended FAILED" in (orphaned(2, row(status="FAILED", heartbeat_at=10.0),
                                       now=100.0) or "")
    assert "no worker" in (orphaned(2, row(worker_id=None), now=100.0) or "")
    cancelled = row(cancel_requested_at=90.0, heartbeat_at=10.0)
    assert "cancelled" in (orphaned(2, cancelled, now=100.0) or "")
    assert orphaned(2, row(cancel_requested_at=90.0), now=100.0) is None  # it stops it


def _details(status: str, **fields: Any) -> Any:
    from ray.job_submission import JobDetails

    return JobDetails(type="SUBMISSION", status=status, entrypoint="true", **fields)


OUTCOMES = [
    # Ray's report of a job's end -> the catalogue reason (None: SUCCEEDED)
    (("SUCCEEDED", {"driver_exit_code": 0}, ""), None),
    (("FAILED", {"error_type": "JOB_ENTRYPOINT_COMMAND_ERROR", "driver_exit_code": 1},
      "Traceback (most recent call last):\n  File \"x\"\nValueError: no\n"), "failed"),
    (("FAILED", {"error_type": "JOB_ENTRYPOINT_COMMAND_ERROR", "driver_exit_code": -9}, ""),
     "stopped"),
    (("FAILED", {"error_type": "JOB_ENTRYPOINT_COMMAND_ERROR", "driver_exit_code": 127},
      "/bin/sh: 1: exec: train: not found\n"), "could_not_start"),
    (("FAILED", {"error_type": "JOB_ENTRYPOINT_COMMAND_ERROR", "driver_exit_code": 1},
      "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on "
      "memory.\n"), "host_oom"),
    (("FAILED", {"error_type": "RUNTIME_ENV_SETUP_FAILURE"}, ""), "could_not_start"),
    (("FAILED", {"error_type": "JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE"}, ""),
     "devices_unreachable"),
    (("FAILED", {"error_type": "JOB_SUPERVISOR_ACTOR_DIED",
                 "message": "Job supervisor actor died: the node was terminated"}, ""),
     "stopped_early"),
    (("FAILED", {"error_type": "JOB_SUPERVISOR_ACTOR_DIED",
                 "message": "1 worker(s) were killed due to the node running low on memory."},
      ""), "host_oom"),
    (("STOPPED", {}, ""), "stopped"),
]


@needs_ray
@pytest.mark.parametrize(("seen", "reason"), OUTCOMES)
def test_ray_outcomes_map_into_the_catalogue(seen: tuple[str, dict[str, Any], str],
                                             reason: str | None) -> None:
    from runwatch.jobs.ray_executor import observed_end

    status, fields, output = seen
    verdict = classify(observed_end(status, _details(status, **fields), None, output,
                                    cancel_requested=False, startup_timed_out=False))
    assert verdict.code == reason


@needs_ray
def test_ray_stopped_by_a_cancel_or_lost_maps_into_the_catalogue() -> None:
    from runwatch.jobs.ray_executor import observed_end

    stopped = _details("STOPPED")
    assert classify(observed_end("STOPPED", stopped, None, "", cancel_requested=True,
                                 startup_timed_out=False)).code == "cancelled"
    assert classify(observed_end("STOPPED", stopped, None, "", cancel_requested=False,
                                 startup_timed_out=True)).code == "startup_timeout"
    assert classify(observed_end("RUNNING", None, "the cluster did not answer", "",
                                 cancel_requested=False, startup_timed_out=False)
                    ).code == "stopped_early"


@needs_ray
def test_a_loop_ended_by_rays_memory_monitor_is_host_oom() -> None:
    """Ray's OutOfMemoryError is named like a device's, but it means the node's memory."""
    from ray.exceptions import OutOfMemoryError

    exc = OutOfMemoryError("Task was killed due to the node running low on memory.")
    assert exception_verdict(exc).code == "host_oom"


def test_worker_says_what_to_do_without_a_reachable_ray(runs_dir: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        ) -> None:
    """No address, an address where nothing answers, and Ray not installed: exit 2 with
    what to do, before any job is claimed. The command runs in-process (a process that
    imports Ray takes seconds to start), and as a real process where nothing answers."""
    from typer.testing import CliRunner

    from runwatch.cli.main import app

    base = ["worker", str(runs_dir), "--db", str(tmp_path / "index.db")]

    def run(*args: str) -> tuple[int, str]:
        got = CliRunner().invoke(app, [*base, *args])
        return got.exit_code, got.stderr

    code, said = run("--executor=ray")
    assert code == 2 and "needs the Ray dashboard's address" in said
    code, said = run("--address=http://127.0.0.1:1")
    assert code == 2 and "add --executor ray" in said
    code, said = run("--executor=ray", "--address=127.0.0.1:8265")
    assert code == 2 and "is not a dashboard URL" in said
    with monkeypatch.context() as hidden:  # as where the extra is not installed
        for module in [m for m in sys.modules if m == "ray" or m.startswith("ray.")]:
            hidden.setitem(sys.modules, module, None)
        hidden.setitem(sys.modules, "ray", None)
        code, said = run("--executor=ray", f"--address=http://127.0.0.1:{free_port()}")
    assert code == 2 and "pip install 'runwatch[ray]'" in said
    if importlib.util.find_spec("ray") is not None:
        got = subprocess.run([sys.executable, "-m", "runwatch", *base, "--executor=ray",
                              f"--address=http://127.0.0.1:{free_port()}"],
                             capture_output=True, text=True, timeout=120)
        assert got.returncode == 2 and "no Ray dashboard answers at" in got.stderr


class _Cluster:
    """A job submission client whose answers the test sets: `info` (a JobDetails-like
    object) or `error` (raised by get_job_info), and stops refused while `refuse_stops`."""

    def __init__(self) -> None:
        self.info: Any = None
        self.error: Exception | None = None
        self.refuse_stops = 0
        self.stops = 0

    def get_job_info(self, job_id: str) -> Any:
        if self.error is not None:
            raise self.error
        return self.info

    def get_job_logs(self, job_id: str) -> str:
        return "printed\n"

    def stop_job(self, job_id: str) -> bool:
        if self.refuse_stops:
            self.refuse_stops -= 1
            raise RuntimeError("connection refused")
        self.stops += 1
        return True


def _attempt(cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from runwatch.jobs import ray_executor

    monkeypatch.setattr(ray_executor, "POLL_S", 0.0)
    return ray_executor.RayAttempt(cluster, "runwatch-x-1", tmp_path / "output.log")


def test_a_cluster_that_stops_answering_is_given_up(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from runwatch.jobs import ray_executor

    cluster = _Cluster()
    cluster.error = RuntimeError("connection refused")
    attempt = _attempt(cluster, tmp_path, monkeypatch)
    assert not attempt.poll() and attempt.lost is None  # one miss is asked again
    monkeypatch.setattr(ray_executor, "UNREACHABLE_S", 0.0)
    assert attempt.poll() and attempt.poll()
    assert "did not answer" in (attempt.lost or "")
    assert "ray job stop runwatch-x-1" in attempt.output.read_text()
    end = attempt.end(cancel_requested=False, startup_timed_out=False)
    assert classify(end).code == "stopped_early"


def test_a_job_the_cluster_forgot_is_given_up_at_once(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = _Cluster()
    cluster.error = RuntimeError("Request failed with status code 404: job does not exist")
    attempt = _attempt(cluster, tmp_path, monkeypatch)
    assert attempt.poll()
    assert "no longer knows the job" in (attempt.lost or "")


def test_a_stop_not_taken_is_sent_again_and_the_end_read(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = _Cluster()
    cluster.info = SimpleNamespace(status="RUNNING")
    cluster.refuse_stops = 1
    attempt = _attempt(cluster, tmp_path, monkeypatch)
    attempt.stop(5.0)
    attempt.stop(5.0)  # asking again changes nothing
    assert cluster.stops == 0 and attempt.stop_started is not None
    assert not attempt.poll() and cluster.stops == 1  # re-sent on the next poll
    assert not attempt.poll() and cluster.stops == 1
    cluster.info = SimpleNamespace(status="STOPPED", message="stopped by the user")
    assert attempt.poll() and attempt.poll()
    assert attempt.lost is None and attempt.status == "STOPPED"
    assert "printed" in attempt.output.read_text()
    end = attempt.end(cancel_requested=True, startup_timed_out=False)
    assert classify(end).code == "cancelled"


def test_what_an_executor_tells_the_reaper_of_a_dead_workers_attempt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ray job runs while Ray says so and ends as Ray reports (a cancel asked after its
    worker died: `cancelled`); one Ray does not know, or a cluster silent past
    UNREACHABLE_S, is lost; an attempt with a pid is a local process group, seen only
    from its own host, whichever executor asks."""
    from runwatch.jobs import ray_executor
    from runwatch.jobs.executors import LocalExecutor

    monkeypatch.setattr(ray_executor, "POLL_S", 0.0)
    claim = Claim(run_pk=1, run_id="r", name="n", dir=str(tmp_path), attempt=1, argv=["x"],
                  cwd=str(tmp_path), devices=1, device_profile="cpu", startup_timeout_s=None)
    cluster = _Cluster()
    executor = ray_executor.RayExecutor(cluster, "http://127.0.0.1:1")
    held = {"pid": None, "cancel_requested_at": None}
    cluster.info = SimpleNamespace(status="RUNNING")
    assert executor.seen(claim, held, socket.gethostname()).running
    cluster.info = SimpleNamespace(status="STOPPED", message="stopped")
    seen = executor.seen(claim, {**held, "cancel_requested_at": 5.0}, None)
    assert not seen.running and seen.end is not None and classify(seen.end).code == "cancelled"
    assert "Ray job runwatch-r-1 at http://127.0.0.1:1" in (
        tmp_path / "attempts" / "1" / fmt.OUTPUT_LOG).read_text()
    cluster.info = None
    cluster.error = RuntimeError("Request failed with status code 404: job does not exist")
    seen = executor.seen(claim, held, None)
    assert not seen.running and seen.end is not None
    assert classify(seen.end).code == "stopped_early"
    cluster.error = RuntimeError("connection refused")
    assert executor.seen(claim, held, None).running  # asked again next heartbeat
    monkeypatch.setattr(ray_executor, "UNREACHABLE_S", 0.0)
    seen = executor.seen(claim, held, None)
    assert not seen.running and seen.end is not None and seen.end.worker_lost
    with subprocess.Popen(["sleep", "60"], start_new_session=True) as proc:
        try:
            local = {"pid": proc.pid, "cancel_requested_at": None}
            for asker in (LocalExecutor(), executor):
                assert asker.seen(claim, local, socket.gethostname()).running
                assert not asker.seen(claim, local, "another-host").running
        finally:
            proc.kill()
    assert not LocalExecutor().seen(claim, local, socket.gethostname()).running
    assert not LocalExecutor().seen(claim, held, socket.gethostname()).running  # no pid


class _Dashboard(http.server.BaseHTTPRequestHandler):
    """A stand-in for Ray's dashboard that says its version and then answers nothing."""

    def do_GET(self) -> None:
        if self.path != "/api/version":
            self.server.release.wait(60)  # type: ignore[attr-defined]
            return
        import ray

        body = json.dumps({"version": "4", "ray_version": ray.__version__,
                           "ray_commit": "x", "session_name": "x"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@needs_ray
def test_a_dashboard_that_takes_requests_and_never_answers_times_out_with_a_clear_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runwatch.jobs import ray_executor

    # the kernel takes the connection (the listen backlog); nothing ever reads the request
    with socket.create_server(("127.0.0.1", 0)) as silent:
        address = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(ray_executor.RayUnavailable,
                           match=r"did not answer GET /api/version within 1 s"):
            ray_executor.connect(address, timeout=1.0)
    hung = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Dashboard)
    hung.daemon_threads = True
    hung.release = threading.Event()  # type: ignore[attr-defined]
    threading.Thread(target=hung.serve_forever, daemon=True).start()
    try:
        client = ray_executor.connect(f"http://127.0.0.1:{hung.server_port}", timeout=1.0)
        attempt = _attempt(client, tmp_path, monkeypatch)
        assert not attempt.poll() and attempt.lost is None  # the loop goes on; asked again
        monkeypatch.setattr(ray_executor, "UNREACHABLE_S", 0.0)
        assert attempt.poll() and "did not answer" in (attempt.lost or "")
    finally:
        hung.release.set()  # type: ignore[attr-defined]
        hung.shutdown()
        hung.server_close()
