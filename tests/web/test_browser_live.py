"""The run page kept current while a run trains (issue #13): the History table and its
pager, the tiles, the Job details card and the Cost card follow the points the run logs
(and agree with each other: the last step, durations rounded alike);
GRPO runs get reward tiles instead of a train loss, DPO runs their preference tiles; a run
started from an earlier run (`init_from`) names its base model and links its parent run.

Each run is written by the SDK while the page is open, as a training process would (one by
hand, for times exact to the hundredth)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from runwatch.rundir import format as fmt
from runwatch.sdk import Run, init
from runwatch.server.runner import Runner
from tests.support import http
from tests.support.rundirs import write_run

from .webhelpers import open_run, shot, wait_indexed

# Every test writes runs of its own names and reads only those: one server for the module.
pytestmark = pytest.mark.module_server
GIB = 1024**3


def _live(runs_dir: Path, name: str, method: str = "sft", **fields: Any) -> Run:
    run = init(name=name, dir=runs_dir, method=method, dataset="arith", trainer="t",
               backend="local", flush_interval=0.05, **fields)
    assert isinstance(run, Run)
    return run


def _tile(tile: str) -> str:
    return f'[data-tile="{tile}"] .tile-value'


def _expect_tiles(page: Page, **shown: str) -> None:
    """Each tile shows its text (waiting, as the page follows the run)."""
    for tile, text in shown.items():
        expect(page.locator(_tile(tile))).to_have_text(text)


def _field(card: str, label: str) -> str:
    """The value of a card's row by its label (a `dl` of `dt` and `dd`)."""
    return f'#{card} dt:text-is("{label}") + dd'


def test_the_history_pager_follows_a_run_that_logs(page: Page, server: Runner,
                                                   runs_dir: Path) -> None:
    """A full first page still counts the steps logged after it, and the pager reaches
    them (before, the page and its count froze once the first 50 rows were there)."""
    run = _live(runs_dir, "hist-live")
    for i in range(60):
        run.log({"loss": 1.0 / (i + 1)}, step=i)
    wait_indexed(server.url, "hist-live", 59)
    open_run(page, server.url, "hist-live")
    info = page.locator("#history .pager span")
    expect(info).to_have_text("steps 0–49 of 60")
    for i in range(60, 70):
        run.log({"loss": 1.0 / (i + 1)}, step=i)
    expect(info).to_have_text("steps 0–49 of 70")
    expect(page.locator("#history tbody tr")).to_have_count(50)
    page.click('#history button:has-text("Later")')
    expect(info).to_have_text("steps 50–69 of 70")
    for i in range(70, 75):
        run.log({"loss": 1.0 / (i + 1)}, step=i)
    expect(info).to_have_text("steps 50–74 of 75")
    expect(page.locator("#history tbody tr")).to_have_count(25)
    expect(page.locator("#history tbody tr").last.locator("td").first).to_have_text("74")
    page.locator("#history").scroll_into_view_if_needed()
    shot(page, "live-history-pager")
    run.finish("SUCCEEDED")


def test_tiles_follow_the_points_of_a_live_run(page: Page, server: Runner,
                                               runs_dir: Path) -> None:
    """Best and latest loss, eval loss, examples and tokens follow new points, as the
    charts do (before, they kept the values of when the page opened)."""
    run = _live(runs_dir, "tiles-live")
    for i in range(5):
        run.log({"loss": 2.0 - i * 0.25, "samples": 8, "trained_tokens": 100}, step=i)
    run.log({"val/loss": 1.9}, step=4)
    wait_indexed(server.url, "tiles-live", 4)
    open_run(page, server.url, "tiles-live")
    _expect_tiles(page, best_train_loss="1", tokens="500", examples="40")
    run.log({"loss": 0.5, "samples": 8, "trained_tokens": 100, "val/loss": 0.75}, step=5)
    run.log({"loss": 0.625, "samples": 8, "trained_tokens": 100}, step=6)
    _expect_tiles(page, latest_train_loss="0.625", best_train_loss="0.5", eval_loss="0.75",
                  tokens="700", examples="56", steps="6")
    shot(page, "live-tiles")
    run.finish("SUCCEEDED")


def test_job_details_follow_the_observed_step(page: Page, server: Runner,
                                              runs_dir: Path) -> None:
    """The Job details card's observed step follows the run (before, it changed only with
    the run's phase), and an open Settings card stays open as the card is redrawn."""
    run = _live(runs_dir, "details-live", config={"learning_rate": 0.001})
    for i in range(3):
        run.log({"loss": 1.0}, step=i)
    wait_indexed(server.url, "details-live", 2)
    open_run(page, server.url, "details-live")
    observed = page.locator(_field("job-details", "Observed step"))
    expect(observed).to_have_text("2")
    page.click("#settings summary")
    page.evaluate("window.__cancel = document.querySelector('#action-cancel')")
    for i in range(3, 8):
        run.log({"loss": 1.0 if i < 7 else 0.5}, step=i)
    expect(observed).to_have_text("7")
    expect(page.locator(_tile("latest_train_loss"))).to_have_text("0.5")  # read again
    # the header (its buttons) is not drawn again while only the points change
    assert page.evaluate("window.__cancel === document.querySelector('#action-cancel')")
    # the detail read again from the server agrees, and Settings was not folded away
    expect(page.locator(_field("job-details", "Status"))).to_have_text("Running")
    expect(page.locator("#settings")).to_have_attribute("open", "")
    page.locator("#job-details").scroll_into_view_if_needed()
    shot(page, "live-job-details")
    run.finish("SUCCEEDED")
    expect(page.locator(_field("job-details", "Status"))).to_have_text("Succeeded")
    expect(observed).to_have_text("7")


