"""The training jobs view in a real browser: list, search, detail, charts, live points,
rollouts (untrusted text stays text), health findings open and resolved, URL state, a
refused action's message, and a server that stops and starts again under an open page."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Page, Route, expect
from sqlalchemy import Engine

from runwatch.sdk import Run, init
from runwatch.server.runner import Runner
from tests.killed import killed_run, live_process
from tests.support import cli_here, first_line, http, wait_for, write_manifest
from tests.support.disk import small_disk

from .webhelpers import (
    chart_points,
    drawn_charts,
    grpo_run,
    open_run,
    records_lost_run,
    sft_run,
    shot,
    wait_indexed,
)


def test_list_search_charts_rollouts_and_url_state(page: Page, server: Runner,
                                                   runs_dir: Path) -> None:
    """One visit: the list and its search; each run's charts with the points expected; the
    GRPO run's rollouts, untrusted text shown as text, and its URL state over a reload."""
    sft_run(runs_dir)
    grpo_run(runs_dir)
    page.goto(f"{server.url}/runs")
    expect(page.locator(".run-row")).to_have_count(2)
    wait_indexed(server.url, "sft-small", 39)
    wait_indexed(server.url, "grpo-arith", 24, samples=2)
    shot(page, "list")
    page.fill("#search", "grpo")
    expect(page.locator(".run-row")).to_have_count(1)
    page.fill("#search", "")
    expect(page.locator(".run-row")).to_have_count(2)

    open_run(page, server.url, "sft-small")
    expect(page.locator("#run-summary")).to_have_text(
        "Training Qwen/Qwen2.5-0.5B with runwatch-sft on gsm8k via local (SFT).")
    # SFT logs no reward and no GRPO stability metrics: those charts are not drawn
    assert drawn_charts(page) == {"loss", "lr", "accuracy"}
    assert page.get_attribute('[data-chart="loss"]', "data-counts") == "loss=40;val/loss=4"
    assert chart_points(page, "lr") == 40 and chart_points(page, "accuracy") == 40
    expect(page.locator('[data-tile="grad_accum"] .tile-value')).to_have_text("2")
    expect(page.locator("#history tbody tr")).to_have_count(40)
    # a run started by hand, not submitted as a job, cannot be retried from here
    expect(page.locator("#action-retry")).to_have_count(0)
    expect(page.locator("#logs")).to_contain_text("training finished")
    expect(page.locator("#health")).to_be_hidden()  # no findings, no panel
    shot(page, "detail-sft")

    open_run(page, server.url, "grpo-arith")
    assert drawn_charts(page) == {"loss", "accuracy", "reward", "ratio", "clip", "kl", "timing"}
    for chart in ("reward", "ratio", "clip", "kl", "timing"):
        assert chart_points(page, chart) == 25
    shot(page, "detail-grpo")

    page.click("[data-tab-button=rollouts]")
    expect(page.locator(".rollout")).to_have_count(3)
    _check_untrusted_text(page)
    # the run and the tab are in the URL: a reload comes back to them
    assert "run=" in page.url and "tab=rollouts" in page.url
    page.reload()
    expect(page.locator(".run-row.selected")).to_contain_text("grpo-arith")
    expect(page.locator(".rollout")).to_have_count(3)
    _check_untrusted_text(page)
    expect(page.locator(".rollout .terms").first).to_contain_text("format: 0")
    page.select_option("#rollout-mode", "worst")
    page.fill("#rollout-n", "1")
    page.dispatch_event("#rollout-n", "change")
    expect(page.locator(".rollout")).to_have_count(1)
    expect(page.locator(".rollout .completion")).to_have_text("nine")
    page.select_option("#rollout-step", "10|train")
    expect(page.locator(".rollout")).to_have_count(1)
    shot(page, "rollouts")


def _check_untrusted_text(page: Page) -> None:
    """The rollouts of step 20 show the completion that holds markup as its text: no
    element made from it, no script of it run."""
    expect(page.locator("#rollout-step")).to_have_value("20|train")
    completion = page.locator(".rollout .completion").first
    expect(completion).to_have_text(
        "<script>window.__xss = 1</script><img src=x onerror=\"window.__xss = 2\">")
    assert page.locator(".rollouts img, .rollouts script").count() == 0
    assert page.evaluate("window.__xss") is None


