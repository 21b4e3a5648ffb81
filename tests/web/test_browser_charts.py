"""The run page's charts in a real browser: smoothing that leaves sparse lines on their
values, a colour and a legend per line, whole steps after a zoom and its reset, charts for
the spec's watch-first and optimizer metrics, the metric picker, per-chart settings, and
CSV and PNG export. What a chart draws is read from its canvas pixels, its tooltip (HTML)
and the data attributes it keeps (see docs/web.md, "Charts")."""

from __future__ import annotations

import csv
import io
import math
import re
import struct
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Browser, FloatRect, Locator, Page, expect

from runwatch.sdk import init
from runwatch.sdk import run as sdk_run_module
from runwatch.server.runner import Runner

from .webhelpers import (
    TRAIN_RGB,
    VAL_RGB,
    drag_zoom,
    drawn_charts,
    open_run,
    sft_run,
    shot,
    wait_indexed,
)

# Every test writes runs of its own names and reads only those: one server for the module.
pytestmark = pytest.mark.module_server
LEGEND_CSS_PX = 26  # the legend's strip above the plot (grid top is 30)

COUNT_PIXELS = """([sel, rgb, tol, topPx]) => {
  const canvas = document.querySelector(sel + ' canvas');
  const ctx = canvas.getContext('2d');
  const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
  const top = Math.round(topPx * canvas.width / canvas.clientWidth);
  let all = 0, strip = 0;
  for (let i = 0; i < data.length; i += 4) {
    if (Math.abs(data[i] - rgb[0]) <= tol && Math.abs(data[i + 1] - rgb[1]) <= tol
        && Math.abs(data[i + 2] - rgb[2]) <= tol && data[i + 3] > 200) {
      all++;
      if (Math.floor(i / 4 / canvas.width) < top) strip++;
    }
  }
  return [all, strip];
}"""


def pixels(page: Page, chart: str, rgb: tuple[int, int, int], tol: int = 40) -> tuple[int, int]:
    """Pixels of `chart`'s canvas within `tol` of colour `rgb` in each channel: in all, and
    in the legend's strip."""
    all_, strip = page.evaluate(COUNT_PIXELS, [f'[data-chart="{chart}"]', list(rgb), tol,
                                               LEGEND_CSS_PX])
    return int(all_), int(strip)


def hover_tooltip(page: Page, chart: str, fraction: float) -> str:
    """Move the mouse to `fraction` of the plot's width (mid height) and return the
    tooltip's text."""
    box = page.locator(f'[data-chart="{chart}"]').bounding_box()
    assert box is not None
    left, right = 64, 24  # the chart's grid
    x = box["x"] + left + fraction * (box["width"] - left - right - 1)
    tip = page.locator(f'[data-chart="{chart}"] .chart-tip')
    # away from the chart first, so the tooltip read is the one for this point
    page.mouse.move(1, 1)
    expect(tip.first).to_be_hidden()
    y = box["y"] + box["height"] / 2
    # A chart drawn again under a still mouse (a live update, a late layout) shows no tip
    # until the mouse moves, as under a user's hand it always does: move it again if so.
    for _ in range(2):
        page.mouse.move(x, y)
        try:
            expect(tip.first).to_be_visible(timeout=2_000)
            break
        except AssertionError:
            page.mouse.move(1, 1)  # and back to the same point, for this point's tip
    else:
        page.mouse.move(x, y)
    expect(tip.first).to_be_visible()
    return tip.first.inner_text()


def card(page: Page, chart: str) -> Locator:
    return page.locator(f'[data-chart-card="{chart}"]')


