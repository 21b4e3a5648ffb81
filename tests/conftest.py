"""Shared fixtures: real folders, the index on SQLite and on PostgreSQL, the real server and
CLI, and the one SFT checkpoint the recipe and health tests start from. Helpers live in
tests/support."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock
from sqlalchemy import Engine

from runwatch.rundir import format as fmt
from runwatch.server.runner import Runner, free_port
from runwatch.store.db import database_url, open_engine
from tests.support import SFT_CHECKPOINT, MakeRun, sdk_run
from tests.support.parallel import session_folder
from tests.support.stores import NO_POSTGRES, STORES, PostgresDatabases, postgres_url


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    d.mkdir()
    return d


@pytest.fixture(autouse=True)
def _no_inherited_runwatch_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # a developer's team settings would send SDK runs and CLI reads to their server
    for var in ("RUNWATCH_DIR", "RANK", "LOCAL_RANK", fmt.ENV_RUN_DIR, fmt.ENV_RUN_ID,
                fmt.ENV_ATTEMPT, "RUNWATCH_SERVER", "RUNWATCH_TOKEN", "RUNWATCH_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    yield


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresDatabases]:
    """The PostgreSQL server of RUNWATCH_TEST_POSTGRES_URL, which makes each test a database
    of its own; the test is skipped, saying how to run it, when the variable is unset."""
    url = postgres_url()
    if url is None:
        pytest.skip(NO_POSTGRES)
    databases = PostgresDatabases(url)
    yield databases
    databases.close()


@pytest.fixture(params=STORES)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a new index at the schema's head, once per store (the test's id says
    which): a SQLite file in the test's folder, or a new PostgreSQL database."""
    if request.param == "sqlite":
        yield database_url(tmp_path / "index.db")
        return
    databases: PostgresDatabases = request.getfixturevalue("postgres")
    url = databases.create()
    yield url
    databases.drop(url)


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """The index of `db_url`, on SQLite and on PostgreSQL."""
    eng = open_engine(db_url)
    yield eng
    eng.dispose()


@pytest.fixture
def server(engine: Engine, runs_dir: Path) -> Iterator[Runner]:
    """The real server on a free loopback port, indexing `runs_dir` every 50 ms."""
    with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05) as srv:
        yield srv


@pytest.fixture
def make_run(runs_dir: Path) -> MakeRun:
    """`make_run(name, steps=…, metrics=…, status=…, **init fields)`: a finished run in
    `runs_dir` written by the SDK (see tests.support.sdk_run); returns its run id."""

    def make(name: str, **kw: object) -> str:
        return sdk_run(runs_dir, name, **kw)

    return make


@pytest.fixture(scope="session")
def sft_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of one SFT run on the tiny model (tests.support.SFT_CHECKPOINT), trained
    once per session. Start GRPO or DPO from it, index it; never write into its folder.

    Under pytest-xdist the workers share it: the first to need it trains it under a file
    lock in the folder all workers' temp folders sit in, the others wait and reuse it."""
    torch = pytest.importorskip("torch")
    from runwatch.recipes import sft

    shared = session_folder(tmp_path_factory)
    runs = shared / "sft-checkpoint"
    trained = shared / "sft-checkpoint.trained"  # beside it: nothing is written into it
    with FileLock(shared / "sft-checkpoint.lock"):
        if not trained.exists():
            shutil.rmtree(runs, ignore_errors=True)  # left by a worker that died training
            before = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                assert sft.main([*SFT_CHECKPOINT, f"runs_dir={runs}"]) == 0
            finally:
                torch.set_num_threads(before)
            trained.touch()
    return runs / "sft"