def test_a_grpo_run_shows_reward_tiles_and_no_train_loss(page: Page, server: Runner,
                                                         runs_dir: Path) -> None:
    """GRPO's training loss is no progress signal (the spec): no best or latest train loss
    tile; the latest and best mean reward, its spread and the validation accuracy instead,
    following the run."""
    run = _live(runs_dir, "grpo-tiles", method="grpo")
    rewards = [0.1, 0.4, 0.7, 0.5]
    for i, r in enumerate(rewards):
        run.log({"loss": -0.01 * i, "reward_mean": r, "reward_std": 0.3 - 0.05 * i}, step=i)
    run.log({"val/accuracy": 0.25}, step=3)
    wait_indexed(server.url, "grpo-tiles", 3)
    open_run(page, server.url, "grpo-tiles")
    expect(page.locator(_tile("best_train_loss"))).to_have_count(0)
    expect(page.locator(_tile("latest_train_loss"))).to_have_count(0)
    _expect_tiles(page, mean_reward="0.5", best_mean_reward="0.7", reward_std="0.15",
                  val_accuracy="0.25")
    run.log({"loss": 0.02, "reward_mean": 0.9, "reward_std": 0.05}, step=4)
    _expect_tiles(page, best_mean_reward="0.9", mean_reward="0.9", reward_std="0.05")
    expect(page.locator('.tile-label:has-text("train loss")')).to_have_count(0)
    shot(page, "live-grpo-tiles")
    run.finish("SUCCEEDED")


def test_a_dpo_run_shows_preference_tiles(page: Page, server: Runner,
                                          runs_dir: Path) -> None:
    """A DPO run's preference accuracy and margin, on the training and validation pairs."""
    run = _live(runs_dir, "dpo-tiles", method="dpo")
    for i in range(4):
        run.log({"loss": 0.7 - 0.1 * i, "preference_accuracy": 0.5 + 0.1 * i,
                 "mean_margin": 0.25 * i}, step=i)
    run.log({"val/preference_accuracy": 0.625, "val/mean_margin": 0.5}, step=3)
    run.finish("SUCCEEDED")
    wait_indexed(server.url, "dpo-tiles", 3)
    open_run(page, server.url, "dpo-tiles")
    _expect_tiles(page, preference_accuracy="0.8", margin="0.75", val_preference_accuracy="0.625",
                  val_margin="0.5", best_train_loss="0.4")
    shot(page, "dpo-tiles")


