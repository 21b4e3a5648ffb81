"""Two small things of trial 35 (D9) in a real browser on a real server: a rollout whose
reward was logged as NaN reads "non-finite", as the History and the charts' tooltips say
it, not the "—" of a reward never logged; and the empty pane's hint fits a phone's window,
where the list lies above the pane, not on its left."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from runwatch.sdk import Run, init
from runwatch.server.runner import Runner

from .webhelpers import open_run, sft_run, shot, themed_page, wait_indexed

pytestmark = pytest.mark.module_server


def test_a_nan_reward_reads_non_finite_and_a_missing_one_a_dash(page: Page, server: Runner,
                                                                 runs_dir: Path) -> None:
    run = init(name="nan-reward", dir=runs_dir, method="grpo", base_model="tiny",
               dataset="arith")
    assert isinstance(run, Run)
    run.log({"reward": 0.5}, step=0)
    run.log_samples(0, [
        {"prompt": "2+2?", "completion": "4", "reward": float("nan"), "advantage": 0.5,
         "reward_terms": {"correct": float("nan"), "format": 1.0}},
        {"prompt": "3+3?", "completion": "6"},
    ])
    run.finish("SUCCEEDED")
    wait_indexed(server.url, "nan-reward", 0, samples=1)
    open_run(page, server.url, "nan-reward")
    page.click('[data-tab-button="rollouts"]')
    nan = page.locator('.rollout[data-index="0"]')
    missing = page.locator('.rollout[data-index="1"]')
    expect(nan.locator(".fact", has_text="reward").first).to_have_text("reward non-finite")
    expect(nan.locator(".term").first).to_have_text("correct: non-finite")
    expect(nan.locator(".fact", has_text="advantage")).to_have_text("advantage 0.5")
    expect(missing.locator(".fact", has_text="reward").first).to_have_text("reward —")
    shot(page, "trial-rollout-nan-reward")


def test_the_empty_pane_s_hint_fits_both_layouts(browser: Browser, server: Runner,
                                                 runs_dir: Path) -> None:
    sft_run(runs_dir, "pick-me", steps=3)
    wait_indexed(server.url, "pick-me", 2)
    for width in (1400, 390):
        with themed_page(browser, "light", width=width) as page:
            page.goto(f"{server.url}/runs")
            expect(page.locator(".run-row").first).to_be_visible()
            hint = page.locator("#pick-a-run")
            expect(hint).to_have_text("Select a run in the list.")
            expect(hint).not_to_contain_text("left")