def test_smoothing_leaves_a_sparse_val_line_on_its_values(page: Page, server: Runner,
                                                         runs_dir: Path) -> None:
    """Two val points under the default smoothing (0.6): the old chart's EMA drew the second
    at 0.6875 (0.375 of the first plus 0.625 of the second), not at the 0.5 logged."""
    run = init(name="sparse-val", dir=runs_dir, method="sft", base_model="tiny", dataset="d")
    for i in range(20):
        m = {"loss": 2.0 - 0.05 * i + (0.2 if i % 2 else -0.2)}
        if i in (9, 19):
            m["val/loss"] = 1.0 if i == 9 else 0.5
        run.log(m, step=i)
    run.finish("SUCCEEDED")
    wait_indexed(server.url, "sparse-val", 19)
    open_run(page, server.url, "sparse-val")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    text = hover_tooltip(page, "loss", 1.0)
    assert re.search(r"val\W*0\.50000", text), text
    assert text.startswith("step 19"), text
    # the dense, noisy train line is still smoothed (its tooltip names the smoothed value)
    assert re.search(r"train\W*1\.2500\d* \(smoothed", text), text
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-smoothed", "train")
    shot(page, "charts-sparse-val")


BLUE_COLUMNS = """([sel, rgb, tol]) => {
  const canvas = document.querySelector(sel + ' canvas');
  const ratio = canvas.width / canvas.clientWidth;
  const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  const cols = new Set();
  for (let i = 0; i < data.length; i += 4) {
    if ([0, 1, 2].every((c) => Math.abs(data[i + c] - rgb[c]) <= tol) && data[i + 3] > 200) {
      cols.add(Math.floor((i / 4) % canvas.width / ratio));
    }
  }
  return [...cols];
}"""


def test_a_line_is_broken_where_its_values_are_missing(page: Page, server: Runner,
                                                       runs_dir: Path) -> None:
    """A NaN logged (null in the series) breaks the line: nothing is drawn between the
    points on either side of the gap, and the points before and after are joined as logged
    (the chart's own line paths, chartview.ts linePaths)."""
    run = init(name="gappy", dir=runs_dir, method="sft", base_model="tiny", dataset="d")
    for i in range(40):
        run.log({"loss": math.nan if 15 <= i <= 24 else 1.0}, step=i)
    run.finish("SUCCEEDED")
    wait_indexed(server.url, "gappy", 39)
    open_run(page, server.url, "gappy")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    box = page.locator('[data-chart="loss"]').bounding_box()
    assert box is not None
    cols = set(page.evaluate(BLUE_COLUMNS, ['[data-chart="loss"]', list(TRAIN_RGB), 40]))

    def x(step: float) -> int:  # the plot spans steps 0-39 between its 64 and 24 px margins
        return round(64 + step / 39 * (box["width"] - 64 - 24))

    assert all(any(c in cols for c in range(x(s) - 1, x(s) + 2)) for s in (1, 7, 13, 26, 32, 38))
    assert not cols & set(range(x(14) + 3, x(25) - 2)), sorted(cols)


def test_a_val_only_line_has_the_val_colour_and_a_legend(page: Page, server: Runner,
                                                        runs_dir: Path) -> None:
    """SFT logs val/accuracy alone: the old chart drew it in the train colour, unnamed."""
    run = init(name="val-acc", dir=runs_dir, method="sft", base_model="tiny", dataset="d")
    for i in range(40):
        m = {"loss": 2.0 - 0.04 * i}
        if i % 10 == 9:
            m["val/loss"] = 2.1 - 0.04 * i
            m["val/accuracy"] = 0.2 + 0.01 * i
        run.log(m, step=i)
    run.finish("SUCCEEDED")
    wait_indexed(server.url, "val-acc", 39)
    open_run(page, server.url, "val-acc")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    val_all, val_legend = pixels(page, "accuracy", VAL_RGB)
    train_all, _ = pixels(page, "accuracy", TRAIN_RGB)
    assert val_all > 50 and val_legend > 0, (val_all, val_legend)  # a line and its legend key
    assert train_all == 0, train_all
    expect(page.locator('[data-chart="accuracy"]')).to_have_attribute("data-legend", "val")
    # on the loss chart both lines, each in its own colour, both in the legend
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-legend", "train|val")
    for rgb in (TRAIN_RGB, VAL_RGB):
        line, legend = pixels(page, "loss", rgb)
        assert line > 50 and legend > 0, (rgb, line, legend)
    shot(page, "charts-val-colour")


