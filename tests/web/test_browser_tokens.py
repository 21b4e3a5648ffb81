"""The web app in Chromium on a server with a token, opened with one project's admin token:
the run list and a run page show that project only; on the Tokens page the admin creates a
token (its secret shown once, and working), sees only its project's tokens, and revokes one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from runwatch.server.runner import Runner, free_port
from runwatch.store import tokens
from runwatch.store.db import open_engine
from tests.support import http, sdk_run
from tests.support.wait import DEADLINE_S

from .webhelpers import shot

BOOT = "bootstrap-token-4-browser"


@pytest.fixture
def server(tmp_path: Path, runs_dir: Path) -> Iterator[Runner]:
    """A server with a token over two projects' runs (the `page` fixture uses this one)."""
    sdk_run(runs_dir, "alpha-run", steps=3, project="alpha")
    sdk_run(runs_dir, "bravo-run", steps=3, project="bravo")
    engine = open_engine(tmp_path / "index.db")
    with engine.begin() as conn:
        for project in ("alpha", "bravo"):
            tokens.create_project(conn, project, "test")
        tokens.create(conn, "bravo", "admin", "bravo-bot", "test")
    with Runner(engine, runs_dir=runs_dir, port=free_port(), token=BOOT, interval=0.05,
                prewarm=False, warm=False) as srv:
        yield srv
    engine.dispose()


def _admin_of_alpha(srv: Runner) -> str:
    with srv.engine.begin() as conn:
        return tokens.create(conn, "alpha", "admin", "alice", "test")[1]


def _runs(srv: Runner, secret: str) -> httpx.Response:
    return http.get(f"{srv.url}/api/runs", headers={"Authorization": f"Bearer {secret}"},
                    timeout=DEADLINE_S)


def test_an_admin_creates_a_token_sees_its_secret_once_and_revokes_it(
        page: Page, server: Runner) -> None:
    admin = _admin_of_alpha(server)
    # the app itself, on a project's token: that project's run only, and no refused request
    page.goto(f"{server.url}/runs?token={admin}")
    expect(page.locator(".run-row")).to_have_count(1)
    expect(page.locator(".run-row")).to_contain_text("alpha-run")
    page.click(".run-row")
    expect(page.locator("#detail[data-loaded=true]")).to_be_visible()
    page.click("#tokens-link")
    expect(page.locator("#tokens-page[data-loaded=true]")).to_be_visible()
    rows = page.locator("#tokens tr")
    expect(rows).to_have_count(1)  # alice herself; bravo's bot is not shown
    expect(page.locator("#token-project option")).to_have_text(["alpha"])

    page.fill("#token-name", "ci-uploader")
    page.select_option("#token-right", "write")
    page.click("#token-create")
    secret_el = page.locator("#token-secret-value")
    expect(secret_el).to_be_visible()
    secret = secret_el.inner_text()
    assert secret.startswith("rw_") and len(secret) == 46
    expect(page.locator("#token-secret")).to_contain_text("not shown again")
    expect(rows).to_have_count(2)
    shot(page, "tokens-created")
    made = _runs(server, secret)
    assert made.status_code == 200 and [r["name"] for r in made.json()["runs"]] == ["alpha-run"]

    page.reload()
    expect(page.locator("#tokens-page[data-loaded=true]")).to_be_visible()
    expect(rows).to_have_count(2)
    assert secret not in page.content() and secret[3:] not in page.content()

    row = page.locator("#tokens tr[data-name=ci-uploader]")
    row.locator("[data-revoke]").click()
    expect(row.locator("[data-revoke]")).to_have_text("Click again to revoke")
    row.locator("[data-revoke]").click()
    expect(page.locator("#tokens tr[data-name=ci-uploader] .token-revoked")).to_be_visible()
    expect(page.locator("#tokens tr[data-name=ci-uploader] [data-revoke]")).to_have_count(0)
    shot(page, "tokens-revoked")
    refused = _runs(server, secret)
    assert refused.status_code == 401 and "revoked" in refused.json()["error"]
