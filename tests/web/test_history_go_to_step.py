"""The History of a long run in a real browser on a real server (trial 35, D4: a 200,000-step
run could only be paged 50 steps at a time, 4,000 clicks to its end): a step typed in the
pager opens the page that starts at it, and a click on a chart point opens the page of
that point's step, its row marked and brought into view (the History lies below the
charts, out of sight, where a click changed it unseen)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from runwatch.server.runner import Runner

from .webhelpers import long_run, open_run, shot, wait_indexed

pytestmark = pytest.mark.module_server


def test_a_step_typed_in_the_history_opens_its_page(page: Page, server: Runner,
                                                     runs_dir: Path) -> None:
    long_run(runs_dir, "history-typed", steps=5000)
    wait_indexed(server.url, "history-typed", 4999)
    open_run(page, server.url, "history-typed")
    history = page.locator("#history")
    expect(history.locator("tbody tr").first.locator("td").first).to_have_text("0")

    page.fill("#history-step", "3217")
    page.press("#history-step", "Enter")
    expect(page.locator("#history-range")).to_have_text("steps 3217–3266 of 5000")
    expect(history.locator("tbody tr").first.locator("td").first).to_have_text("3217")
    expect(history.locator("tbody tr.at-step td").first).to_have_text("3217")
    # the pager goes on from there
    history.get_by_role("button", name="Later ›").click()
    expect(page.locator("#history-range")).to_have_text("steps 3267–3316 of 5000")

    # past the last step: the latest page
    page.fill("#history-step", "99999")
    page.press("#history-step", "Enter")
    expect(page.locator("#history-range")).to_have_text("steps 4950–4999 of 5000")
    shot(page, "trial-history-go-to-step")


def test_a_click_on_a_chart_point_opens_its_step_in_the_history(page: Page, server: Runner,
                                                                 runs_dir: Path) -> None:
    long_run(runs_dir, "history-clicked", steps=5000)
    wait_indexed(server.url, "history-clicked", 4999)
    open_run(page, server.url, "history-clicked")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    chart = page.locator('[data-chart="grad_norm"]')
    box = chart.locator(".u-over").bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    head = chart.locator(".chart-tip-head")
    expect(head).to_have_text(re.compile(r"^step \d+$"))
    step = int((head.text_content() or "").split()[1])
    assert 2000 < step < 4000, step
    # the History is below the charts, out of sight
    expect(page.locator("#history tbody")).not_to_be_in_viewport()
    page.mouse.click(x, y)
    expect(page.locator("#history-range")).to_have_text(re.compile(rf"^steps {step}–"))
    marked = page.locator("#history tbody tr.at-step")
    expect(marked.locator("td").first).to_have_text(str(step))
    expect(marked).to_be_in_viewport()
    # a click is no zoom
    assert chart.get_attribute("data-zoomed") is None
    shot(page, "trial-history-chart-click")