@pytest.mark.module_server
def test_a_point_written_by_a_live_run_appears_without_reload(page: Page, server: Runner,
                                                              runs_dir: Path) -> None:
    run = grpo_run(runs_dir, "live-grpo", steps=10, finish=False)
    wait_indexed(server.url, "live-grpo", 9, samples=2)
    open_run(page, server.url, "live-grpo")
    expect(page.locator("#action-cancel")).to_be_visible()
    assert chart_points(page, "reward") == 10
    page.evaluate("window.__marker = 'same page'")
    run.log({"reward_mean": 0.99, "fb/loss/ratio/mean": 1.0}, step=10)
    run.log_text("step 10 done")
    expect(page.locator('[data-chart="reward"]')).to_have_attribute("data-points", "11")
    expect(page.locator('[data-tile="steps"] .tile-value')).to_have_text("10")
    expect(page.locator("#history tbody tr")).to_have_count(11)  # the history table too
    expect(page.locator("#logs")).to_contain_text("step 10 done")
    assert page.evaluate("window.__marker") == "same page"  # no reload happened
    run.finish("SUCCEEDED")
    expect(page.locator("#run-status")).to_have_text("Succeeded")
    expect(page.locator("#action-cancel")).to_have_count(0)


@pytest.mark.module_server
@pytest.mark.console_error(r"503")
def test_a_stream_the_browser_gave_up_on_is_opened_again(page: Page, server: Runner,
                                                         runs_dir: Path) -> None:
    """A browser closes for good a stream whose open is answered with an error (the 503
    of a server whose database connections are all busy); the page opens it again from
    where it was, so a point logged meanwhile still arrives without a reload."""
    run = grpo_run(runs_dir, "reopened", steps=10, finish=False)
    wait_indexed(server.url, "reopened", 9, samples=2)
    refused: list[str] = []

    def busy_once(route: Route) -> None:
        # the server's own 503 needs every pool connection held for 5 s; the browser
        # sees the same answer here (tests/server/test_sse.py checks the server's)
        if refused:
            route.continue_()
            return
        refused.append(route.request.url)
        route.fulfill(status=503, headers={"Retry-After": "1"}, content_type="application/json",
                      body=json.dumps({"ok": False, "status": 503, "retry_after": 1,
                                       "error": "the server is busy; retry in a few seconds"}))

    page.route("**/api/runs/*/stream?*", busy_once)
    open_run(page, server.url, "reopened")
    assert chart_points(page, "reward") == 10
    run.log({"reward_mean": 0.99, "fb/loss/ratio/mean": 1.0}, step=10)
    expect(page.locator('[data-chart="reward"]')).to_have_attribute("data-points", "11",
                                                                    timeout=30_000)
    assert len(refused) == 1
    run.finish("SUCCEEDED")
    expect(page.locator("#run-status")).to_have_text("Succeeded")


# the browser's own line for each request the stopped server refused
@pytest.mark.console_error(r"net::ERR_CONNECTION_REFUSED")
def test_reads_that_failed_while_the_server_was_down_clear_once_it_answers(
        page: Page, server: Runner, runs_dir: Path, engine: Engine) -> None:
    """The detail and the history read again after new points, sent while the server is
    down: each says it failed (and nothing is thrown uncaught, which the page fixture would
    catch), and once a restarted server answers the next reads, neither says so still (the
    detail's banner stayed while new points arrived)."""
    run = init(name="restarted", dir=runs_dir, method="sft", dataset="arith",
               flush_interval=0.05)
    assert isinstance(run, Run)
    for i in range(5):
        run.log({"loss": 1.0 / (i + 1)}, step=i)
    wait_indexed(server.url, "restarted", 4)
    page.goto(f"{server.url}/runs?run=restarted")
    page.wait_for_selector("#detail[data-loaded=true]")
    # hold the reads the next point makes (a second after it) until the server is down
    held: list[Route] = []
    reads = re.compile(r"/api/runs/restarted(/history)?")

    def hold(route: Route) -> None:
        if len(held) < 2:
            held.append(route)
        else:
            route.continue_()

    page.route(lambda url: reads.fullmatch(urlparse(url).path) is not None, hold)
    run.log({"loss": 0.1}, step=5)
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-points", "6")
    deadline = time.monotonic() + 30
    while len(held) < 2:
        assert time.monotonic() < deadline, "the page did not read the detail and history"
        page.wait_for_timeout(50)  # route handlers run while the page is waited on
    server.stop()
    for route in held:
        route.continue_()
    notice = page.locator(".notice")
    expect(notice).to_contain_text("The run's details could not be read again. The "
                                   "runwatch server did not answer.")
    expect(page.locator("#history-error")).to_contain_text("The runwatch server did not answer.")
    with Runner(engine, runs_dir=runs_dir, port=server.port, interval=0.05, warm=False):
        run.log({"loss": 0.05}, step=6)
        expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-points", "7",
                                                                     timeout=30_000)
        expect(notice).to_have_text("")
        expect(page.locator("#history-error")).to_be_hidden()
        expect(page.locator("#history")).to_have_attribute("data-total", "7")
        run.finish("SUCCEEDED")
        expect(page.locator("#run-status")).to_have_text("Succeeded")
        page.close()


