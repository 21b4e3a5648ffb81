"""A Ray cluster that answers but refuses jobs for now does not spend them. A head whose
dashboard answers while the agent that takes jobs is not up (it starts after the
dashboard, and one that cannot bind its port lives on without its HTTP server) holds each
submission 10 s and refuses it: "No available agent to submit job, please try again
later". Before, the worker ended each job it claimed FAILED `could_not_start` at once (a
worker started with its cluster burned its queue so). Now it keeps the claim, claims no
other job meanwhile, asks again until the job's startup timeout (then `could_not_start`,
its output saying what Ray answered), and a cancel ends the job CANCELLED. On a real Ray
head (its agent's port taken, as a loaded CI machine once had it), with a real `runwatch
worker` process."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.jobs import control
from runwatch.jobs.ray_executor import RayUnavailable, connect
from runwatch.rundir import format as fmt
from runwatch.store import jobs as store_jobs
from tests.jobs import rayhelp
from tests.jobs.rayhelp import PLAIN, RayHead, needs_ray, reported, spawn_ray_worker, told
from tests.support.jobs import events, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, workers

__all__ = ["workers"]  # the fixture


@pytest.fixture(scope="module")
def refusing_head() -> Iterator[RayHead]:
    """A Ray head whose dashboard agent cannot bind its port (held here): its dashboard
    answers, and it refuses every job."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        head = rayhelp._launch(None, agent_port=taken.getsockname()[1])
        try:
            def answers() -> bool:
                try:
                    connect(head.address)
                except RayUnavailable:
                    return False
                return True

            with reported(head, lambda: "its dashboard did not answer"):
                wait_for(answers, what="the Ray head's dashboard to answer",
                         deadline=rayhelp.HEAD_DEADLINE_S, interval=0.5)
            yield head
        finally:
            rayhelp.stop_head(head)


@needs_ray
@pytest.mark.slow
def test_a_job_a_ray_cluster_refuses_for_now_is_kept_not_failed_and_can_be_cancelled(
        refusing_head: RayHead, sqlite_index: Engine, runs_dir: Path, tmp_path: Path,
        workers: Workers) -> None:
    engine, db = sqlite_index, tmp_path / "index.db"
    run = submit_command(engine, runs_dir, "refused",
                         [sys.executable, "-c", PLAIN, str(tmp_path / "gate")],
                         startup_timeout_s=600)
    submit_command(engine, runs_dir, "behind", [sys.executable, "-c", PLAIN,
                                                str(tmp_path / "gate")])
    spawn_ray_worker(workers, runs_dir, db, refusing_head, "--devices=2")

    def refused() -> bool:
        for name in ("refused", "behind"):
            if run_row(engine, name).status in fmt.TERMINAL_PHASES:  # spent: say how
                pytest.fail(told(refusing_head, engine, "refused", "behind"))
        with engine.connect() as conn:
            said = [w.get("unavailable") or "" for w in store_jobs.list_workers(conn)]
        return any("refuses jobs for now" in why and "try again later" in why
                   for why in said)

    with reported(refusing_head, lambda: told(refusing_head, engine, "refused", "behind")):
        wait_for(refused, what="the worker to say its cluster refuses jobs for now",
                 deadline=rayhelp.JOB_DEADLINE_S, interval=0.2)
    # held, not spent: the first job's attempt 1 waits QUEUED (its start event names the
    # worker), and the second was not claimed while the cluster refuses
    row = run_row(engine, "refused")
    assert (row.status, row.attempt) == ("QUEUED", 1)
    assert any(e.get("worker") for e in events(run.dir))
    assert run_row(engine, "behind").status == "QUEUED"
    with engine.connect() as conn:
        assert (store_jobs.job_row(conn, run_row(engine, "behind").pk) or {}).get(
            "worker_id") is None

    control.cancel(engine, run.run_pk)
    ended = rayhelp.wait_ended(engine, "refused", refusing_head)
    # Ray never took it: it was cancelled before it started
    assert (ended.status, ended.reason_code, ended.attempt) == (
        "CANCELLED", "cancelled_before_start", 1)
    logs = "".join(p.read_text() for p in tmp_path.glob("worker-*.log"))
    assert "cannot start refused attempt 1 now" in logs, logs[-2000:]
    assert "refuses jobs for now" in logs


@needs_ray
@pytest.mark.slow
def test_a_job_refused_past_its_startup_timeout_could_not_start_saying_what_ray_answered(
        refusing_head: RayHead, sqlite_index: Engine, runs_dir: Path, tmp_path: Path,
        workers: Workers) -> None:
    engine, db = sqlite_index, tmp_path / "index.db"
    run = submit_command(engine, runs_dir, "timed-out",
                         [sys.executable, "-c", PLAIN, str(tmp_path / "gate")],
                         startup_timeout_s=2)
    spawn_ray_worker(workers, runs_dir, db, refusing_head)
    ended = rayhelp.wait_ended(engine, "timed-out", refusing_head)
    assert (ended.status, ended.reason_code, ended.attempt) == ("FAILED", "could_not_start", 1)
    output = (fmt.attempt_dir(run.dir, 1) / fmt.OUTPUT_LOG).read_text()
    assert "its cluster did not take timed-out attempt 1 within its startup timeout (2 s): " \
        "its Ray cluster at" in output, output
    assert "refuses jobs for now" in output and "try again later" in output, output
