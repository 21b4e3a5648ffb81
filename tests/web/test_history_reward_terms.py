"""A reinforcement run's History in a real browser: after the metrics, a column per split
and reward term, each step's mean over its rollouts (`term/NAME`, `val/term/NAME`), as
`runwatch runs metrics` shows them; a run whose rollouts report no term has none. Found in
review: the terms were in the CLI and the API, and nowhere in the web app."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from runwatch.server.runner import Runner
from tests.cli.test_metrics_reward_terms import rl_run
from tests.support import sdk_run

from .webhelpers import open_run, wait_indexed

pytestmark = pytest.mark.module_server


def test_the_history_shows_each_steps_reward_terms(page: Page, server: Runner,
                                                    runs_dir: Path) -> None:
    rl_run(runs_dir, "terms-rl")
    wait_indexed(server.url, "terms-rl", 2, samples=3)
    open_run(page, server.url, "terms-rl")
    history = page.locator("#history")
    heads = history.locator("thead th")
    expect(heads.nth(-1)).to_have_text("val/term/raw")
    names = heads.all_text_contents()
    assert names[0] == "step" and names[-3:] == ["term/penalty", "term/raw", "val/term/raw"]
    rows = history.locator("tbody tr")
    expect(rows).to_have_count(3)
    cells = [rows.nth(i).locator("td").all_text_contents() for i in range(3)]
    assert [c[0] for c in cells] == ["0", "1", "2"]
    assert cells[0][-3:] == ["-0.25", "0.5", "1"]
    assert cells[1][-3:] == ["—", "0.5", "—"]
    assert cells[2][-3:] == ["—", "—", "—"]


def test_a_run_without_reward_terms_has_no_term_columns(page: Page, server: Runner,
                                                        runs_dir: Path) -> None:
    sdk_run(runs_dir, "terms-sft", steps=3)
    wait_indexed(server.url, "terms-sft", 2)
    open_run(page, server.url, "terms-sft")
    rows = page.locator("#history tbody tr")
    expect(rows).to_have_count(3)
    assert not [t for t in page.locator("#history thead th").all_text_contents() if "term/" in t]
