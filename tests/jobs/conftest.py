"""The Ray tests' fixtures (their helpers are in tests/jobs/rayhelp.py). Function- or
session-scoped only: a module-, class- or package-scoped fixture here would make
tests/conftest.py hand every file of this folder to one xdist worker whole. The head a test
runs on is the one its worker's Ray files share (`shared_ray_head`: rayhelp's docstring
says why), which this worker stops after the last test that takes it
(pytest_runtest_teardown)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from sqlalchemy import Engine

from runwatch.rundir import format as fmt
from runwatch.store.db import open_engine
from tests.jobs.rayhelp import (
    JOB_DEADLINE_S,
    KeptHead,
    RayHead,
    head_gone,
    start_head_past_a_taken_port,
)
from tests.support.wait import wait_for


@pytest.fixture(scope="session")
def shared_ray_head() -> Iterator[KeptHead]:
    """The Ray head of this worker's Ray files, started for the first test that takes it as a
    loaded CI machine can have it start (rayhelp.start_head_past_a_taken_port); stopped
    after the last one (pytest_runtest_teardown), or here where that one did not end."""
    heads = KeptHead(start_head_past_a_taken_port)
    yield heads
    heads.down()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """Stop the shared Ray head after the test's own teardown (`ray_head` stops its jobs)
    when no test after it in this session takes it: a head idles at about 6% of a core.
    (Under xdist a worker runs the files of one group in the session's order.)"""
    heads = (getattr(item, "funcargs", None) or {}).get("shared_ray_head")
    yield
    if isinstance(heads, KeptHead):
        later = item.session.items[item.session.items.index(item) + 1:]
        if not any("shared_ray_head" in getattr(it, "fixturenames", ()) for it in later):
            heads.down()


@pytest.fixture
def ray_head(shared_ray_head: KeptHead) -> Iterator[RayHead]:
    """The Ray head this worker's Ray files share, left with no job running after each test
    (a test's runs and index are its own; the head's two CPUs must be free for the next
    test). Jobs that other tests gave up while Ray kept them PENDING wait on it for a GPU
    it has not, or for Ray's own start timeout: they hold none of its CPUs."""
    from runwatch.jobs.ray_executor import TERMINAL, RayUnavailable, connect, given_up_path

    head = shared_ray_head.up()

    def gone(exc: Exception) -> NoReturn:
        try:
            head_gone(head, exc)
        finally:  # the next test starts another
            shared_ray_head.down()

    try:
        connect(head.address)
    except RayUnavailable as exc:
        gone(exc)
    yield head
    try:
        client = connect(head.address)
    except RayUnavailable as exc:
        gone(exc)

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