def loss_chart_of_a_new_run(page: Page, server: Runner, runs_dir: Path,
                            name: str) -> tuple[Locator, FloatRect]:
    """A 40-step SFT run `name` opened: its loss chart and the chart's box."""
    sft_run(runs_dir, name, steps=40)
    wait_indexed(server.url, name, 39)
    open_run(page, server.url, name)
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    chart = page.locator('[data-chart="loss"]')
    box = chart.bounding_box()
    assert box is not None
    return chart, box


def test_a_zoom_shows_whole_steps_and_reset_zoom_shows_the_run_again(
        page: Page, server: Runner, runs_dir: Path) -> None:
    chart, box = loss_chart_of_a_new_run(page, server, runs_dir, "zoomy")
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    span = 40
    zoomed = ""
    while span > 8:  # each wheel turn zooms in a little; wait for its reload
        page.mouse.wheel(0, -120)
        expect(chart).to_have_attribute("data-zoomed", re.compile(r"\d+-\d+"))
        expect(chart).not_to_have_attribute("data-zoomed", zoomed)
        zoomed = chart.get_attribute("data-zoomed") or ""
        lo, hi = (int(v) for v in zoomed.split("-"))
        span = hi - lo
    assert span >= 3, zoomed
    expect(card(page, "loss").locator(".chart-reset")).to_be_visible()
    # the axis labels ECharts drew for the zoomed window are whole steps
    labels = (chart.get_attribute("data-x-labels") or "").split("|")
    assert labels and all(re.fullmatch(r"\d+", v) for v in labels), labels
    heads = set()
    for fraction in (0.1, 0.33, 0.5, 0.71, 0.9):
        head = hover_tooltip(page, "loss", fraction).splitlines()[0]
        assert re.fullmatch(r"step \d+", head), head
        heads.add(head)
    assert len(heads) >= 3, heads
    shot(page, "charts-zoomed")
    card(page, "loss").locator(".chart-reset").click()
    expect(chart).not_to_have_attribute("data-zoomed", re.compile(".*"))
    expect(chart).to_have_attribute("data-counts", "loss=40;val/loss=4")
    expect(card(page, "loss").locator(".chart-reset")).to_be_hidden()
    # zoomed in again, another x axis starts from the whole run
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -600)
    expect(chart).to_have_attribute("data-zoomed", re.compile(r"\d+-\d+"))
    card(page, "loss").locator(".chart-settings-toggle").click()
    card(page, "loss").locator(".chart-x").select_option("tokens")
    # tokens after step 0 to tokens after step 39
    expect(chart).to_have_attribute("data-x-labels", re.compile(r"^512\|.*\|20\.5k$"))
    expect(chart).not_to_have_attribute("data-zoomed", re.compile(".*"))
    expect(card(page, "loss").locator(".chart-reset")).to_be_hidden()


FIND_COLOUR = """([sel, rgb, tol, yCss]) => {
  const canvas = document.querySelector(sel + ' canvas');
  const ratio = canvas.width / canvas.clientWidth;
  const y = Math.round(yCss * ratio);
  const row = canvas.getContext('2d').getImageData(0, y, canvas.width, 1).data;
  for (let x = 0; x < canvas.width; x++) {
    const i = 4 * x;
    const near = [0, 1, 2].every((c) => Math.abs(row[i + c] - rgb[c]) <= tol);
    if (near && row[i + 3] > 200) return x / ratio;
  }
  return -1;
}"""


