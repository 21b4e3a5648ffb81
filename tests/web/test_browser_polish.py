"""Everyday polish in a real browser on a real server: dark mode that follows the system
setting, the New job page laid out across the window, the Rollouts pager past the first
page, the empty state of the live logs, and errors said in plain words."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from runwatch.sdk import Run, init
from runwatch.server.runner import Runner
from tests.support import http

from .webhelpers import (
    background,
    grpo_run,
    light_in_dark,
    sft_run,
    shot,
    themed_page,
    wait_indexed,
)


def luminance(css: str) -> float:
    """Relative luminance (WCAG) of an `rgb(…)`/`rgba(…)` colour."""
    nums = [float(v) for v in css[css.index("(") + 1:css.index(")")].split(",")[:3]]
    ch = [s / 12.92 if s <= 0.03928 else ((s + 0.055) / 1.055) ** 2.4
          for s in (n / 255 for n in nums)]
    return 0.2126 * ch[0] + 0.7152 * ch[1] + 0.0722 * ch[2]


def many_rollouts(runs_dir: Path, name: str = "grpo-many", count: int = 250) -> None:
    """A GRPO run that kept `count` rollouts at step 3 (more than one page)."""
    run = init(name=name, dir=runs_dir, method="grpo", base_model="tiny-gpt", dataset="arith",
               trainer="runwatch-grpo", backend="local")
    assert isinstance(run, Run)
    for i in range(4):
        run.log({"loss": 0.1, "reward_mean": i / 4}, step=i)
    run.log_samples(3, [{"prompt": f"What is {i}+1?", "completion": str(i + 1),
                         "reward": i / count} for i in range(count)], split="train")
    run.finish("SUCCEEDED")


KEY_PARTS = ["body", ".topbar", ".sidebar", ".run-row.selected", ".search-box input", ".tile",
             ".card", "#run-status"]


def test_dark_mode_follows_the_system_setting(browser: Browser, server: Runner,
                                              runs_dir: Path) -> None:
    sft_run(runs_dir)
    sft_run(runs_dir, "sft-other", steps=20)
    grpo_run(runs_dir)
    wait_indexed(server.url, "sft-small", 39)
    wait_indexed(server.url, "sft-other", 19)
    wait_indexed(server.url, "grpo-arith", 24, samples=2)
    seen: dict[str, dict[str, float]] = {}
    for scheme in ("light", "dark"):
        with themed_page(browser, scheme) as page:
            page.goto(f"{server.url}/runs")
            page.click('.run-row:has-text("sft-small")')
            page.wait_for_selector("#detail[data-loaded=true]")
            expect(page.locator("#history tbody tr").first).to_be_visible()
            seen[scheme] = {sel: luminance(background(page, sel)) for sel in KEY_PARTS
                            if page.locator(sel).count()}
            seen[scheme]["text"] = luminance(page.eval_on_selector(
                "#run-title", "el => getComputedStyle(el).color"))
            # the charts read their colours from the same variables (theme.ts)
            theme = page.evaluate("""() => ({grid: getComputedStyle(document.documentElement)
                .getPropertyValue('--chart-grid').trim(), axis: getComputedStyle(
                document.documentElement).getPropertyValue('--chart-axis').trim()})""")
            assert theme["grid"] and theme["axis"], theme
            shot(page, f"polish-run-{scheme}")
            if scheme == "light":
                # the system switching to dark while the page is open switches it at once
                page.emulate_media(color_scheme="dark")
                assert luminance(background(page, ".card")) < 0.1
                assert light_in_dark(page) == []
            if scheme == "dark":
                assert light_in_dark(page) == []
                page.click('.run-row:has-text("grpo-arith")')
                page.wait_for_selector("#detail[data-loaded=true]")
                page.click('.tab:has-text("Rollouts")')
                expect(page.locator("#rollouts .rollout").first).to_be_visible()
                assert light_in_dark(page) == []
                shot(page, "polish-rollouts-dark")
                page.click("#new-job-button")
                expect(page.locator("#new-job[data-loaded=true]")).to_be_visible()
                assert luminance(background(page, '[data-setting="max_steps"]')) < 0.1
                assert light_in_dark(page) == []
                shot(page, "polish-new-job-dark")
                page.click("#resources-link")
                expect(page.locator("#resources")).to_be_visible()
                assert light_in_dark(page) == []
                shot(page, "polish-resources-dark")
                page.click("#table-link")
                expect(page.locator("#run-table-body tr")).to_have_count(3)
                assert light_in_dark(page) == []
                shot(page, "polish-table-dark")
                page.goto(f"{server.url}/compare?run=sft-small&run=sft-other")
                expect(page.locator("#compare-charts[data-drawn=true]")).to_be_visible()
                expect(page.locator("#compare-config")).to_be_visible()
                assert light_in_dark(page) == []
                shot(page, "polish-compare-dark")
    light, dark = seen["light"], seen["dark"]
    assert set(light) == set(dark) and len(light) >= len(KEY_PARTS) - 1, (light, dark)
    for part in KEY_PARTS:
        if part in dark and part not in (".topbar",):
            assert light[part] > 0.7 and dark[part] < 0.1, (part, light[part], dark[part])
    assert dark[".topbar"] < 0.05
    assert light["text"] < 0.1 and dark["text"] > 0.6


@pytest.mark.module_server
def test_new_job_uses_the_window_width(page: Page, server: Runner) -> None:
    page.goto(f"{server.url}/new")
    expect(page.locator("#new-job[data-loaded=true]")).to_be_visible()
    main = page.locator(".job-main").bounding_box()
    side = page.locator(".job-side").bounding_box()
    assert main is not None and side is not None
    # the job's fields beside the recipe, not under it; the two fill the window
    assert side["x"] >= main["x"] + main["width"] and abs(side["y"] - main["y"]) < 60
    assert main["width"] + side["width"] > 1400 * 0.85
    fields = page.locator("#recipe-settings .field")
    lefts = {round(b["x"]) for b in (fields.nth(i).bounding_box() for i in range(6)) if b}
    assert len(lefts) >= 3, lefts  # the settings in columns
    shot(page, "polish-new-job")


@pytest.mark.module_server
def test_rollouts_page_past_the_first_hundreds(page: Page, server: Runner,
                                               runs_dir: Path) -> None:
    many_rollouts(runs_dir, count=250)
    wait_indexed(server.url, "grpo-many", 3, samples=1)
    # the API pages: offset skips that many in the order asked for
    got = http.get(f"{server.url}/api/runs/grpo-many/samples",
                   params={"step": 3, "limit": 3, "offset": 247}).json()
    assert [s["index"] for s in got["samples"]] == [247, 248, 249] and got["total"] == 250

    page.goto(f"{server.url}/runs")
    page.click('.run-row:has-text("grpo-many")')
    page.wait_for_selector("#detail[data-loaded=true]")
    page.click('.tab:has-text("Rollouts")')
    expect(page.locator("#rollout-info")).to_have_text("rollouts 1–100 of 250 at step 3 (train)")
    expect(page.locator("#rollout-prev")).to_be_disabled()
    expect(page.locator("#rollout-n")).to_be_hidden()  # N is for best/worst N only
    page.click("#rollout-next")
    expect(page.locator("#rollout-info")).to_contain_text("rollouts 101–200 of 250")
    expect(page.locator("#rollouts .rollout").first).to_have_attribute("data-index", "100")
    page.click("#rollout-next")
    expect(page.locator("#rollout-range")).to_have_text("201–250 of 250")
    expect(page.locator("#rollouts .rollout")).to_have_count(50)
    expect(page.locator("#rollouts .rollout").last).to_have_attribute("data-index", "249")
    expect(page.locator("#rollouts .rollout").last).to_contain_text("What is 249+1?")
    expect(page.locator("#rollout-next")).to_be_disabled()
    shot(page, "polish-rollouts-last-page")
    page.click("#rollout-prev")
    expect(page.locator("#rollouts .rollout").first).to_have_attribute("data-index", "100")
    # best N shows its N at once: no pager
    page.select_option("#rollout-mode", "best")
    expect(page.locator("#rollouts .rollout").first).to_contain_text("What is 249+1?")
    expect(page.locator(".rollout-pager")).to_be_hidden()


@pytest.mark.module_server
def test_empty_logs_and_rollouts_say_what_writes_them(page: Page, server: Runner,
                                                      runs_dir: Path) -> None:
    run = init(name="quiet", dir=runs_dir, method="sft", base_model="tiny", dataset="arith",
               trainer="t", backend="local", flush_interval=0.05)
    assert isinstance(run, Run)
    run.log({"loss": 1.0}, step=0)
    wait_indexed(server.url, "quiet", 0)
    page.goto(f"{server.url}/runs")
    page.click('.run-row:has-text("quiet")')
    page.wait_for_selector("#detail[data-loaded=true]")
    empty = page.locator("#logs-empty")
    expect(empty).to_be_visible()
    expect(empty).to_contain_text("No log lines yet.")
    expect(empty).to_contain_text('run.log_text("message")')
    expect(empty).to_contain_text("logs.jsonl")
    page.locator("#live-logs").scroll_into_view_if_needed()
    shot(page, "polish-logs-empty")
    # a line arriving live replaces the empty state
    run.log_text("tokenizing the dataset", level="warning")
    expect(page.locator("#logs .log-row")).to_have_count(1)
    expect(empty).to_be_hidden()
    # a level filter that hides every line says so
    page.select_option('#live-logs select[aria-label="Minimum level"]', "ERROR")
    expect(empty).to_contain_text("No log lines at ERROR or above yet.")
    # so does the Rollouts tab of a run that kept none
    page.click('.tab:has-text("Rollouts")')
    expect(page.locator("#rollout-info")).to_contain_text("run.log_samples(step, samples)")
    run.finish("SUCCEEDED")


API_WORDING = ["bad request", "Input should", "GET /api", "/api/", "422", "400", "valid int"]


def plain(text: str) -> None:
    """`text` is a sentence for a person: no status code, schema or route wording."""
    for word in API_WORDING:
        assert word not in text, (word, text)


@pytest.mark.module_server
@pytest.mark.console_error(r"status of (400|404|422)")
def test_errors_are_said_in_plain_words(page: Page, server: Runner) -> None:
    page.goto(f"{server.url}/new")
    expect(page.locator("#new-job[data-loaded=true]")).to_be_visible()
    # the API's schema check of a field: said as a rule, next to the field
    page.fill("#job-devices", "100000")
    page.click("#submit-job")
    devices = page.locator('[data-error-for="devices"]')
    expect(devices).to_have_text("Devices must be at most 1024.")
    plain(devices.inner_text())
    expect(page.locator("#form-error")).to_be_empty()
    page.fill("#job-devices", "1")
    page.fill("#job-name", "x" * 200)
    page.click("#submit-job")
    expect(page.locator('[data-error-for="name"]')).to_have_text(
        "Name must be at most 128 characters long.")
    page.fill("#job-name", "")
    # a recipe setting the recipe cannot read
    page.fill('[data-setting="max_steps"]', "many")
    page.click("#submit-job")
    setting = page.locator('[data-error-for="settings.max_steps"]')
    expect(setting).to_have_text("The setting max_steps must be a whole number, not 'many'.")
    shot(page, "polish-error-words")
    # a run that does not exist: the server's words, without the route it points programs at
    page.goto(f"{server.url}/runs?run=no-such-run")
    expect(page.locator("#load-error")).to_have_text("No run has the id or name 'no-such-run'.")
    plain(page.locator("#load-error").inner_text())
