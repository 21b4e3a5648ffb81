"""The page's layout in a real browser against what a run can hold: a phone's width (the list
above the run, nothing wider than the window), values long enough to break a row (a run
name of 123 characters in the header, the list and the run table; a log line of 5,000), and
values cut short (a compared run's chip, the settings compared, tags and groups) that show
whole in their tooltips."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from runwatch.sdk import init
from runwatch.server.runner import Runner

from .webhelpers import open_run, sft_run, shot, themed_page, wait_indexed

pytestmark = pytest.mark.module_server

PHONE = 390  # an iPhone's width in CSS pixels
# one word to a browser: no space or hyphen to break the line at
LONG_NAME = ("sweep_" + "_".join(f"lr{i}e4_warmup{i * 10}_seed{i}" for i in range(8)))[:123]

# How far the page reaches past the window's right edge, and the element reaching furthest.
PAST_THE_EDGE = """() => {
  let widest = null, right = 0;
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > right) { right = r.right; widest = el; }
  }
  const name = widest ? widest.tagName.toLowerCase() + (widest.id ? '#' + widest.id : '')
    + (typeof widest.className === 'string' && widest.className ? '.' + widest.className : '') : '';
  return [document.documentElement.scrollWidth - window.innerWidth, name];
}"""


def past_the_edge(page: Page) -> tuple[int, str]:
    """Pixels the page lays out past the window's right edge (0: none), and the widest part."""
    over, name = page.evaluate(PAST_THE_EDGE)
    return int(over), str(name)


def test_a_phone_shows_the_list_above_a_readable_run(browser: Browser, server: Runner,
                                                     runs_dir: Path) -> None:
    """At 390 px the list kept 320 px and the run 70, and the top bar laid the page out at
    603 px: it scrolled sideways."""
    sft_run(runs_dir, "phone-run", steps=40)
    wait_indexed(server.url, "phone-run", 39)
    with themed_page(browser, "light", width=PHONE) as page:
        open_run(page, server.url, "phone-run")
        # attached: in a 70-pixel pane the charts had no width, so were never "visible"
        page.wait_for_selector(".chart-groups[data-drawn=true]", state="attached")
        assert past_the_edge(page)[0] == 0, past_the_edge(page)
        detail = page.locator("#detail").bounding_box()
        assert detail is not None and detail["width"] >= PHONE - 2, detail
        # the run is below the list, not beside it
        sidebar = page.locator(".sidebar").bounding_box()
        assert sidebar is not None and sidebar["y"] + sidebar["height"] <= detail["y"] + 1
        for chart in ("loss", "lr"):
            box = page.locator(f'[data-chart="{chart}"]').bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE, box
        expect(page.locator("#run-title")).to_be_in_viewport()
        page.locator("#run-title").scroll_into_view_if_needed()
        shot(page, "layout-phone")


def test_long_names_and_log_lines_stay_in_the_window(page: Page, server: Runner,
                                                     runs_dir: Path) -> None:
    """A 123-character name overran the header (and widened the page), one in the run table
    made the table 4,209 px wide, and a log line of 5,000 characters one row 36,000 px wide."""
    assert len(LONG_NAME) == 123
    run = init(name=LONG_NAME, dir=runs_dir, method="sft", base_model="tiny", dataset="d")
    for i in range(20):
        run.log({"loss": 1.0 / (i + 1)}, step=i)
    run.log_text("x" * 5000)
    run.finish("SUCCEEDED")
    wait_indexed(server.url, LONG_NAME, 19)
    open_run(page, server.url, LONG_NAME)
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    expect(page.locator(".log-msg")).to_have_count(1)
    assert past_the_edge(page)[0] == 0, past_the_edge(page)
    width = page.viewport_size["width"] if page.viewport_size else 0
    for part in ("#run-title", "#run-summary", ".log-row"):
        box = page.locator(part).first.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width, (part, box)
    logs = page.locator(".logs")
    assert logs.evaluate("el => el.scrollWidth - el.clientWidth") == 0
    expect(page.locator("#run-title")).to_have_attribute("title", LONG_NAME)
    # the list cuts the name short and keeps it whole in its tooltip
    row_name = page.locator(f'.run-row .run-name .run-open[title="{LONG_NAME}"]')
    expect(row_name).to_have_count(1)
    assert row_name.evaluate("el => el.scrollWidth > el.clientWidth"), "cut short"
    box = row_name.bounding_box()
    row_box = page.locator(".run-row").first.bounding_box()
    assert box is not None and row_box is not None
    assert box["x"] + box["width"] <= row_box["x"] + row_box["width"], (box, row_box)
    shot(page, "layout-long-name")

    page.goto(f"{server.url}/table")
    expect(page.locator("#run-table a", has_text=LONG_NAME)).to_have_count(1)
    wrap = page.locator(".table-wrap")
    assert wrap.evaluate("el => el.scrollWidth - el.clientWidth") == 0
    assert past_the_edge(page)[0] == 0, past_the_edge(page)
    # wrapped, the name is shown whole; its tooltip holds it too
    expect(page.locator(f'#run-table a[title="{LONG_NAME}"]')).to_have_text(LONG_NAME)
    shot(page, "layout-long-name-table")


# Each element `selector` matches whose text is cut short (an ellipsis, or its box running
# past an ancestor that clips it): [its text, its tooltip].
CUT_SHORT = """(selector) => {
  const clipped = (el) => {
    const r = el.getBoundingClientRect();
    for (let a = el.parentElement; a; a = a.parentElement) {
      if (getComputedStyle(a).overflowX === 'visible') continue;
      const c = a.getBoundingClientRect();
      if (r.right > c.right + 1 || r.left < c.left - 1) return true;
    }
    return r.right > window.innerWidth + 1;
  };
  return [...document.querySelectorAll(selector)]
    .filter((el) => el.scrollWidth > el.clientWidth + 1 || clipped(el))
    .map((el) => [el.textContent, el.getAttribute('title')]);
}"""


