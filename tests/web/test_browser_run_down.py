"""The run page's charts in a real browser under a server that stops after the page loaded
and starts again: a zoom, an x axis changed to tokens and a chart added, each while the
server is down, say that they failed above the charts, and once the server answers they are
read again without a click or a reload (the page fixture fails a test on a page error)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import Engine

from runwatch.server.runner import Runner

from .webhelpers import drag_zoom, open_run, sft_run, shot, wait_indexed

DOWN = "The runwatch server did not answer."
AGAIN = "The page reads it again every 2 s, and shows it once the server answers."


# the browser's own line for each request the stopped server refused
@pytest.mark.console_error(r"net::ERR_CONNECTION_REFUSED")
def test_chart_reads_made_while_the_server_is_down_are_made_again_once_it_answers(
        page: Page, server: Runner, runs_dir: Path, engine: Engine) -> None:
    """Each said it failed, then nothing read it again: the zoomed chart kept the whole
    run's points, the added chart stayed empty and the x axis stayed on steps (its tokens
    read, failed once, failed for good) until the page was reloaded."""
    sft_run(runs_dir, "down-run", steps=40)
    wait_indexed(server.url, "down-run", 39)
    open_run(page, server.url, "down-run")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    loss = page.locator('[data-chart="loss"]')
    expect(loss).to_have_attribute("data-points", "40")
    server.stop()

    charts_error = page.locator("#charts-error")
    again = re.compile(rf"^A chart could not be read\. {re.escape(DOWN)} .*{re.escape(AGAIN)}$")
    # first, while no read is made again to take its line: a download is not made again by
    # itself (clicked again, it is)
    page.locator('[data-chart-card="loss"] .chart-csv').click()
    expect(charts_error).to_have_text(re.compile(
        rf"^The chart's CSV could not be read\. {re.escape(DOWN)}"))

    box = loss.bounding_box()
    assert box is not None
    drag_zoom(page, box, 0.2, 0.5)
    expect(loss).to_have_attribute("data-zoomed", re.compile(r"\d+-\d+"))
    expect(charts_error).to_have_text(again)
    # the zoomed window is not read yet: the chart keeps the whole run's points
    expect(loss).to_have_attribute("data-points", "40")

    lr_card = page.locator('[data-chart-card="lr"]')
    lr_card.locator(".chart-settings-toggle").click()
    lr_card.locator(".chart-x").select_option("tokens")
    expect(charts_error).to_have_text(again)
    expect(page.locator('[data-chart="lr"]')).to_have_attribute("data-x", "step")

    page.click("#chart-picker-open")
    page.fill("#chart-picker-search", "trained")
    page.click('.picker-key[data-key="trained_tokens"]')
    added = page.locator('[data-chart="key:trained_tokens"]')
    expect(added).to_be_attached()
    expect(charts_error).to_have_text(again)
    assert (added.get_attribute("data-points") or "0") == "0"
    shot(page, "run-server-down")

    with Runner(engine, runs_dir=runs_dir, port=server.port, interval=0.05, warm=False):
        expect(charts_error).to_be_hidden(timeout=30_000)
        expect(added).to_have_attribute("data-points", "40")
        expect(page.locator('[data-chart="lr"]')).to_have_attribute("data-x", "tokens")
        zoomed = (loss.get_attribute("data-zoomed") or "").split("-")
        expect(loss).to_have_attribute("data-points", str(int(zoomed[1]) - int(zoomed[0]) + 1))
        with page.expect_download() as dl:
            page.locator('[data-chart-card="loss"] .chart-csv').click()
        assert dl.value.suggested_filename.endswith(".csv")
        page.close()
