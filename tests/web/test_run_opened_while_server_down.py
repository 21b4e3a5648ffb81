"""A run opened (clicked in the list) while the server is down, in a real browser on a real
server that stops and starts again (trial 35, D2): the pane says the server did not answer
and that it reads the run again, and loads the run once the server answers, with no click
or reload (it kept the error for good)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import Engine

from runwatch.server.runner import Runner

from .webhelpers import chart_points, open_run, sft_run, shot, wait_indexed

DOWN = "The runwatch server did not answer."
AGAIN = "The page reads it again every 2 s, and shows it once the server answers."


# the browser's own line for each request the stopped server refused
@pytest.mark.console_error(r"net::ERR_CONNECTION_REFUSED")
def test_a_run_clicked_while_the_server_is_down_loads_once_it_answers(
        page: Page, server: Runner, runs_dir: Path, engine: Engine) -> None:
    sft_run(runs_dir, "opened-first", steps=10)
    sft_run(runs_dir, "clicked-while-down", steps=20)
    wait_indexed(server.url, "clicked-while-down", 19)
    open_run(page, server.url, "opened-first")
    server.stop()

    page.click('.run-row:has-text("clicked-while-down")')
    error = page.locator("#load-error")
    expect(error).to_contain_text(DOWN)
    expect(error).to_contain_text(AGAIN)
    shot(page, "trial-run-clicked-while-down")

    with Runner(engine, runs_dir=runs_dir, port=server.port, interval=0.05, warm=False):
        expect(page.locator("#detail[data-loaded=true] #run-title")).to_have_text(
            "clicked-while-down", timeout=30_000)
        expect(error).to_have_count(0)
        page.wait_for_selector(".chart-groups[data-drawn=true]")
        assert chart_points(page, "loss") == 20
        page.close()