def cut_short(page: Page, selector: str) -> list[tuple[str, str | None]]:
    """The values `selector` matches that are cut short, each with its tooltip."""
    return [(text, title) for text, title in page.evaluate(CUT_SHORT, selector)]


def test_values_cut_short_show_whole_in_their_tooltip(page: Page, server: Runner,
                                                      runs_dir: Path) -> None:
    """A long run name, group, tag and config key and value, compared and in the run table:
    the run's chip ran past the window (its × out of reach) and the config table's keys and
    run names, the run table's tags were cut short, each with no tooltip to read it whole."""
    names = [f"{LONG_NAME[:100]}-tip", "tip-short"]
    group, tag = f"group-{LONG_NAME}", f"tag-{LONG_NAME}"
    key = f"scheduler_{LONG_NAME}"
    for name in names:
        run = init(name=name, dir=runs_dir, method="sft", base_model="tiny", dataset="d",
                   group=group, tags=(tag, "small"),
                   config={"optim": {key: f"value-{LONG_NAME}-{name}"}})
        for i in range(5):
            run.log({"loss": 1.0 / (i + 1)}, step=i)
        run.finish("SUCCEEDED")
        wait_indexed(server.url, name, 4)
    page.set_viewport_size({"width": 1000, "height": 1000})  # a laptop's narrower window
    page.goto(f"{server.url}/compare?run={names[0]}&run={names[1]}")
    expect(page.locator("#compare-config tbody tr").first).to_be_visible()
    chip = page.locator(".compare-chip").first
    remove = chip.locator(".chip-remove")
    expect(remove).to_be_in_viewport()
    chips = page.locator("#compare-runs").bounding_box()
    box = remove.bounding_box()
    assert chips is not None and box is not None
    assert box["x"] + box["width"] <= chips["x"] + chips["width"] + 1, (box, chips)
    shot(page, "compare-long-values")
    cut = {sel: cut_short(page, sel) for sel in (
        ".compare-chip .chip-name", "#compare-config td", "#compare-config th", ".run-group")}
    assert cut[".compare-chip .chip-name"] == [(names[0], names[0])]
    assert (f"optim.{key}", f"optim.{key}") in cut["#compare-config td"]
    assert (names[0], names[0]) in cut["#compare-config th"]
    for sel in (".compare-chip .chip-name", "#compare-config td", "#compare-config th"):
        assert all(title == text for text, title in cut[sel]), (sel, cut[sel])
    # the group's chip (in the list) names its whole group in its tooltip
    assert cut[".run-group"], cut
    assert all(title and text in title for text, title in cut[".run-group"]), cut

    page.goto(f"{server.url}/table?q=tip")
    expect(page.locator("#run-table tbody tr")).to_have_count(2)
    tags, groups = cut_short(page, "#run-table .tag"), cut_short(page, "#run-table .run-group")
    assert tags == [(tag, tag), (tag, tag)], tags
    assert groups and all(title and text in title for text, title in groups), groups
    shot(page, "table-long-values")


def test_the_compare_report_keeps_long_names_and_settings_inside_its_card(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """Two runs of different plans with long names, datasets and config values: the report's
    run and baseline pickers (as wide as a name, with no tooltip), the message refusing
    the runs and its table of differences ran past the report's card."""
    names = [f"{LONG_NAME[:100]}-plan{i}" for i in range(2)]
    key = f"scheduler_{LONG_NAME}"
    for i, name in enumerate(names):
        run = init(name=name, dir=runs_dir, method="sft", base_model="tiny",
                   dataset=f"data-{LONG_NAME}-{i}",
                   config={"optim": {key: f"value-{LONG_NAME}-{i}"}})
        for step in range(5):
            run.log({"loss": 1.0 / (step + 1 + i)}, step=step)
        run.finish("SUCCEEDED")
        wait_indexed(server.url, name, 4)
    page.set_viewport_size({"width": 1000, "height": 1000})
    page.goto(f"{server.url}/compare?run={names[0]}&run={names[1]}")
    expect(page.locator("#compare-report-body")).to_have_attribute("data-status", "200")
    refused = page.locator("#compare-refused")
    expect(refused).to_contain_text(f"Runs {names[1]} and {names[0]} follow different plans")
    card = page.locator("#compare-report").bounding_box()
    assert card is not None
    for part in ("#compare-subject", "#compare-baseline", "#compare-refused",
                 "#compare-differences"):
        box = page.locator(part).bounding_box()
        assert box is not None, part
        assert card["x"] <= box["x"] and box["x"] + box["width"] <= card["x"] + card["width"] + 1, \
            (part, box, card)
    # the message and the differences wrap: shown whole, the values' differing ends too
    assert cut_short(page, "#compare-refused, #compare-differences td") == []
    expect(page.locator("#compare-differences td", has_text=f"value-{LONG_NAME}-1")).to_have_text(
        f"value-{LONG_NAME}-1")
    # a picker cuts its run's name short: its tooltip holds it whole, and follows a new pick
    subject, baseline = page.locator("#compare-subject"), page.locator("#compare-baseline")
    expect(subject).to_have_attribute("title", names[1])
    expect(baseline).to_have_attribute("title", names[0])
    assert past_the_edge(page)[0] == 0, past_the_edge(page)
    shot(page, "compare-report-long-names")
    baseline.select_option(label=names[1])
    expect(baseline).to_have_attribute("title", names[1])
