"""The run list and the run table as lists: an empty runs folder saying how to record a
first run, a derived run's model in words (and raw in the table's CSV), a run that starts
while the table is open joining it without a reload, and a click on a row that changes
under the pointer still opening its run."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from runwatch.sdk import Run, init
from runwatch.server.runner import Runner

from .webhelpers import click_as_it_ends, press, sft_run, shot, wait_indexed


def _derived_run(runs_dir: Path, name: str, parent: str) -> None:
    run = init(name=name, dir=runs_dir, method="dpo",
               base_model=f"init_from:{runs_dir / parent}", dataset="prefs")
    for i in range(5):
        run.log({"loss": 0.69 - 0.01 * i}, step=i)
    run.finish("SUCCEEDED")


@pytest.mark.module_server
def test_a_derived_run_names_its_parent_run_not_an_init_from_path(page: Page, server: Runner,
                                                                   runs_dir: Path) -> None:
    sft_run(runs_dir, "sft-parent", steps=12)
    _derived_run(runs_dir, "dpo-child", "sft-parent")
    wait_indexed(server.url, "sft-parent", 11)
    wait_indexed(server.url, "dpo-child", 4)
    page.goto(f"{server.url}/runs")

    def model(name: str) -> Locator:
        row = page.locator(".run-row", has=page.locator(".run-name", has_text=name))
        return row.locator(".model")

    child = model("dpo-child")
    expect(child).to_have_text("from run sft-parent")
    expect(model("sft-parent")).to_have_text("Qwen/Qwen2.5-0.5B")
    page.click("#table-link")
    cell = page.locator('#run-table-body tr:has-text("dpo-child") td[data-col="model"]')
    expect(cell).to_have_text("from run sft-parent")
    expect(page.locator("#run-table-body")).not_to_contain_text("init_from:")
    shot(page, "lists-derived-model")
    # the CSV holds raw values: the init_from: path the run recorded, not the words shown
    with page.expect_download() as info:
        page.click("#table-csv")
    table = list(csv.reader(io.StringIO(Path(info.value.path()).read_text())))
    assert table[0][:4] == ["run_id", "name", "status", "model"]
    rows = {r[1]: r for r in table[1:]}
    assert rows["dpo-child"][3] == f"init_from:{runs_dir / 'sft-parent'}"
    assert rows["sft-parent"][3] == "Qwen/Qwen2.5-0.5B"


def test_an_empty_runs_folder_says_how_to_record_a_first_run(page: Page, server: Runner,
                                                              runs_dir: Path) -> None:
    """No run at all: the list says there is none yet and the pane how to record one (the
    SDK's lines, `runwatch submit`); a search that matches nothing still says so; the first
    run to arrive takes the guide's place."""
    page.goto(f"{server.url}/runs")
    status = page.locator(".list-status")
    guide = page.locator("#first-run")
    expect(status).to_have_text("No runs yet.")
    expect(guide).to_contain_text("No runs yet")
    expect(guide.locator("pre").first).to_contain_text("with runwatch.init(")
    expect(guide.locator("pre").first).to_contain_text("run.log(")
    expect(guide.locator("pre").last).to_contain_text("runwatch submit recipes sft")
    shot(page, "lists-first-run")
    page.fill("#search", "nothing-here")
    expect(status).to_have_text("No runs match.")
    expect(guide).to_have_count(0)
    expect(page.locator("#pick-a-run")).to_be_visible()
    page.fill("#search", "")
    expect(guide).to_be_visible()
    sft_run(runs_dir, "the-first", steps=3)
    expect(page.locator(".run-row")).to_have_count(1)
    expect(status).to_have_text("1 run")
    expect(guide).to_have_count(0)
    expect(page.locator("#pick-a-run")).to_have_text("Select a run in the list.")


def test_a_run_started_while_the_table_is_open_joins_it(page: Page, server: Runner,
                                                         runs_dir: Path) -> None:
    sft_run(runs_dir, "first-run", steps=5)
    wait_indexed(server.url, "first-run", 4)
    page.goto(f"{server.url}/table")
    names = page.locator('#run-table-body td[data-col="name"]')
    expect(names).to_have_text(["first-run"])
    expect(page.locator("#run-table-count")).to_have_text("1 run")
    # a search that the new run does not match keeps it out; cleared, the run is there
    sft_run(runs_dir, "second-run", steps=5)
    expect(names).to_have_text(["second-run", "first-run"])
    expect(page.locator("#run-table-count")).to_have_text("2 runs")
    # its latest loss is read like the others'
    loss = page.locator('#run-table-body tr:has-text("second-run") td[data-col="loss"]')
    expect(loss).not_to_have_text("—")
    page.fill("#table-search", "first")
    expect(names).to_have_text(["first-run"])
    sft_run(runs_dir, "third-run", steps=5)
    wait_indexed(server.url, "third-run", 4)
    sft_run(runs_dir, "first-again", steps=5)
    expect(names).to_have_text(["first-again", "first-run"])
    shot(page, "lists-table-live")


def test_a_latest_loss_that_went_nan_reads_nan_not_missing(page: Page, server: Runner,
                                                            runs_dir: Path) -> None:
    """The table's latest loss showed "—", as for a run that never logged one, when the
    last loss was NaN (found in review of a trial)."""
    for name, last in (("went-nan", float("nan")), ("fine", 0.2)):
        run = init(name=name, dir=runs_dir, method="sft", dataset="arith")
        for i in range(5):
            run.log({"loss": last if i == 4 else 1.0 / (i + 1)}, step=i)
        run.finish("SUCCEEDED")
        wait_indexed(server.url, name, 4)
    page.goto(f"{server.url}/table")
    expect(page.locator("#run-table-body")).to_have_attribute("data-latest", "true")
    cell = page.locator('#run-table-body tr:has-text("went-nan") td[data-col="loss"]')
    expect(cell).to_have_text("NaN")
    fine = page.locator('#run-table-body tr:has-text("fine") td[data-col="loss"]')
    expect(fine).to_have_text("0.2")


def _live(runs_dir: Path, name: str) -> Run:
    run = init(name=name, dir=runs_dir, method="sft", dataset="arith", flush_interval=0.05)
    assert isinstance(run, Run)
    for i in range(3):
        run.log({"loss": 1.0 - 0.1 * i}, step=i)
    return run


def _opened(page: Page, name: str) -> None:
    expect(page.locator("#detail[data-loaded=true]")).to_be_visible()
    expect(page.locator("#run-title")).to_have_text(name)
    assert "run=" in page.url


@pytest.mark.module_server
def test_a_click_on_a_list_row_whose_run_changes_under_it_opens_the_run(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """The list's row is patched as its run changes: rebuilt between the press and the
    release, the click went to the list itself and the run did not open (seen as a browser
    test that clicked a row as the list reloaded and waited for a run that never opened)."""
    run = _live(runs_dir, "press-live")
    wait_indexed(server.url, "press-live", 2)
    page.goto(f"{server.url}/runs")
    row = page.locator('.run-row:has-text("press-live")')
    click_as_it_ends(page, run, row, row.locator(".status"))
    _opened(page, "press-live")


def test_a_click_on_a_list_row_as_the_list_reloads_opens_the_run(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """A search that lists the same runs again keeps their rows: the run pressed opens."""
    sft_run(runs_dir, "reload-a", steps=3)
    sft_run(runs_dir, "reload-b", steps=3)
    wait_indexed(server.url, "reload-a", 2)
    wait_indexed(server.url, "reload-b", 2)
    page.goto(f"{server.url}/runs")
    row = page.locator('.run-row:has-text("reload-a")')
    expect(page.locator(".run-row")).to_have_count(2)
    # a mark the list's own rows never carry: gone once the list has shown them again
    row.evaluate("el => el.setAttribute('data-probe', '1')")
    press(page, row)
    page.fill("#search", "reload")
    expect(page.locator(".run-row[data-probe]")).to_have_count(0)
    expect(page.locator(".run-row")).to_have_count(2)
    page.mouse.up()
    _opened(page, "reload-a")


@pytest.mark.module_server
def test_a_click_on_a_table_row_whose_run_changes_under_it_opens_the_run(
        page: Page, server: Runner, runs_dir: Path) -> None:
    run = _live(runs_dir, "press-table")
    wait_indexed(server.url, "press-table", 2)
    page.goto(f"{server.url}/table")
    row = page.locator('#run-table-body tr:has-text("press-table")')
    click_as_it_ends(page, run, row.locator('td[data-col="name"] a'),
                      row.locator('td[data-col="status"] .status'))
    _opened(page, "press-table")


@pytest.mark.module_server
def test_a_list_row_is_no_button_around_controls_and_its_name_opens_the_run(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """A row was a button (role=button) holding a checkbox and a group button, controls a
    screen reader cannot reach inside a button. The row is a list item; its name is the
    button that opens the run, reached with Tab after the row's checkbox."""
    sft_run(runs_dir, "named-open", steps=3)
    wait_indexed(server.url, "named-open", 2)
    page.goto(f"{server.url}/runs")
    row = page.locator('.run-row:has-text("named-open")')
    expect(row).to_have_count(1)
    assert row.get_attribute("role") is None
    assert row.locator("[role=button], button").count() == 1  # its name's, no group here
    row.locator(".run-check").focus()
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Open named-open")).to_be_focused()
    page.keyboard.press("Enter")
    _opened(page, "named-open")
