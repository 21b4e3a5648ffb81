"""Shared fixtures: real folders, real SQLite files, the real server and CLI, and the one
SFT checkpoint the recipe and health tests start from. Helpers live in tests/support."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.rundir import format as fmt
from runwatch.server.runner import Runner, free_port
from runwatch.store.db import open_engine
from tests.support import SFT_CHECKPOINT, MakeRun, sdk_run


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    d.mkdir()
    return d


@pytest.fixture(autouse=True)
def _no_inherited_runwatch_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ("RUNWATCH_DIR", "RANK", "LOCAL_RANK", fmt.ENV_RUN_DIR, fmt.ENV_RUN_ID,
                fmt.ENV_ATTEMPT):
        monkeypatch.delenv(var, raising=False)
    yield


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    """A fresh SQLite index in the test's folder."""
    eng = open_engine(tmp_path / "index.db")
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
def sft_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The folder of one SFT run on the tiny model (tests.support.SFT_CHECKPOINT), trained
    once per session. Start GRPO or DPO from it, index it; never write into its folder."""
    torch = pytest.importorskip("torch")
    from runwatch.recipes import sft

    runs = tmp_path_factory.mktemp("sft-checkpoint")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert sft.main([*SFT_CHECKPOINT, f"runs_dir={runs}"]) == 0
    finally:
        torch.set_num_threads(before)
    yield runs / "sft"