def test_a_drag_zooms_a_double_click_resets_and_the_legend_hides_a_line(
        page: Page, server: Runner, runs_dir: Path) -> None:
    chart, box = loss_chart_of_a_new_run(page, server, runs_dir, "dragged")
    drag_zoom(page, box, 0.25, 0.5)
    mid_y = box["y"] + box["height"] / 2
    # about steps 10 to 20 of 0 to 39, read again for that window
    expect(chart).to_have_attribute("data-zoomed", re.compile(r"^(9|10|11)-(19|20|21)$"))
    expect(chart).to_have_attribute("data-counts", re.compile(r"^loss=1[0-3];val/loss=[12]$"))
    expect(card(page, "loss").locator(".chart-reset")).to_be_visible()
    page.mouse.dblclick(box["x"] + box["width"] / 2, mid_y)
    expect(chart).not_to_have_attribute("data-zoomed", re.compile(".*"))
    expect(chart).to_have_attribute("data-counts", "loss=40;val/loss=4")
    # a click on the val entry of the legend (its row is 4 to 24 px from the top) hides
    # the val line and greys the entry
    line, _ = pixels(page, "loss", VAL_RGB)
    assert line > 50, line
    x = page.evaluate(FIND_COLOUR, ['[data-chart="loss"]', list(VAL_RGB), 40, 14])
    assert x >= 0, "no val entry in the legend"
    page.mouse.click(box["x"] + x + 4, box["y"] + 14)
    expect(chart).to_have_attribute("data-hidden", "val")
    assert pixels(page, "loss", VAL_RGB) == (0, 0)


def test_watch_first_and_optimizer_metrics_have_charts_that_findings_mark(
        page: Page, server: Runner, runs_dir: Path) -> None:
    run = init(name="grpo-watch", dir=runs_dir, method="grpo", base_model="tiny",
               dataset="arith")
    for i in range(20):
        run.log({"reward_mean": i / 20, "reward_std": 0.3, "completion_advantage_std": 0.5,
                 "zero_variance_skip_ratio": 0.8, "identical_nonzero_reward_skip_ratio": 0.1,
                 # another framework's name for truncated_ratio (an alias)
                 "completions/clipped_ratio": 0.05, "mean_sampled_response_length": 100.0 + i,
                 "async/staleness_mean": 0.5, "async/staleness_max": 1.0,
                 "grad_norm": 1.0, "grad_clip_factor": 1.0, "update_ratio": 1e-3,
                 "adapter_norm": 10.0 + i / 100, "context_overflow_ratio": 0.6}, step=i)
    run.finish("SUCCEEDED")
    dpo = init(name="dpo-margin", dir=runs_dir, method="dpo", base_model="tiny",
               dataset="prefs")
    for i in range(20):
        m = {"loss": 0.7 - i / 100, "mean_margin": i / 10}
        if i % 5 == 4:
            m["val/mean_margin"] = i / 12
        dpo.log(m, step=i)
    dpo.finish("SUCCEEDED")
    # SFT's validation samples too (the recipe's val/mean_response_length)
    sft = init(name="sft-length", dir=runs_dir, method="sft", base_model="tiny",
               dataset="arith")
    for i in range(20):
        sft.log({"loss": 1.0 - i / 40} | ({"val/mean_response_length": 12.0 + i}
                                          if i % 5 == 4 else {}), step=i)
    sft.finish("SUCCEEDED")
    wait_indexed(server.url, "grpo-watch", 19)
    wait_indexed(server.url, "dpo-margin", 19)
    wait_indexed(server.url, "sft-length", 19)

    open_run(page, server.url, "grpo-watch")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    expected = {"skip", "spread", "truncation", "length", "staleness", "grad_norm",
                "grad_clip_factor", "update_ratio", "adapter_norm"}
    assert expected <= drawn_charts(page), drawn_charts(page)
    expect(page.locator('[data-chart="truncation"]')).to_have_attribute(
        "data-counts", "completions/clipped_ratio=20")
    # the health finding on the skip ratio shades the skip chart
    expect(page.locator("#health")).to_contain_text("no reward variance")
    expect(page.locator('[data-chart="skip"]')).to_have_attribute("data-markers", "1")
    # a finding on a metric no spec chart shows gets a chart of its own, marked
    flagged = page.locator('[data-chart="key:context_overflow_ratio"]')
    expect(flagged).to_have_attribute("data-markers", "1")
    expect(page.locator('[data-group="Flagged by health"]')).to_be_visible()
    # what the model generates has a heading of no method; GRPO's own sampling keeps its
    expect(page.locator('[data-group="Generation"] [data-chart]')).to_have_count(2)
    expect(page.locator('[data-group="GRPO sampling"] [data-chart="skip"]')).to_be_visible()
    shot(page, "charts-watch-first")

    open_run(page, server.url, "sft-length")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    expect(page.locator('[data-group="Generation"] [data-chart="length"]')).to_be_visible()
    expect(page.locator(".group-title", has_text="GRPO")).to_have_count(0)

    open_run(page, server.url, "dpo-margin")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    expect(page.locator('[data-chart="margin"]')).to_have_attribute(
        "data-counts", "mean_margin=20;val/mean_margin=4")


