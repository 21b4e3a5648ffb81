"""The charts of a long run (its series downsampled) in a real browser on a real server
(trial 35, D5: Loss started at step 0, but Learning rate and Gradient norm at the first
bucket's last step, 511 on a 200,000-step run, since a bucket is drawn at its last point):
every chart spans the run's steps from the first logged, and the series API says where
each series starts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from runwatch.server.runner import Runner
from tests.support import http

from .webhelpers import long_run, open_run, shot, wait_indexed

pytestmark = pytest.mark.module_server


def test_every_chart_of_a_long_run_starts_at_its_first_step(page: Page, server: Runner,
                                                              runs_dir: Path) -> None:
    long_run(runs_dir, "long-axes", steps=5000)
    wait_indexed(server.url, "long-axes", 4999)
    open_run(page, server.url, "long-axes")
    page.wait_for_selector(".chart-groups[data-drawn=true]")
    for chart in ("loss", "lr", "grad_norm"):
        el = page.locator(f'[data-chart="{chart}"]')
        expect(el).to_have_attribute("data-full", "false")
        expect(el).to_have_attribute("data-x-labels", re.compile(r"^0\|.*\|4999$"))
    shot(page, "trial-long-run-axes")

    answer = http.get(f"{server.url}/api/series", params={
        "run": "long-axes", "key": ["learning_rate", "val/loss"], "points": 500},
        timeout=30).json()
    lr, val = answer["series"]
    # the downsampled line's first bucket is drawn at its last point, after the first step
    assert lr["full"] is False and lr["step"][0] > 0 and lr["first_step"] == 0
    assert val["full"] is True and val["first_step"] == 0 == val["step"][0]
