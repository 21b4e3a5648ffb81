"""The run table's header cells in a real browser on a real server (trial 35, D8: only the
label of a header cell sorted, 45 of the Name cell's 200 pixels, so a click beside the
label did nothing): a click anywhere in a header cell sorts by its column."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from runwatch.server.runner import Runner

from .webhelpers import sft_run, wait_indexed

pytestmark = pytest.mark.module_server


def test_a_click_anywhere_in_a_header_cell_sorts_by_it(page: Page, server: Runner,
                                                       runs_dir: Path) -> None:
    for name in ("sort-b", "sort-c", "sort-a"):
        sft_run(runs_dir, name, steps=3)
    wait_indexed(server.url, "sort-a", 2)
    page.goto(f"{server.url}/table")
    names = page.locator('#run-table-body td[data-col="name"]')
    expect(names).to_have_text(["sort-a", "sort-c", "sort-b"])  # newest first
    cell = page.locator("#run-table thead th", has_text="Name")
    label = cell.locator("[data-sort=name]")
    cell_box, label_box = cell.bounding_box(), label.bounding_box()
    assert cell_box is not None and label_box is not None
    # beside the label, near the cell's right edge and its bottom
    x = cell_box["x"] + cell_box["width"] - 4
    y = cell_box["y"] + cell_box["height"] - 3
    assert x > label_box["x"] + 45
    page.mouse.click(x, y)
    expect(names).to_have_text(["sort-a", "sort-b", "sort-c"])
    assert "sort=name" in page.url
    expect(cell).to_have_attribute("aria-sort", "ascending")
    page.mouse.click(x, y)  # again: the other way
    expect(names).to_have_text(["sort-c", "sort-b", "sort-a"])
    expect(cell).to_have_attribute("aria-sort", "descending")