# counts, per chart, the times it was drawn (each draw sets its data-points again)
COUNT_DRAWS = """window.__draws = {};
new MutationObserver((ms) => { for (const m of ms) {
  const id = m.target.dataset.chart; window.__draws[id] = (window.__draws[id] || 0) + 1; } })
  .observe(document, {subtree: true, attributes: true, attributeFilter: ['data-points']});"""


def test_opening_a_run_draws_each_chart_once(page: Page, server: Runner,
                                             runs_dir: Path) -> None:
    """A chart is drawn when its series come, and not again when the run's health answer
    leaves its markers as they were (the page drew every chart twice, which for a long
    run cost a third of its opening)."""
    sft_run(runs_dir, "drawn-once")
    wait_indexed(server.url, "drawn-once", 39)
    page.add_init_script(COUNT_DRAWS)
    open_run(page, server.url, "drawn-once")  # loaded: the health answer is applied
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    charts = drawn_charts(page)
    assert charts == {"loss", "lr", "accuracy"}
    assert page.evaluate("window.__draws") == {c: 1 for c in charts}


def test_opening_a_run_reads_its_keys_and_chart_series_in_one_request(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """The run page asked for the run's keys, and only then for its charts' series: two
    rounds before a chart could draw. GET /api/overlay answers both at once."""
    sft_run(runs_dir, "one-round")
    wait_indexed(server.url, "one-round", 39)
    asked: list[str] = []
    page.on("request", lambda r: asked.append(urlparse(r.url).path)
            if re.search(r"/api/(series|overlay|runs/[^/]+/metrics/keys)", r.url) else None)
    open_run(page, server.url, "one-round")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    assert asked == ["/api/overlay"], asked
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-counts",
                                                                 "loss=40;val/loss=4")


def picker_run(runs_dir: Path, name: str) -> None:
    run = init(name=name, dir=runs_dir, method="sft", base_model="tiny", dataset="d")
    for i in range(12):
        run.log({"loss": 1.0 / (i + 1), "custom/foo": float(i), "custom/bar": 2.0 * i,
                 "env/score": 0.5, "padding_fraction": 0.1}, step=i)
    run.finish("SUCCEEDED")


def test_the_metric_picker_adds_and_removes_charts_remembered_per_run(
        page: Page, server: Runner, runs_dir: Path) -> None:
    picker_run(runs_dir, "pick-a")
    picker_run(runs_dir, "pick-b")
    wait_indexed(server.url, "pick-a", 11)
    wait_indexed(server.url, "pick-b", 11)
    open_run(page, server.url, "pick-a")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    assert drawn_charts(page) == {"loss"}
    page.click("#chart-picker-open")
    picker = page.locator("#chart-picker")
    groups = picker.locator(".picker-group")
    expect(groups).to_have_count(3)
    assert [g.get_attribute("data-namespace") for g in groups.all()] == [
        "(no namespace)", "custom", "env"]
    # the loss is on a chart already: listed, not pickable
    expect(picker.locator('[data-key="loss"]')).to_be_disabled()
    page.fill("#chart-picker-search", "foo")
    expect(picker.locator(".picker-key")).to_have_count(1)
    shot(page, "charts-picker")
    picker.locator('[data-key="custom/foo"]').click()
    added = page.locator('[data-chart="key:custom/foo"]')
    expect(added).to_have_attribute("data-points", "12")
    expect(picker.locator('[data-key="custom/foo"]')).to_be_disabled()
    page.fill("#chart-picker-search", "env")
    page.press("#chart-picker-search", "Enter")  # adds the first match
    expect(page.locator('[data-chart="key:env/score"]')).to_have_attribute("data-points", "12")
    card(page, "loss").locator(".chart-remove").click()
    expect(page.locator('[data-chart="loss"]')).to_have_count(0)

    page.reload()
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    assert drawn_charts(page) == {"key:custom/foo", "key:env/score"}
    # another run keeps its own set
    open_run(page, server.url, "pick-b")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    assert drawn_charts(page) == {"loss"}
    open_run(page, server.url, "pick-a")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    expect(page.locator('[data-chart="key:custom/foo"]')).to_have_count(1)
    page.click("#chart-picker-open")
    page.click("#chart-picker-defaults")
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-points", "12")
    assert drawn_charts(page) == {"loss"}