# the refused Cancel, and the streams cut
@pytest.mark.module_server
@pytest.mark.console_error(r"status of 409\b|net::ERR_FAILED")
def test_a_refused_cancel_shows_the_server_message(page: Page, server: Runner) -> None:
    """A Cancel the server refuses (the job ended meanwhile, and this page, its live
    streams cut, was not told): the page shows the API's message and offers the button
    again."""
    resp = http.post(f"{server.url}/api/jobs", json={"kind": "command", "name": "queued",
                                                       "argv": ["python", "-c", "pass"]},
                     timeout=30)
    assert resp.status_code == 201, resp.text
    page.route("**/api/stream/runs*", lambda route: route.abort())
    page.route("**/api/runs/*/stream*", lambda route: route.abort())
    open_run(page, server.url, "queued")
    expect(page.locator("#run-status")).to_have_text("Queued")
    assert http.post(f"{server.url}/api/runs/queued/cancel", json={}, timeout=30).json()[
        "status"] == "CANCELLED"
    page.click("#action-cancel")
    expect(page.locator(".notice.error")).to_contain_text("cancel")
    expect(page.locator("#action-cancel")).to_be_enabled()
    page.click("#new-job-button")
    expect(page.locator("#new-job")).to_contain_text("runwatch.init(")
    assert page.url.endswith("/new")


@pytest.mark.module_server
def test_zooming_in_redraws_at_full_resolution(page: Page, server: Runner,
                                               runs_dir: Path) -> None:
    sft_run(runs_dir, "long-sft", steps=3000)
    wait_indexed(server.url, "long-sft", 2999)
    open_run(page, server.url, "long-sft")
    chart = page.locator('[data-chart="lr"]')
    expect(chart).to_have_attribute("data-full", "false")
    assert chart_points(page, "lr") <= 1000
    box = chart.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    # the chart reads the zoomed range once the wheel rests: turn it a few notches, then
    # give the full-resolution read a moment before zooming further
    for _ in range(30):
        for _ in range(5):
            page.mouse.wheel(0, -1200)
        try:
            expect(chart).to_have_attribute("data-full", "true", timeout=1500)
            break
        except AssertionError:
            continue
    expect(chart).to_have_attribute("data-full", "true")
    assert 0 < chart_points(page, "lr") < 1000


@pytest.mark.module_server
def test_health_panel_and_chart_markers(page: Page, server: Runner, runs_dir: Path) -> None:
    run = init(name="nan-run", dir=runs_dir, method="sft", base_model="tiny", dataset="arith")
    for i in range(30):
        run.log({"loss": float("nan") if i >= 20 else 2.0 - i * 0.01, "learning_rate": 1e-4},
                step=i)
    run.finish("FAILED", reason="the training job stopped before it finished")
    wait_indexed(server.url, "nan-run", 29)
    open_run(page, server.url, "nan-run")
    panel = page.locator("#health")
    expect(panel).to_be_visible()
    expect(panel).to_contain_text("NaN")
    expect(panel.locator(".finding.severity-critical")).to_have_count(1)
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-markers", "1")
    expect(page.locator(".reason")).to_have_text("the training job stopped before it finished")
    shot(page, "health")


