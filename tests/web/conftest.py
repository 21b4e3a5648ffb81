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

from runwatch.server.app import STATIC_DIR
from runwatch.server.runner import Runner
from runwatch.store.db import database_url

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "console_error(pattern): a console error the test "
                            "expects (a regular expression), e.g. from a request it makes fail")


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