def test_per_chart_log_scale_smoothing_and_tokens_axis(page: Page, server: Runner,
                                                       runs_dir: Path) -> None:
    sft_run(runs_dir, "settings", steps=40)  # 512 trained tokens a step
    wait_indexed(server.url, "settings", 39)
    open_run(page, server.url, "settings")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    loss = card(page, "loss")
    loss.locator(".chart-settings-toggle").click()
    # log scale
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-log", "false")
    loss.locator(".chart-log").check()
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-log", "true")
    # this chart's smoothing off; the others keep the page's
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-smoothed", "train")
    loss.locator(".chart-smoothing").fill("0")
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-smoothed", "")
    expect(page.locator('[data-chart="accuracy"]')).to_have_attribute("data-smoothed", "train")
    # tokens trained so far on the x axis: 40 steps of 512 at the last point
    loss.locator(".chart-x").select_option("tokens")
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-x", "tokens")
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-counts",
                                                                 "loss=40;val/loss=4")
    head = hover_tooltip(page, "loss", 1.0).splitlines()[0]
    assert head == "20,480 tokens · step 39", head
    shot(page, "charts-settings")
    page.reload()
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    loss = card(page, "loss")
    expect(loss.locator(".chart-x")).to_have_value("tokens")
    expect(loss.locator(".chart-log")).to_be_checked()
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-smoothed", "")
    head = hover_tooltip(page, "loss", 1.0).splitlines()[0]
    assert head == "20,480 tokens · step 39", head


def test_a_run_without_tokens_offers_no_tokens_axis(page: Page, server: Runner,
                                                   runs_dir: Path) -> None:
    picker_run(runs_dir, "no-tokens")
    wait_indexed(server.url, "no-tokens", 11)
    open_run(page, server.url, "no-tokens")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    options = card(page, "loss").locator(".chart-x option")
    assert [o.get_attribute("value") for o in options.all()] == ["step", "time", "relative"]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_csv_and_png_export_of_a_chart(page: Page, server: Runner, runs_dir: Path) -> None:
    sft_run(runs_dir, "export", steps=40)
    wait_indexed(server.url, "export", 39)
    open_run(page, server.url, "export")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    loss = card(page, "loss")
    with page.expect_download() as dl:
        loss.locator(".chart-csv").click()
    path = dl.value.path()
    assert dl.value.suggested_filename.endswith("-loss.csv")
    rows = list(csv.reader(io.StringIO(Path(path).read_text())))
    assert rows[0][0] == "step" and rows[0][-2:] == ["train", "val"]
    body = rows[1:]
    assert [int(r[0]) for r in body] == list(range(40))
    for r in body:
        i = int(r[0])
        assert math.isclose(float(r[-2]), 2.0 * math.exp(-i / 20) + 0.1, rel_tol=1e-9)
        if i % 10 == 9:
            assert math.isclose(float(r[-1]), 2.1 * math.exp(-i / 20) + 0.15, rel_tol=1e-9)
        else:
            assert r[-1] == ""
    with page.expect_download() as dl:
        loss.locator(".chart-png").click()
    assert dl.value.suggested_filename.endswith("-loss.png")
    data = Path(dl.value.path()).read_bytes()
    box = page.locator('[data-chart="loss"]').bounding_box()
    assert box is not None
    # drawn at twice the pixel ratio of the chart on the page
    assert png_size(data) == (round(box["width"]) * 2, round(box["height"]) * 2)


