"""The compare view in a real browser under a server that stops after the page loaded and
starts again: each read it makes meanwhile says that it failed, where its answer would go,
and nothing is thrown uncaught (the `page` fixture fails a test on a page error); once the
server answers, the reads are made again and the page shows them without a reload."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Page, Route, expect
from sqlalchemy import Engine

from runwatch.server.runner import Runner

from .webhelpers import drag_zoom, sft_run, shot, wait_indexed

DOWN = "The runwatch server did not answer."
AGAIN = "The page reads it again every 2 s, and shows it once the server answers."


# the browser's own line for each request the stopped server refused
@pytest.mark.console_error(r"net::ERR_CONNECTION_REFUSED")
def test_compare_reads_made_while_the_server_is_down_say_so_and_recover(
        page: Page, server: Runner, runs_dir: Path, engine: Engine) -> None:
    """A zoom, a CSV export, a chart added (the charts built again) and a new baseline for
    the report, each while the server is down: each threw an uncaught error and showed
    nothing."""
    for name in ("down-a", "down-b"):
        sft_run(runs_dir, name, steps=40)
        wait_indexed(server.url, name, 39)
    page.goto(f"{server.url}/compare?run=down-a&run=down-b")
    expect(page.locator("#compare")).to_have_attribute("data-loaded", "true")
    expect(page.locator("#compare-report-body")).to_have_attribute("data-status", "200")
    expect(page.locator("#compare-config tbody tr").first).to_be_visible()
    loss = page.locator('[data-chart="loss"]')
    expect(loss).to_have_attribute("data-points", "40")
    server.stop()

    charts_error = page.locator("#compare-charts-error")
    box = loss.bounding_box()
    assert box is not None
    drag_zoom(page, box, 0.2, 0.5)
    expect(loss).to_have_attribute("data-zoomed", re.compile(r"\d+-\d+"))
    expect(charts_error).to_have_text(re.compile(
        rf"^A chart could not be read\. {re.escape(DOWN)} .* {re.escape(AGAIN)}$"))
    # the zoomed window is not read yet: the chart keeps the whole runs' points
    expect(loss).to_have_attribute("data-points", "40")

    card = page.locator('[data-chart-card="loss"]')
    card.locator(".chart-csv").click()
    # a download is not made again by itself: clicked again, it is
    expect(charts_error).to_have_text(re.compile(
        rf"^The chart's CSV could not be read\. {re.escape(DOWN)}"))
    assert AGAIN not in (charts_error.text_content() or "")

    page.click("#chart-picker-open")
    page.fill("#chart-picker-search", "trained")
    page.click('.picker-key[data-key="trained_tokens"]')
    added = page.locator('[data-chart-card="key:trained_tokens"]')
    expect(added).to_be_visible()
    expect(charts_error).to_have_text(re.compile(rf"^A chart could not be read\. .*{AGAIN}$"))

    page.select_option("#compare-subject", label="down-a")
    page.select_option("#compare-baseline", label="down-b")
    report_error = page.locator("#compare-report-error")
    expect(report_error).to_have_text(re.compile(
        rf"^The report could not be read\. {re.escape(DOWN)} .* {re.escape(AGAIN)}$"))
    shot(page, "compare-server-down")

    with Runner(engine, runs_dir=runs_dir, port=server.port, interval=0.05, warm=False):
        # read again without a click: the zoomed window, the chart added, the report
        expect(charts_error).to_be_hidden(timeout=30_000)
        expect(report_error).to_be_hidden(timeout=30_000)
        expect(page.locator('[data-chart="key:trained_tokens"]')).to_have_attribute(
            "data-counts", "trained_tokens=40;trained_tokens=40")
        zoomed = (loss.get_attribute("data-zoomed") or "").split("-")
        expect(loss).to_have_attribute("data-points", str(int(zoomed[1]) - int(zoomed[0]) + 1))
        expect(page.locator("#compare-charts")).to_have_attribute("data-drawn", "true")
        expect(page.locator("#compare-report-body")).to_have_attribute("data-status", "200")
        expect(page.locator("#compare-verdict")).to_be_visible()
        with page.expect_download() as dl:
            card.locator(".chart-csv").click()
        assert dl.value.suggested_filename == "compare-loss.csv"
        expect(charts_error).to_be_hidden()
        page.close()


@pytest.mark.console_error(r"net::ERR_CONNECTION_REFUSED")
def test_a_run_whose_settings_could_not_be_read_is_named_and_read_again(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """The settings table left out a run whose detail the server did not answer, and said
    nothing: the table looked like a comparison of the other runs alone."""
    for name in ("set-a", "set-b"):
        sft_run(runs_dir, name, steps=10)
        wait_indexed(server.url, name, 9)
    # every read of set-b's detail (the settings table's) finds no server until `down` is
    # cleared (holding one read until the server stopped raced the page's other reads)
    down = [True]

    def refuse(route: Route) -> None:
        if down[0]:
            route.abort("connectionrefused")
        else:
            route.continue_()

    page.route(lambda url: urlparse(url).path == "/api/runs/set-b", refuse)
    page.goto(f"{server.url}/compare?run=set-a&run=set-b")
    expect(page.locator("#compare")).to_have_attribute("data-loaded", "true")
    error = page.locator("#compare-config-error")
    expect(error).to_have_text(re.compile(
        rf"^The settings of set-b could not be read\. {re.escape(DOWN)} .* {re.escape(AGAIN)}$"))
    heads = page.locator("#compare-config thead th")
    expect(heads).to_have_text(["Setting", "set-a"])
    shot(page, "compare-settings-down")

    down[0] = False
    expect(error).to_be_hidden(timeout=30_000)
    expect(heads).to_have_text(["Setting", "set-a", "set-b"])
