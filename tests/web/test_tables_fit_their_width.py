"""Tables at a 1400-pixel window in a real browser on a real server (trial 35, D7): the Cost
card's attempts table was 888 pixels wide in its 511-pixel card, and one long model name
made the run table 1705 pixels wide, its latest loss and reward off screen. Both fit now:
long cells wrap, or are cut short with the whole value in their tooltip."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from runwatch.sdk import Run, init
from runwatch.server.runner import Runner
from tests.support import http

from .webhelpers import shot, wait_indexed

pytestmark = pytest.mark.module_server

LONG_MODEL = "some-org/" + "a-very-long-fine-tuned-model-name-" * 6 + "final"


def overflow(box: Locator) -> dict[str, float]:
    """How far the table inside `box` reaches past the box's content edge (pixels; 0 or
    less fits), and how much its scrolling wrapper hides sideways."""
    found: dict[str, float] = box.evaluate("""(box) => {
        const table = box.querySelector('table');
        const wrap = table.closest('.table-wrap');
        const pad = parseFloat(getComputedStyle(box).paddingRight);
        const right = box.getBoundingClientRect().right - pad;
        return {past: table.getBoundingClientRect().right - right,
                hidden: wrap.scrollWidth - wrap.clientWidth};
    }""")
    return found


def test_the_cost_card_s_attempts_table_fits_its_card(page: Page, server: Runner) -> None:
    resp = http.post(f"{server.url}/api/jobs", json={
        "kind": "command", "name": "two-attempts", "argv": [sys.executable, "-c", "pass"]},
        timeout=30)
    assert resp.status_code == 201, resp.text
    run_id = resp.json()["run"]["run_id"]
    # no worker runs here: cancelled while queued, then queued again as attempt 2
    for action in ("cancel", "retry"):
        answer = http.post(f"{server.url}/api/runs/{run_id}/{action}", json={}, timeout=30)
        assert answer.status_code == 200, answer.text
    page.goto(f"{server.url}/runs?run={run_id}")
    page.wait_for_selector("#detail[data-loaded=true]")
    expect(page.locator("#cost-attempts tbody tr")).to_have_count(2)
    page.locator("#cost").scroll_into_view_if_needed()
    shot(page, "trial-cost-attempts-1400")
    fits = overflow(page.locator("#cost"))
    assert fits["past"] <= 0.5 and fits["hidden"] <= 0, fits
    # every column is in view, the reason included
    expect(page.locator("#cost-attempts td.reason-cell").first).to_contain_text(
        "the training job was cancelled before it started")
    expect(page.locator("#cost-attempts td.reason-cell").first).to_be_in_viewport()


def test_the_run_table_fits_a_1400_pixel_window(page: Page, server: Runner,
                                                runs_dir: Path) -> None:
    for i, model in enumerate((LONG_MODEL, "tiny", "Qwen/Qwen2.5-0.5B")):
        run = init(name=f"wide-{i}", dir=runs_dir, project="wide", base_model=model,
                   method="sft", group="a-sweep-whose-group-name-is-rather-long-" * 3,
                   tags=[f"tag-number-{k}-with-words" for k in range(6)])
        assert isinstance(run, Run)
        run.log({"loss": 1.0 / (i + 1), "reward": 0.5}, step=0)
        run.finish("SUCCEEDED")
    wait_indexed(server.url, "wide-2", 0)
    page.goto(f"{server.url}/table?project=wide")
    expect(page.locator("#run-table-body[data-latest=true] tr")).to_have_count(3)
    shot(page, "trial-run-table-1400")
    fits = overflow(page.locator("#run-table-page"))
    assert fits["past"] <= 0.5 and fits["hidden"] <= 0, fits
    for col in ("created", "loss", "reward"):
        expect(page.locator(f'#run-table-body td[data-col="{col}"]').first).to_be_in_viewport()
    cut = page.locator('#run-table-body tr:has-text("wide-0") td[data-col="model"] [title]')
    expect(cut).to_have_attribute("title", LONG_MODEL)
