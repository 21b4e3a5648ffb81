"""A share link in a real browser, on a server with a token: it opens the run's page with
its charts and shows nothing of the other runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page
from sqlalchemy import Engine

from runwatch.server import share
from runwatch.server.runner import Runner, free_port
from tests.support import http, wait_for

from .webhelpers import sft_run, shot

TOKEN = "Kq3v-9xTz_2mLw8RbY-share"


@pytest.fixture
def server(engine: Engine, runs_dir: Path) -> Iterator[Runner]:
    """The real server with a token (the `page` fixture uses this one)."""
    sft_run(runs_dir, "shared-run", steps=20)
    sft_run(runs_dir, "private-run", steps=5)
    with Runner(engine, runs_dir=runs_dir, port=free_port(), token=TOKEN, prewarm=False,
                interval=0.05, warm=False) as srv:
        with http.client(base_url=srv.url, timeout=10,
                         headers={"Authorization": f"Bearer {TOKEN}"}) as owner:
            wait_for(lambda: owner.get("/api/runs").json()["runs"].__len__() == 2,
                     what="the server to index both runs")
        yield srv


# only the test's own visit to /table is refused; the run page asks for nothing refused
@pytest.mark.console_error(r"403")
def test_a_share_link_opens_its_run_page_and_nothing_else(page: Page, server: Runner,
                                                          runs_dir: Path) -> None:
    with http.client(base_url=server.url, timeout=10,
                     headers={"Authorization": f"Bearer {TOKEN}"}) as owner:
        run_id = owner.get("/api/runs/shared-run").json()["run"]["run_id"]
    _, credential = share.new_share(runs_dir, run_id, 3600)
    refused: list[str] = []
    page.on("response", lambda r: refused.append(r.url) if r.status in (401, 403) else None)
    page.goto(f"{server.url}/share/{credential}")
    page.wait_for_selector("#detail[data-loaded=true]")
    assert page.text_content("#run-title") == "shared-run"
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    assert page.locator('[data-chart]').count() >= 1
    assert "private-run" not in (page.text_content("body") or "")
    assert "shared=1" in page.url
    assert page.text_content("#shared-note") == "A shared run, read-only"
    assert page.locator("#run-list").count() == 0 and page.locator("#new-job-button").count() == 0
    assert refused == [], f"the shared page asked for what a share may not read: {refused}"
    shot(page, "share_run_page")
    # the app's own pages beyond the run page are refused
    table = page.goto(f"{server.url}/table")
    assert table is not None and table.status == 403