def test_a_derived_run_names_its_base_model_and_links_its_parent(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """`init_from:runs/<run>` (as the recipes record a model started from an earlier
    run) shows as the parent run's base model and a link to the parent; a checkpoint file
    of the parent, given as an absolute path, finds the same parent."""
    parent = init(name="sft-base", dir=runs_dir, method="sft", base_model="tiny-gpt-4x128",
                  dataset="arith", trainer="runwatch-sft", backend="local")
    parent.log({"loss": 1.0}, step=0)
    parent.finish("SUCCEEDED")
    child = init(name="grpo-child", dir=runs_dir, method="grpo",
                 base_model="init_from:runs/sft-base", dataset="arith",
                 trainer="runwatch-grpo", backend="local")
    child.log({"reward_mean": 0.5}, step=0)
    child.finish("SUCCEEDED")
    pt = runs_dir / "sft-base" / "checkpoints" / "step-0-inference.pt"
    elsewhere = runs_dir.parent / "elsewhere" / "sft-gone"
    for name, ref in (("dpo-grandchild", runs_dir / "grpo-child"), ("dpo-from-file", pt),
                      ("dpo-orphan", elsewhere)):
        run = init(name=name, dir=runs_dir, method="dpo", base_model=f"init_from:{ref}",
                   dataset="prefs")
        run.log({"loss": 0.5}, step=0)
        run.finish("SUCCEEDED")
    for name in ("sft-base", "grpo-child", "dpo-grandchild", "dpo-from-file", "dpo-orphan"):
        wait_indexed(server.url, name, 0)
    # by its URL: the list's rows of the other two name grpo-child too (their model)
    page.goto(f"{server.url}/runs?run=grpo-child")
    page.wait_for_selector("#detail[data-loaded=true]")
    expect(page.locator(_field("job-details", "Model"))).to_have_text(
        "tiny-gpt-4x128 · from run sft-base")
    expect(page.locator("#run-summary")).to_have_text(
        "Training tiny-gpt-4x128 (from run sft-base) with runwatch-grpo on arith via local "
        "(GRPO).")
    # the pipeline's cost: each train stage, first first, and the total
    expect(page.locator('#cost [data-cost="pipeline"]')).to_contain_text(
        re.compile(r"^sft-base \S+ → grpo-child \S+; total \S+ device time, spend "))
    page.locator("#job-details").scroll_into_view_if_needed()
    shot(page, "derived-run-model")
    page.click("#parent-run")
    expect(page.locator("#run-title")).to_have_text("sft-base")
    expect(page.locator("#detail")).to_have_attribute("data-loaded", "true")
    assert page.url.endswith(f"/runs?run={parent.id}")
    expect(page.locator(_field("job-details", "Model"))).to_have_text("tiny-gpt-4x128")

    with http.client(base_url=server.url, timeout=30) as client:
        def model(name: str) -> object:
            return client.get(f"/api/runs/{name}").json()["model"]

        assert model("dpo-from-file") == {
            "base_model": "tiny-gpt-4x128", "init_from": str(pt),
            "parent": {"run_id": parent.id, "name": "sft-base"}}
        # two steps from the base model: the chain's first base model, the nearest parent
        assert model("dpo-grandchild") == {
            "base_model": "tiny-gpt-4x128", "init_from": str(runs_dir / "grpo-child"),
            "parent": {"run_id": child.id, "name": "grpo-child"}}
        # a folder no indexed run has: no parent, and no base model to name
        assert model("dpo-orphan") == {"base_model": None, "init_from": str(elsewhere),
                                       "parent": None}


def test_the_cost_card_shows_memory_and_data_fit_and_follows_the_run(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """Device time, phase timing, peak memory and data fit, as `runwatch runs get` has
    them; the peak memory and the step time follow new points."""
    run = _live(runs_dir, "cost-live")
    run.log({"loss": 1.0, "timing/step_total_s": 1.5, "memory/total_bytes": 1.5 * GIB,
             "data_fit/rows": 120, "data_fit/rows_at_max_length": 3,
             "data_fit/rows_lost_target_end": 1, "data_fit/rows_dropped_empty": 0,
             "padding_fraction": 0.25}, step=0)
    wait_indexed(server.url, "cost-live", 0)
    open_run(page, server.url, "cost-live")
    cost = page.locator("#cost")
    expect(cost.locator('[data-cost="device-time"]')).to_contain_text("(estimate)")
    expect(cost.locator('[data-cost="training"]')).to_be_visible()
    expect(cost.locator('[data-cost="queue-wait"]')).to_be_visible()
    memory = cost.locator('dt:has-text("Peak memory") + dd')
    expect(memory).to_have_text("1.5 GiB")
    run.log({"loss": 0.9, "timing/step_total_s": 2.5, "memory/total_bytes": 2 * GIB}, step=1)
    expect(memory).to_have_text("2 GiB")
    expect(cost.locator('dt:text-is("Last step time") + dd')).to_have_text("2.5 s")
    expect(cost.locator('[data-fit="rows"]')).to_have_text("120")
    expect(cost.locator('[data-fit="rows_lost_target_end"]')).to_have_text("1")
    expect(cost).to_contain_text("Data fit: rows at max_seq_length")
    # the padding share of the batches' tokens, as a percent
    expect(cost.locator('[data-fit="padding_fraction"]')).to_have_text(
        "25.0% of the batches' tokens")
    cost.scroll_into_view_if_needed()
    shot(page, "live-cost-card")
    run.finish("SUCCEEDED")
    expect(cost.locator('[data-cost="device-time"]')).not_to_contain_text("(estimate)")


def test_a_short_runs_tiles_agree_with_its_history_and_cost_card(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """Steps 0-85 are 86 steps: the tile names the last step (85), as the history counts
    86. A run that trained 0.98 s after 0.04 s preparing held its device 1.02 s: both
    durations round to the nearest second, "1s" (the tile floored to "0s" beside "1s")."""
    t0 = 1.7e9
    run = write_run(runs_dir, "short-run", [
        {"step": i, "ts": t0 + 0.04 + i * 0.01, "seq": i, "loss": 1.0 / (i + 1)}
        for i in range(86)], method="sft", base_model="tiny", created_at=t0)
    events = [{"ts": t0, "phase": "PREPARING", "seq": 0},
              {"ts": t0 + 0.04, "phase": "RUNNING", "seq": 1},
              {"ts": t0 + 1.02, "phase": "SUCCEEDED", "seq": 2}]
    (run / fmt.EVENTS).write_text("".join(json.dumps(e) + "\n" for e in events))
    wait_indexed(server.url, "short-run", 85)
    open_run(page, server.url, "short-run")
    expect(page.locator('[data-tile="steps"] .tile-label')).to_have_text("Last step")
    _expect_tiles(page, steps="85", duration="1s")
    expect(page.locator("#history .pager")).to_contain_text("steps 0–49 of 86")
    expect(page.locator('#cost [data-cost="device-time"]')).to_have_text("1s (1 × cpu)")
    expect(page.locator('#cost [data-cost="training"]')).to_have_text("1s")
