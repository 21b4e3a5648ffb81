"""Fixtures of the browser tests: Debian's Chromium driven by Playwright, on the shared
`server` fixture; a page fails its test on any page error or console error, except those a
test names with `@pytest.mark.console_error(PATTERN)` because it makes the server refuse."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright
from sqlalchemy import Engine

from runwatch.server.app import STATIC_DIR
from runwatch.server.runner import Runner, free_port
from runwatch.store.db import database_url, open_engine

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "console_error(pattern): a console error the test "
                            "expects (a regular expression), e.g. from a request it makes fail")
    config.addinivalue_line("markers", "module_server: the test's `server` and `runs_dir` are "
                            "the module's one server and its folder (module_server)")


def _ensure_built() -> None:
    if (STATIC_DIR / "index.html").is_file():
        return
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("the web app is not built and npm is missing: run `make web` first")
    web = REPO / "web"
    subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=web, check=True)
    subprocess.run([npm, "run", "build"], cwd=web, check=True)


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """The browser tests' index: SQLite only. The page reads the same API whichever store
    serves it, and the API, store and server tests run on PostgreSQL too; doubling every
    browser test cost the suite about three minutes of its budget."""
    return database_url(tmp_path / "index.db")


# A module's browser, not the session's: while Playwright's sync API is live its event loop
# counts as running in the main thread, so the other test files that an xdist worker runs
# after a browser file could not call asyncio.run().
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail("browser tests need Debian's Chromium: apt-get install -y chromium")
    _ensure_built()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def module_runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runs folder of `module_server`."""
    d = tmp_path_factory.mktemp("module") / "runs"
    d.mkdir()
    return d


@pytest.fixture(scope="module")
def module_server(module_runs_dir: Path) -> Iterator[Runner]:
    """One real server (SQLite index, indexing every 50 ms) for the tests marked
    `module_server` of a module, which each write runs of their own names and read only
    those (starting and stopping a server per test cost about a second each)."""
    engine = open_engine(database_url(module_runs_dir.parent / "index.db"))
    try:
        with Runner(engine, runs_dir=module_runs_dir, port=free_port(), interval=0.05,
                    warm=False) as srv:
            yield srv
    finally:
        engine.dispose()


def _shares_the_module_server(request: pytest.FixtureRequest) -> bool:
    return request.node.get_closest_marker("module_server") is not None


@pytest.fixture
def runs_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A new runs folder, or the module server's under `module_server`."""
    if _shares_the_module_server(request):
        shared: Path = request.getfixturevalue("module_runs_dir")
        return shared
    d = tmp_path / "runs"
    d.mkdir()
    return d


@pytest.fixture
def server(request: pytest.FixtureRequest, runs_dir: Path) -> Iterator[Runner]:
    """The real server on a free loopback port indexing `runs_dir` every 50 ms, on the
    `engine` fixture's index; under `module_server`, the module's one server."""
    if _shares_the_module_server(request):
        yield request.getfixturevalue("module_server")
        return
    engine: Engine = request.getfixturevalue("engine")
    with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05, warm=False) as srv:
        yield srv


@pytest.fixture
def page(browser: Browser, server: Runner, request: pytest.FixtureRequest) -> Iterator[Page]:
    # depends on `server` so that the page closes before the server stops
    expected = [re.compile(m.args[0]) for m in request.node.iter_markers("console_error")]
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    problems: list[str] = []
    pg.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type == "error" and not any(p.search(msg.text) for p in expected):
            problems.append(f"console error: {msg.text}")

    pg.on("console", on_console)
    yield pg
    context.close()
    assert not problems, problems

