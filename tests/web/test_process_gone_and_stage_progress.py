"""The run page of a run started by hand whose process was killed gives the server's
verdict (analysis.detail.unrecorded_end: the reason, what to do) and a Cost card that
stays at the run's last record however long the page stays open; and the stage of a
preparing run names its completed and total rows, in the header and in Job details, as
the run reports more."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from runwatch.jobs.failures import CATALOGUE
from runwatch.server.runner import Runner
from tests.killed import killed_run, live_process
from tests.support import first_line, http, wait_for

from .webhelpers import open_run

GONE = CATALOGUE["stopped_early"]
COST = ("device-time", "spend", "training")


def test_a_killed_hand_run_shows_why_and_its_cost_stops(page: Page, server: Runner,
                                                       runs_dir: Path) -> None:
    killed_run(runs_dir, "killed")
    with http.client(base_url=server.url, timeout=30) as client:
        wait_for(lambda: client.get("/api/runs/killed").json()["state"]["process_gone"],
                 what="the server to find the run's process gone")
    page.clock.install()  # the page's clock, moved on below without waiting
    open_run(page, server.url, "killed")
    expect(page.locator("#run-status")).to_have_text("Running (process gone)")
    # not live: its dot does not pulse as a running run's does (style.css)
    expect(page.locator("#run-status")).to_have_class(re.compile(r"\bprocess-gone\b"))
    assert page.eval_on_selector("#run-status .dot",
                                 "d => getComputedStyle(d).animationName") == "none"
    expect(page.locator('.run-row:has-text("killed") .status')).to_have_class(
        re.compile(r"\bprocess-gone\b"))  # the run list the page was opened from
    expect(page.locator("#run-reason")).to_have_text(GONE.sentence)
    expect(page.locator("#what-to-do")).to_have_text(f"What to do: {GONE.advice(False)}")
    expect(page.locator('#detail [data-row="failure-reason"]')).to_have_text(GONE.sentence)
    before = {k: page.inner_text(f"[data-cost={k}]") for k in COST}
    assert "estimate" not in before["device-time"] + before["spend"], before
    page.clock.fast_forward("01:00:00")  # an hour on, then the page's ticks go on
    page.clock.run_for(3000)
    assert {k: page.inner_text(f"[data-cost={k}]") for k in COST} == before


def test_the_stage_shows_its_progress_in_the_header_and_job_details(
        page: Page, server: Runner, runs_dir: Path) -> None:
    child = live_process(runs_dir, "prep", "PREPARING", then=(
        "run.set_phase('PREPARING', stage='tokenizing', done=30, total=100)\n"
        "sys.stdin.readline()\n"
        "run.set_phase('PREPARING', stage='tokenizing', done=60, total=100)\n"
        "sys.stdin.readline()\n"
        "run.finish()\n"))
    assert child.stdin is not None
    try:
        assert first_line(child, what="the training process to start") == "started"
        child.stdin.write("go\n")
        child.stdin.flush()
        with http.client(base_url=server.url, timeout=30) as client:
            wait_for(lambda: (resp := client.get("/api/runs/prep")).status_code == 200
                     and resp.json()["state"]["progress"] == {"done": 30, "total": 100},
                     what="the server to index the progress")
        open_run(page, server.url, "prep")
        expect(page.locator("#run-stage")).to_have_text("tokenizing (30/100)")
        expect(page.locator('#detail [data-row="stage"]')).to_have_text("tokenizing (30/100)")
        child.stdin.write("go\n")  # more rows tokenized: the open page follows
        child.stdin.flush()
        expect(page.locator("#run-stage")).to_have_text("tokenizing (60/100)")
        expect(page.locator('#detail [data-row="stage"]')).to_have_text("tokenizing (60/100)")
        child.stdin.write("go\n")
        child.stdin.close()
        assert child.wait(timeout=60) == 0
    finally:
        child.kill()
        child.wait(timeout=60)
