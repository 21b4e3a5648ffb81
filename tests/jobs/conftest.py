"""The Ray tests' fixtures (their helpers are in tests/jobs/rayhelp.py). Function-scoped
only: a fixture of a wider scope here would make tests/conftest.py hand every file of this
folder to one xdist worker whole. The head a test runs on is its file's own `ray_cluster`
(rayhelp's docstring says why)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from runwatch.rundir import format as fmt
from runwatch.store.db import open_engine
from tests.jobs.rayhelp import JOB_DEADLINE_S, RayHead, head_gone
from tests.support.wait import wait_for


@pytest.fixture
def ray_head(ray_cluster: RayHead) -> Iterator[RayHead]:
    """The file's Ray head, left with no job running after each test (a test's runs and
    index are its own; the head's two CPUs must be free for the next test)."""
    from runwatch.jobs.ray_executor import TERMINAL, RayUnavailable, connect, given_up_path

    try:
        connect(ray_cluster.address)
    except RayUnavailable as exc:
        head_gone(ray_cluster, exc)
    yield ray_cluster
    try:
        client = connect(ray_cluster.address)
    except RayUnavailable as exc:
        head_gone(ray_cluster, exc)

    def given_up(job: Any) -> bool:
        """A job Ray has not started that runwatch gave up: Ray keeps it PENDING, stop or
        not, until its own start timeout (it waits for GPUs the head has not), and it
        cannot run its command; it holds none of the head's CPUs."""
        env = (job.runtime_env or {}).get("env_vars") or {}
        return (str(getattr(job.status, "value", job.status)) == "PENDING"
                and fmt.ENV_RUN_DIR in env and given_up_path(
                    Path(env[fmt.ENV_RUN_DIR]), int(env[fmt.ENV_ATTEMPT])).exists())

    def running() -> list[str]:
        return [str(j.submission_id) for j in client.list_jobs()
                if str(getattr(j.status, "value", j.status)) not in TERMINAL
                and not given_up(j)]

    for submission_id in running():
        client.stop_job(submission_id)
    wait_for(lambda: not running(), what="the test's Ray jobs to stop", deadline=JOB_DEADLINE_S,
             interval=0.2)


@pytest.fixture
def sqlite_index(tmp_path: Path) -> Iterator[Engine]:
    """The worker's index, on SQLite only: the store is not what these tests are about, and
    a Ray head is too costly to start once per store (test_two_workers covers both)."""
    engine = open_engine(tmp_path / "index.db")
    yield engine
    engine.dispose()
