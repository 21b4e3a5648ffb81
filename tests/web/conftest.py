"""Fixtures of the browser tests: Debian's Chromium driven by Playwright, the real server
on a free loopback port over a runs folder written by the SDK, screenshots in test-output/."""

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
from runwatch.store.db import open_engine

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
EXPECTED_STATUS = re.compile(r"status of (409|501)\b")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]


def _ensure_built() -> None:
    if (STATIC_DIR / "index.html").is_file():
        return
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("the web app is not built and npm is missing: run `make web` first")
    web = REPO / "web"
    subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=web, check=True)
    subprocess.run([npm, "run", "build"], cwd=web, check=True)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail("browser tests need Debian's Chromium: apt-get install -y chromium")
    _ensure_built()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def web_engine(tmp_path: Path) -> Iterator[Engine]:
    eng = open_engine(tmp_path / "index.db")
    yield eng
    eng.dispose()


@pytest.fixture
def server(web_engine: Engine, runs_dir: Path) -> Iterator[Runner]:
    with Runner(web_engine, runs_dir=runs_dir, port=free_port(), interval=0.05) as srv:
        yield srv


@pytest.fixture
def page(browser: Browser, server: Runner) -> Iterator[Page]:
    # depends on `server` so that the page closes before the server stops
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    problems: list[str] = []
    pg.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))

    def on_console(msg: ConsoleMessage) -> None:
        # Cancel and Retry answer 409/501 until job control exists; the app shows that
        if msg.type == "error" and not EXPECTED_STATUS.search(msg.text):
            problems.append(f"console error: {msg.text}")

    pg.on("console", on_console)
    yield pg
    context.close()
    assert not problems, problems