def test_a_non_finite_value_is_told_from_one_never_logged(page: Page, server: Runner,
                                                         runs_dir: Path) -> None:
    """The API sends a NaN or an infinity as null at a step the series holds; a step the
    key was not logged at is not in its series. The CSV writes `nan` for the first (as
    `runwatch runs metrics -o csv` does) and an empty cell for the second; the tooltip says
    "non-finite", not the dash of a missing value."""
    run = init(name="nonfinite", dir=runs_dir, method="sft", base_model="tiny", dataset="d")
    for i in range(10):
        loss = {2: math.nan, 3: math.inf, 4: -math.inf}.get(i, 1.0 / (i + 1))
        run.log({"loss": loss, **({"val/loss": 0.5} if i % 5 == 0 else {})}, step=i)
    run.finish("SUCCEEDED")
    wait_indexed(server.url, "nonfinite", 9)
    open_run(page, server.url, "nonfinite")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    with page.expect_download() as dl:
        card(page, "loss").locator(".chart-csv").click()
    rows = list(csv.reader(io.StringIO(Path(dl.value.path()).read_text())))
    assert rows[0][0] == "step" and rows[0][-2:] == ["train", "val"]
    cells = {int(r[0]): r[-2:] for r in rows[1:]}
    assert cells[2] == cells[3] == cells[4] == ["nan", ""]
    assert cells[0] == ["1", "0.5"] and cells[5][1] == "0.5"
    assert cells[6] == ["0.14285714285714285", ""]
    assert "train: non-finite" in hover_tooltip(page, "loss", 3 / 9)
    # the History table tells them apart too (it showed "—" for both): the API leaves a key
    # with no point at a step out of the row, and sends a non-finite value as null
    def row(step: int) -> Locator:
        return page.locator("#history tbody tr").filter(
            has=page.locator("td:first-child", has_text=re.compile(rf"^{step}$")))

    for step in (2, 3, 4):
        expect(row(step).locator("td.non-finite")).to_have_text("non-finite")
    expect(row(1).locator("td.non-finite")).to_have_count(0)
    expect(row(1)).to_contain_text("—")  # no val/loss at step 1


