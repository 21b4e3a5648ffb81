"""A chart's scales and its PNG in a real browser: the PNG draws what the page shows (the
same x window, zoomed too, the same lines), a constant line on a log axis, steps past
10**12 and up to 2**63 - 1 with labelled ticks, and y labels that tell each tick apart
(see docs/web.md, "Charts"). What a chart draws is read from its canvas pixels and the
data attributes it keeps."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from runwatch.sdk import init
from runwatch.server.runner import Runner

from .webhelpers import TRAIN_RGB, VAL_RGB, drag_zoom, open_run, sft_run, shot, wait_indexed

pytestmark = pytest.mark.module_server

# The extent of the pixels of one colour on a canvas, below the legend's strip, in the
# chart's CSS pixels: [left, right, top, bottom, count] (count 0: none). `source` is a
# selector of the chart whose canvas is read, or a PNG as base64, drawn on a canvas first.
EXTENT = """async ([source, cssWidth, rgb, tol, topPx]) => {
  let canvas;
  if (source.startsWith('[')) {
    canvas = document.querySelector(source + ' canvas');
  } else {
    const img = new Image();
    img.src = 'data:image/png;base64,' + source;
    await img.decode();
    canvas = document.createElement('canvas');
    canvas.width = img.width;
    canvas.height = img.height;
    canvas.getContext('2d').drawImage(img, 0, 0);
  }
  const ratio = canvas.width / cssWidth;
  const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let left = Infinity, right = -1, top = Infinity, bottom = -1, count = 0;
  for (let i = 0; i < data.length; i += 4) {
    const near = [0, 1, 2].every((c) => Math.abs(data[i + c] - rgb[c]) <= tol);
    if (!near || data[i + 3] <= 200) continue;
    const x = ((i / 4) % canvas.width) / ratio;
    const y = Math.floor(i / 4 / canvas.width) / ratio;
    if (y < topPx) continue;
    count++;
    left = Math.min(left, x); right = Math.max(right, x);
    top = Math.min(top, y); bottom = Math.max(bottom, y);
  }
  return [left, right, top, bottom, count];
}"""
LEGEND_CSS_PX = 30  # the legend's strip above the plot, where a line's key is drawn


def extent(page: Page, chart: str, rgb: tuple[int, int, int],
           png: bytes | None = None) -> list[float]:
    """Where `chart` draws colour `rgb` on the page, or in its exported `png`."""
    box = page.locator(f'[data-chart="{chart}"]').bounding_box()
    assert box is not None
    source = f'[data-chart="{chart}"]' if png is None else base64.b64encode(png).decode()
    found: list[float] = page.evaluate(EXTENT, [source, box["width"], list(rgb), 40,
                                                LEGEND_CSS_PX])
    return found


def card(page: Page, chart: str) -> Locator:
    return page.locator(f'[data-chart-card="{chart}"]')


def export_png(page: Page, chart: str) -> bytes:
    with page.expect_download() as dl:
        card(page, chart).locator(".chart-png").click()
    return Path(dl.value.path()).read_bytes()


def assert_same_lines(page: Page, chart: str, rgb: tuple[int, int, int]) -> None:
    """The PNG of `chart` draws its `rgb` line where the page does (within 2 CSS px)."""
    png = export_png(page, chart)
    on_page = extent(page, chart, rgb)
    in_png = extent(page, chart, rgb, png)
    assert on_page[4] > 50, on_page
    assert in_png[4] > 50, in_png
    assert all(abs(a - b) <= 2 for a, b in zip(on_page[:4], in_png[:4], strict=True)), (
        on_page, in_png)


def y_labels(page: Page, chart: str) -> list[str]:
    return (page.get_attribute(f'[data-chart="{chart}"]', "data-y-labels") or "").split("|")


def test_a_png_draws_the_chart_as_shown_zoomed_too(page: Page, server: Runner,
                                                   runs_dir: Path) -> None:
    """The export drew a second uPlot whose x scale came out as one value: an x axis from
    -1 to 1 showing the first point or two, and a zoomed chart blank."""
    sft_run(runs_dir, "png-shown", steps=40)
    wait_indexed(server.url, "png-shown", 39)
    open_run(page, server.url, "png-shown")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    assert_same_lines(page, "loss", TRAIN_RGB)
    assert_same_lines(page, "loss", VAL_RGB)

    chart = page.locator('[data-chart="loss"]')
    box = chart.bounding_box()
    assert box is not None
    drag_zoom(page, box, 0.25, 0.6)
    expect(chart).to_have_attribute("data-zoomed", re.compile(r"^\d+-\d+$"))
    expect(chart).to_have_attribute("data-counts", re.compile(r"^loss=1[2-9];val/loss=[1-4]$"))
    assert_same_lines(page, "loss", TRAIN_RGB)
    # a line hidden from the legend is left out of the PNG too (its key greyed)
    assert_same_lines(page, "loss", VAL_RGB)
    val_entry = page.evaluate("""() => {
        const c = document.querySelector('[data-chart="loss"] canvas');
        const d = c.getContext('2d').getImageData(0, 14, c.width, 1).data;
        for (let x = 0; x < c.width; x++) {
          if (Math.abs(d[4 * x] - 0xEA) < 40 && Math.abs(d[4 * x + 1] - 0x58) < 40) return x;
        }
        return -1; }""")
    assert val_entry >= 0
    page.mouse.click(box["x"] + val_entry + 4, box["y"] + 14)
    expect(chart).to_have_attribute("data-hidden", "val")
    assert extent(page, "loss", VAL_RGB, export_png(page, "loss"))[4] == 0
    assert_same_lines(page, "loss", TRAIN_RGB)


def test_a_constant_line_on_a_log_axis_is_drawn(page: Page, server: Runner,
                                                runs_dir: Path) -> None:
    """A learning rate of 1e-3 at every step: the log axis's range was 1e-3 to 1e-3, and
    the card drew no line, no labels and no grid."""
    run = init(name="flat-lr", dir=runs_dir, method="sft", base_model="tiny", dataset="d")
    for i in range(30):
        run.log({"loss": 1.0 / (i + 1), "learning_rate": 1e-3}, step=i)
    run.finish("SUCCEEDED")
    wait_indexed(server.url, "flat-lr", 29)
    open_run(page, server.url, "flat-lr")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    expect(page.locator('[data-chart="lr"]')).to_have_attribute("data-log", "true")
    expect(page.locator('[data-chart="lr"]')).to_have_attribute("data-y-labels", re.compile("."))
    left, right, top, bottom, count = extent(page, "lr", TRAIN_RGB)
    assert count > 100 and right - left > 200 and bottom - top <= 4, (left, right, top, bottom)
    labels = y_labels(page, "lr")
    assert "0.001" in labels and len(labels) >= 2, labels
    shot(page, "charts-flat-log")


@pytest.mark.parametrize(("first", "gap"), [(10**12, 10**10), (2**63 - 1 - 39 * 10**17, 10**17)],
                         ids=["1e12", "2**63-1"])
def test_steps_up_to_the_largest_have_labelled_ticks(page: Page, server: Runner,
                                                     runs_dir: Path, first: int,
                                                     gap: int) -> None:
    """The step axis's tick steps stopped at 5e9: a run at steps 1e12 to 1.39e12 had no
    x labels."""
    name = f"far-steps-{first}"
    run = init(name=name, dir=runs_dir, method="sft", base_model="tiny", dataset="d")
    for i in range(40):
        run.log({"loss": 1.0 / (i + 1)}, step=first + i * gap)
    run.finish("SUCCEEDED")
    wait_indexed(server.url, name, first + 39 * gap)
    open_run(page, server.url, name)
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    chart = page.locator('[data-chart="loss"]')
    expect(chart).to_have_attribute("data-x-labels", re.compile(r"\d\|\d"))
    labels = (chart.get_attribute("data-x-labels") or "").split("|")
    assert all(re.fullmatch(r"\d+", v) for v in labels), labels
    assert len(set(labels)) == len(labels), labels
    # the ticks between the ends are steps of the run's span, not of its size
    assert abs(int(labels[0]) - first) <= gap, labels
    shot(page, f"charts-far-steps-{first}")


def test_linear_y_labels_tell_every_tick_apart(page: Page, server: Runner,
                                               runs_dir: Path) -> None:
    """A loss from 0 to 2e-4 was labelled 2e-4, 1e-4, 1e-4, 5e-5, 0 (1.5e-4 shown as 1e-4)."""
    run = init(name="tiny-loss", dir=runs_dir, method="sft", base_model="tiny", dataset="d")
    for i in range(40):
        run.log({"loss": 2e-4 * i / 39}, step=i)
    run.finish("SUCCEEDED")
    wait_indexed(server.url, "tiny-loss", 39)
    open_run(page, server.url, "tiny-loss")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    chart = page.locator('[data-chart="loss"]')
    expect(chart).to_have_attribute("data-y-labels", re.compile(r"\|"))
    labels = [v for v in y_labels(page, "loss") if v]
    assert len(set(labels)) == len(labels), labels
    assert "1.5e-4" in labels and "1e-4" in labels, labels
    # each the shortest that says its tick: no trailing zeros
    assert not any(re.search(r"\.\d*0e", v) for v in labels), labels