@pytest.mark.module_server
def test_a_critical_finding_that_resolved_stays_in_the_health_panel(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """A loss that was NaN at one step and finite again after: its critical finding resolved,
    and the panel, which listed open findings only, hid it (live, and to a later visit)."""
    run = init(name="nan-once", dir=runs_dir, method="sft", base_model="tiny", dataset="arith",
               flush_interval=0.05)
    assert isinstance(run, Run)
    for i in range(10):
        run.log({"loss": 1.0 / (i + 1)}, step=i)
    wait_indexed(server.url, "nan-once", 9)
    open_run(page, server.url, "nan-once")
    panel = page.locator("#health")
    expect(panel).to_be_hidden()
    run.log({"loss": float("nan")}, step=10)
    opened = panel.locator(".finding.severity-critical")
    expect(opened).to_contain_text("loss was NaN at step 10.")
    open_border = opened.evaluate("el => getComputedStyle(el).borderLeftColor")
    run.log({"loss": 0.05}, step=11)

    def resolved_shown() -> None:
        part = panel.locator("#health-resolved")
        # folded, its summary says what resolved
        expect(part.locator("summary")).to_have_text("Resolved earlier in the run: 1 critical")
        expect(part).not_to_have_attribute("open", re.compile(".*"))
        part.locator("summary").click()
        item = part.locator(".finding.resolved")
        expect(item).to_have_count(1)
        expect(item).to_contain_text("A metric is NaN or infinite")
        expect(item).to_contain_text("step 10 · resolved")
        expect(item).to_contain_text("loss was NaN at step 10.")
        # not drawn as an open finding is
        assert item.evaluate("el => getComputedStyle(el).borderLeftColor") != open_border
        expect(panel.locator(".finding:not(.resolved)")).to_have_count(0)
        expect(panel.locator("h3")).to_have_text("Health · no open findings")

    resolved_shown()
    shot(page, "health-resolved")
    run.finish("SUCCEEDED")
    expect(page.locator("#run-status")).to_have_text("Succeeded")
    page.reload()
    page.wait_for_selector("#detail[data-loaded=true]")
    resolved_shown()


def test_runs_indexed_out_of_creation_order_are_all_listed_newest_first(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """Runs started together are indexed in no set order; each is listed live, in place."""
    page.goto(f"{server.url}/runs")
    expect(page.locator("#run-list")).to_have_attribute("data-count", "0")

    write_manifest(runs_dir / "middle", created_at=2_000_000_000.0)
    expect(page.locator(".run-row")).to_have_count(1)
    # older than every listed run: it still shows, last
    write_manifest(runs_dir / "oldest", created_at=1_000_000_000.0)
    write_manifest(runs_dir / "newest", created_at=3_000_000_000.0)
    expect(page.locator(".run-row .run-name")).to_have_text(["newest", "middle", "oldest"])


def test_best_and_latest_train_loss_match_the_cli(page: Page, server: Runner,
                                                  runs_dir: Path) -> None:
    """A run that logs `train/loss` (not `loss`) shows the same best and latest train loss
    in the web app as `runwatch runs get -o json`."""
    run = init(name="hf-loss", dir=runs_dir, method="sft", base_model="tiny", dataset="arith")
    for i in range(10):
        run.log({"train/loss": [2.5, 1.25, 0.75, 1.5][i % 4] + i / 100}, step=i)
    run.finish("SUCCEEDED")
    wait_indexed(server.url, "hf-loss", 9)
    cli = json.loads(cli_here("runs", "get", "hf-loss", "--dir", str(runs_dir), "-o", "json"
                              ).stdout)
    best, latest = cli["scalars"]["best_train_loss"], cli["scalars"]["latest_train_loss"]
    assert (best, latest) == (0.75 + 2 / 100, 1.25 + 9 / 100)
    assert cli["results"]["best_train_loss"] == best and cli["results"]["train_loss"] == latest
    open_run(page, server.url, "hf-loss")
    shown = page.evaluate("""() => {
        const t = (id) => document.querySelector(`[data-tile="${id}"] .tile-value`);
        return [t("best_train_loss")?.textContent, t("latest_train_loss")?.textContent];
    }""")
    assert shown == [_fmt(best), _fmt(latest)]


@pytest.mark.module_server
def test_a_latest_train_loss_that_went_nan_shows_its_tile_as_nan(page: Page, server: Runner,
                                                                  runs_dir: Path) -> None:
    """The API sends a non-finite value as null, and the tile of a latest loss that went
    NaN was left out, as one never logged (session 37): the detail names it non-finite."""
    run = init(name="tile-nan", dir=runs_dir, method="sft", base_model="tiny", dataset="arith")
    for i in range(6):
        run.log({"loss": 1.0 / (i + 1) if i < 5 else float("nan")}, step=i)
    run.finish("FAILED")
    wait_indexed(server.url, "tile-nan", 5)
    open_run(page, server.url, "tile-nan")
    tile = page.locator('[data-tile="latest_train_loss"] .tile-value')
    expect(tile).to_have_text("NaN")
    expect(page.locator('[data-tile="best_train_loss"] .tile-value')).to_have_text("0.2")
    # a tile never logged stays out
    expect(page.locator('[data-tile="eval_loss"]')).to_have_count(0)


def _fmt(value: float) -> str:
    """A number as the web app's fmtNum shows it (4 significant digits, no trailing 0s)."""
    return f"{value:.4g}"


@pytest.mark.module_server
def test_a_process_that_dies_while_the_page_is_open_shows_process_gone_without_a_reload(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """The list stream says so when `process_gone` changes, though the index does not (a
    process that dies writes nothing): the list row and the open run's status both
    change."""
    child = live_process(runs_dir, "dies", log=True)
    try:
        assert first_line(child, what="the training process to start") == "started"
        wait_indexed(server.url, "dies", 0)
        open_run(page, server.url, "dies")
        expect(page.locator("#run-status")).to_have_text("Running")
    finally:
        child.kill()
        child.wait(timeout=60)
    expect(page.locator('.run-row:has-text("dies") .status')).to_have_text(
        "Running (process gone)", timeout=30_000)
    expect(page.locator("#run-status")).to_have_text("Running (process gone)")


def test_a_run_whose_process_died_shows_process_gone(page: Page, server: Runner,
                                                     runs_dir: Path) -> None:
    killed_run(runs_dir, "killed")
    sft_run(runs_dir, "finished", steps=3)
    wait_indexed(server.url, "finished", 2)
    page.goto(f"{server.url}/runs")
    expect(page.locator('.run-row:has-text("killed") .status')).to_have_text(
        "Running (process gone)")
    expect(page.locator('.run-row:has-text("finished") .status')).to_have_text("Succeeded")
    open_run(page, server.url, "killed")
    expect(page.locator("#run-status")).to_have_text("Running (process gone)")


def test_a_run_whose_records_the_disk_refused_shows_records_lost(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """A run recorded on a disk that filled up and stayed full to its end succeeded with
    records lost: `runwatch runs list` says "SUCCEEDED (records lost)", while the list, the
    run's header and the run table showed a plain Succeeded."""
    with small_disk(runs_dir / "disk-full"):
        lost = records_lost_run(runs_dir, "disk-full")
        sft_run(runs_dir, "disk-fine", steps=3)
        wait_indexed(server.url, "disk-fine", 2)
        with http.client(base_url=server.url, timeout=30) as client:
            # (a 404, no "run", until a pass has read its folder)
            wait_for(lambda: (client.get("/api/runs/disk-full").json().get("run") or {})
                     .get("status") == "SUCCEEDED", what="the server to index the run's end")
        # the CLI's mark, on an index of its own
        cli_db = str(runs_dir.parent / "cli.db")
        cli_here("index", str(runs_dir), "--db", cli_db)
        listed = cli_here("runs", "list", "--dir", str(runs_dir), "--db", cli_db,
                          env={"COLUMNS": "160"})
        assert re.search(r"disk-full\W.*SUCCEEDED \(records lost\)", listed.stdout), listed.stdout
        page.goto(f"{server.url}/runs")
        expect(page.locator('.run-row:has-text("disk-full") .status')).to_have_text(
            "Succeeded (records lost)")
        expect(page.locator('.run-row:has-text("disk-fine") .status')).to_have_text("Succeeded")
        open_run(page, server.url, "disk-full")
        expect(page.locator("#run-status")).to_have_text("Succeeded (records lost)")
        expect(page.locator("#run-reason")).to_have_text(
            f"{lost} records could not be written: the disk refused them")
        page.goto(f"{server.url}/table?q=disk-")
        rows = page.locator("#run-table tbody tr")
        expect(rows).to_have_count(2)
        status = '#run-table tr:has-text("{}") td[data-col="status"]'
        expect(page.locator(status.format("disk-full"))).to_have_text("Succeeded (records lost)")
        expect(page.locator(status.format("disk-fine"))).to_have_text("Succeeded")
        shot(page, "records-lost")
        page.close()


@pytest.mark.module_server
def test_a_run_s_address_as_a_path_opens_its_page(page: Page, server: Runner,
                                                  runs_dir: Path) -> None:
    """/runs/<run> answered a raw JSON 404 in the browser (found in a trial); the app's
    address for a run is /runs?run=<run>, which the path now redirects to."""
    sft_run(runs_dir, "by-path", steps=3)
    wait_indexed(server.url, "by-path", 2)
    page.goto(f"{server.url}/runs/by-path")
    assert page.url == f"{server.url}/runs?run=by-path"
    expect(page.locator("#run-title")).to_have_text("by-path")
