"""A lost worker's spend so far (`runwatch resources`, GET /api/workers) runs on while the
job it left runs on, holding its devices, and stops where the reaper let that job go: it
never goes down, before and after the reap alike.

Found in trials: trial35, defect 7, a SIGKILLed worker's spend counted until now while it
still held its job, then dropped back to its last heartbeat once a second worker reaped
that job (0.002164, then 0.000445); session 37, defect 6.3, the fix stopped it where the
worker was found lost, though its job ran on and held its devices until reaped.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from runwatch.store import jobs as store_jobs
from tests.support.cli import cli_here
from tests.support.jobs import job, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, set_back, workers

__all__ = ["workers"]  # the fixture

# A plain command that runs until the gate file exists.
GATED = ("import os, sys, time\n"
         "while not os.path.exists(sys.argv[1]):\n    time.sleep(0.05)")


def seen(runs: Path, db: str, worker_id: str) -> dict[str, Any]:
    """The worker as `runwatch resources -o json` shows it."""
    out = json.loads(cli_here("resources", str(runs), "--db", db, "-o", "json").stdout)
    return next(w for w in out["workers"] if w["id"] == worker_id)


def test_a_lost_worker_s_spend_runs_until_its_job_is_reaped_and_never_drops(
        engine: Engine, db_url: str, runs_dir: Path, tmp_path: Path,
        workers: Workers) -> None:
    gate = tmp_path / "gate"
    submit_command(engine, runs_dir, "orphan", [sys.executable, "-c", GATED, str(gate)])
    first = workers.start(runs_dir, db_url)
    wait_for(lambda: (job(engine, "orphan") or {}).get("pid"), what="the job to start")
    holder = str((job(engine, "orphan") or {})["worker_id"])
    workers.stop(first, signal.SIGKILL)  # its job runs on, with no worker watching it
    set_back(engine, holder)  # dead: its timeout set back, not waited out
    lost = wait_for(lambda: (w := seen(runs_dir, db_url, holder))["status"] == "lost" and w,
                    what="the worker to show lost")
    assert [j["name"] for j in lost["jobs"]] == ["orphan"]
    row = worker_row(engine, holder)
    rate_h = row["devices"] * row["hourly_rate"] / 3600
    found_lost = (row["heartbeat_at"] + row["heartbeat_timeout_s"] - row["started_at"]) * rate_h
    # its job holds its devices on: the spend goes on past the moment it was found lost
    later = wait_for(lambda: (w := seen(runs_dir, db_url, holder))["spend"] > found_lost and w,
                     what="the lost worker's spend to count on while its job runs")
    assert later["spend"] >= lost["spend"] > 0

    gate.touch()  # the job ends; a second worker reaps it
    workers.start(runs_dir, db_url)
    wait_for(lambda: (job(engine, "orphan") or {}).get("worker_id", "") is None,
             what="the second worker to reap the job")
    reaped = seen(runs_dir, db_url, holder)
    assert (reaped["status"], reaped["jobs"]) == ("lost", [])
    assert reaped["spend"] >= later["spend"], (later["spend"], reaped["spend"])
    # it stopped where the job was let go, and stays there
    row = worker_row(engine, holder)
    assert row["released_at"] is not None
    assert row["released_at"] > row["heartbeat_at"] + row["heartbeat_timeout_s"]
    assert reaped["spend"] == pytest.approx((row["released_at"] - row["started_at"]) * rate_h)
    assert seen(runs_dir, db_url, holder)["spend"] == reaped["spend"]


def worker_row(engine: Engine, worker_id: str) -> dict[str, Any]:
    with engine.connect() as conn:
        return next(w for w in store_jobs.list_workers(conn) if w["id"] == worker_id)
