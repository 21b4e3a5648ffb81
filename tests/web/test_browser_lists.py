"""The run list and the run table as lists: a derived run's model in words, and a run
that starts while the table is open joining it without a reload."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Locator, Page, expect
from webhelpers import sft_run, shot, wait_indexed

from runwatch.sdk import init
from runwatch.server.runner import Runner


def _derived_run(runs_dir: Path, name: str, parent: str) -> None:
    run = init(name=name, dir=runs_dir, method="dpo",
               base_model=f"init_from:{runs_dir / parent}", dataset="prefs")
    for i in range(5):
        run.log({"loss": 0.69 - 0.01 * i}, step=i)
    run.finish("SUCCEEDED")


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
