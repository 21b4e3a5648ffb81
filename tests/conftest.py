"""Shared fixtures: real folders, the index on SQLite and on PostgreSQL, the real server and
CLI, and the one SFT checkpoint the recipe and health tests start from; and how `make test`
spreads the tests over pytest-xdist's workers. Helpers live in tests/support."""

from __future__ import annotations

import re
import shutil
import signal
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock
from sqlalchemy import Engine

from runwatch.rundir import format as fmt
from runwatch.sdk import live
from runwatch.server.runner import Runner, free_port
from runwatch.store.db import database_url, open_engine
from tests.support import SFT_CHECKPOINT, MakeRun, sdk_run
from tests.support.parallel import session_folder
from tests.support.stores import NO_POSTGRES, STORES, PostgresDatabases, postgres_url

# Tests that took 15 s or more in CI (2 cores, 3 workers), by node id prefix: under `--dist
# loadgroup` they are handed out before the other single tests, so that none starts last.
SLOW_FIRST = (
    "tests/test_first_ten_minutes.py::test_every_readme_command_runs_as_written",
    "tests/test_first_ten_minutes.py::test_every_command_the_demo_prints",
    "tests/health/test_scoring.py::test_health_eval_on_the_real_corpus_held_out",
    "tests/jobs/test_e2e.py::",
    "tests/compat/test_hf.py::test_training_that_raises",
    "tests/compat/test_bench_callback.py::",
    "tests/server/test_stream_load.py::",
    "tests/interop/test_tensorboard.py::test_the_tensorboard_it_starts",
    "tests/interop/test_tensorboard.py::test_export_matches_every_value",
    "tests/foundation/test_big_run.py::test_a_run_of_several_index_slices",
    "tests/test_bench_smoke.py::",
    "tests/server/test_summaries.py::test_every_stored_level_reads_the_same",
)
# Started where SIGINT is ignored (`nohup make test &`, a shell without job control), this
# process and every child it starts would inherit SIG_IGN, and the tests that stop a server
# or a follower with Ctrl-C would wait on a process that cannot get it. A handler (unlike
# SIG_IGN) goes back to the default in an exec'd child, so the children get Ctrl-C again.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_SHARED_SCOPE = re.compile(r"""@pytest\.fixture\(\s*scope\s*=\s*["'](module|class|package)["']""")
_GROUP_MARK = re.compile(r"""^pytestmark = pytest\.mark\.xdist_group\(["']([\w-]+)["']\)$""", re.M)


def grouped_files(root: Path) -> frozenset[str]:
    """The test files (as node ids name them) whose tests share a module-, class- or
    package-scoped fixture defined in the file, in a conftest.py above it, or in a test
    file it imports from."""
    tests = root / "tests"
    found = [f for f in tests.rglob("*.py") if _SHARED_SCOPE.search(f.read_text())]
    above = [f.parent for f in found if f.name == "conftest.py"]
    lenders = [f"from {f.relative_to(root).with_suffix('').as_posix().replace('/', '.')} import"
               for f in found if f.name.startswith("test_")]
    return frozenset(f.relative_to(root).as_posix() for f in tests.rglob("test_*.py")
                     if f in found or any(f.is_relative_to(d) for d in above)
                     or any(lender in f.read_text() for lender in lenders))


def _shared_scope(item: pytest.Item) -> str | None:
    info = getattr(item, "_fixtureinfo", None)
    scopes = {defs[-1].scope for defs in (info.name2fixturedefs.values() if info else ())
              if defs}
    return next((s for s in ("package", "module", "class") if s in scopes), None)


def file_groups(root: Path) -> dict[str, str]:
    """The test files (as node ids name them) marked `pytestmark =
    pytest.mark.xdist_group("NAME")`, each with its NAME: the files of a group share a
    session-scoped fixture too costly to build on every worker (the Ray head of
    tests/jobs/conftest.py)."""
    tests = root / "tests"
    return {f.relative_to(root).as_posix(): found.group(1) for f in tests.rglob("test_*.py")
            if (found := _GROUP_MARK.search(f.read_text()))}


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist registers it, and is left out under -p no:xdist
    config.addinivalue_line("markers", "xdist_group(name): the test files of group `name` "
                                       "go to one xdist worker together (tests/conftest.py)")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, absent under -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`--dist loadgroup` (make test): the test files of one `xdist_group` go to one worker
    together (file_groups), a test file whose tests share a module-scoped fixture to one
    worker whole (grouped_files), every other test to whichever worker is free. xdist's
    own loadgroup reads `xdist_group` marks, which it cannot see under pytest 9.2
    (pytest-xdist issue 1386)."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    grouped = grouped_files(config.rootpath)
    groups = file_groups(config.rootpath)

    class FilesWithSharedFixtures(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path in groups:
                return f"xdist_group {groups[path]}"
            return path if path in grouped else nodeid

    return FilesWithSharedFixtures(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker under `--dist loadgroup`: the slow tests (`slow` mark, SLOW_FIRST)
    first (xdist hands out the grouped files, largest first, then the single tests in this
    order), and a warning where a test shares a fixture that grouped_files did not find."""
    if not config.getoption("loadgroup", False):  # what xdist sets on its workers
        return
    grouped = grouped_files(config.rootpath)
    for item in items:
        scope = _shared_scope(item)
        if scope is not None and item.nodeid.split("::", 1)[0] not in grouped:
            item.warn(pytest.PytestWarning(
                f"shares a {scope}-scoped fixture that tests/conftest.py's grouped_files does "
                "not see, so xdist spreads its file and builds the fixture on every worker"))
    items.sort(key=lambda item: not (item.get_closest_marker("slow") is not None
                                     or item.nodeid.startswith(SLOW_FIRST)))


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


@pytest.fixture(autouse=True)
def _no_run_left_live() -> Iterator[None]:
    """A run a test leaves live (it failed before finish()) keeps the SDK's SIGTERM
    handler and exit hooks in this worker's process, where a later test reads them
    (test_sdk_signals failed in CI after a browser test failed mid-run): end it FAILED
    here, and say so."""
    before = set(live.live_runs())
    yield
    left = [run for run in live.live_runs() if run not in before]
    for run in left:
        run.finish("FAILED", "the test ended while this run was still live")
    if left:
        warnings.warn(pytest.PytestWarning(
            f"the test left {len(left)} run(s) live; ended them FAILED: "
            + ", ".join(str(run.dir) for run in left)), stacklevel=1)


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
    """The real server on a free loopback port, indexing `runs_dir` every 50 ms. Without the
    warm-up request (`warm=False`): it only moves the first calls' cost before the first
    request (0.1-0.2 s a start under load); tests/server/test_overlay.py tests it."""
    with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05,
                warm=False) as srv:
        yield srv


@pytest.fixture
def make_run(runs_dir: Path) -> MakeRun:
    """`make_run(name, steps=…, metrics=…, status=…, **init fields)`: a finished run in
    `runs_dir` written by the SDK (see tests.support.sdk_run); returns its run id."""

    def make(name: str, **kw: Any) -> str:
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