def test_charts_follow_dark_mode(browser: Browser, server: Runner, runs_dir: Path) -> None:
    """Grid lines and axis labels in the dark theme's colours (style.css --chart-grid,
    --chart-axis); the old charts kept ECharts' light defaults on the dark card."""
    sft_run(runs_dir, "dark", steps=40)
    wait_indexed(server.url, "dark", 39)
    context = browser.new_context(color_scheme="dark", viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        open_run(page, server.url, "dark")
        page.wait_for_selector(".chart-groups[data-drawn=true]")
        grid, _ = pixels(page, "loss", (0x2C, 0x32, 0x3D), tol=3)
        axis, _ = pixels(page, "loss", (0x9A, 0xA3, 0xB2), tol=6)
        assert grid > 300 and axis > 20, (grid, axis)
        shot(page, "charts-dark")
        assert not errors, errors
    finally:
        context.close()


def test_a_chart_drawn_anew_under_a_still_mouse_keeps_its_tooltip(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """A chart made again (here the system turning dark; also a log scale or an x axis
    switched, a tokens axis loaded) under a mouse that has not moved shows the tip of the
    point under it at once: uPlot keeps no cursor across a rebuild, and the tip had hidden
    until the mouse moved."""
    sft_run(runs_dir, "still", steps=40)
    wait_indexed(server.url, "still", 39)
    open_run(page, server.url, "still")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    before = hover_tooltip(page, "loss", 0.5)
    canvas = page.locator('[data-chart="loss"] canvas').first.element_handle()
    page.emulate_media(color_scheme="dark")
    # drawn anew: the old canvas is gone
    page.wait_for_function("(old) => !old.isConnected", arg=canvas)
    tip = page.locator('[data-chart="loss"] .chart-tip').first
    expect(tip).to_be_visible()
    assert tip.inner_text() == before
    page.emulate_media(color_scheme="light")


def test_wall_time_and_relative_time_axes(page: Page, server: Runner, runs_dir: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Points logged 30 s apart (the SDK's clock set so): the x axis in wall time and in
    time since the first point, from the series API's `x=time`; the CSV carries the time."""
    t0 = float(int(time.time()) - 3600)
    clock = iter(t0 + 30 * i for i in range(1000))
    monkeypatch.setattr(sdk_run_module, "_now", lambda: next(clock))
    run = init(name="timed", dir=runs_dir, method="sft", base_model="tiny", dataset="d")
    for i in range(20):
        run.log({"loss": 1.0 / (i + 1)}, step=i)
    run.finish("SUCCEEDED")
    wait_indexed(server.url, "timed", 19)
    open_run(page, server.url, "timed")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    loss = card(page, "loss")
    loss.locator(".chart-settings-toggle").click()
    loss.locator(".chart-x").select_option("relative")
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-x", "relative")
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-points", "20")
    head = hover_tooltip(page, "loss", 1.0).splitlines()[0]
    assert head == "9m 30s · step 19", head
    labels = (page.get_attribute('[data-chart="loss"]', "data-x-labels") or "").split("|")
    assert "0s" in labels and all(re.fullmatch(r"\d+s|\d+m( \d\ds)?", v) for v in labels), labels
    shot(page, "charts-relative-time")

    loss.locator(".chart-x").select_option("time")
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-x", "time")
    wall = page.evaluate(f"new Date({(t0 + 30 * 19) * 1000}).toLocaleString()")
    head = hover_tooltip(page, "loss", 1.0).splitlines()[0]
    assert head == f"{wall} · step 19", head

    with page.expect_download() as dl:
        loss.locator(".chart-csv").click()
    rows = list(csv.reader(io.StringIO(Path(dl.value.path()).read_text())))
    assert rows[0] == ["step", "time", "train"]
    assert [float(r[1]) for r in rows[1:]] == [t0 + 30 * i for i in range(20)]


def test_a_live_run_extends_the_tokens_axis_and_the_picker(page: Page, server: Runner,
                                                           runs_dir: Path) -> None:
    run = init(name="live-tokens", dir=runs_dir, method="sft", base_model="tiny", dataset="d",
               flush_interval=0.05)
    try:
        for i in range(10):
            run.log({"loss": 1.0 / (i + 1), "trained_tokens": 100.0}, step=i)
        wait_indexed(server.url, "live-tokens", 9)
        open_run(page, server.url, "live-tokens")
        page.wait_for_selector(".chart-groups[data-drawn=true]")
        loss = card(page, "loss")
        chart = page.locator('[data-chart="loss"]')
        expect(chart).to_have_attribute("data-x-labels", re.compile(r"\d"))
        by_step = chart.get_attribute("data-x-labels")
        loss.locator(".chart-settings-toggle").click()
        loss.locator(".chart-x").select_option("tokens")
        # the series is read again for the new axis: hover once it is drawn with it (a
        # hover before that redraw lost its tooltip to it, once in CI)
        expect(chart).not_to_have_attribute("data-x-labels", by_step or "")
        assert hover_tooltip(page, "loss", 1.0).splitlines()[0] == "1,000 tokens · step 9"
        run.log({"loss": 0.05, "trained_tokens": 300.0, "custom/late": 1.0}, step=10)
        expect(chart).to_have_attribute("data-points", "11")
        assert hover_tooltip(page, "loss", 1.0).splitlines()[0] == "1,300 tokens · step 10"
        # a key first logged while the page is open can be picked
        page.click("#chart-picker-open")
        page.fill("#chart-picker-search", "late")
        page.locator('#chart-picker [data-key="custom/late"]').click()
        expect(page.locator('[data-chart="key:custom/late"]')).to_have_attribute(
            "data-points", "1")
    finally:
        # a run left live keeps the SDK's SIGTERM handler in this worker's process, which
        # a later test of the handler then reads (CI: test_sdk_signals failed after this)
        run.finish("SUCCEEDED")
