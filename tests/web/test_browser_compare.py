"""Comparing runs in a real browser: runs ticked in the list (one by one or a whole group)
overlaid on the same charts, a live run's new points, the settings table with its
differences, the view's state in the URL, the run table (sort, tags, CSV export) and the
list's keys (j, k, x, Enter, /)."""

from __future__ import annotations

import csv
import io
import math
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Page, Request, Route, expect

from runwatch.sdk import Run, init
from runwatch.server.runner import Runner

from .webhelpers import click_as_it_ends, shot, wait_indexed

LRS = (1e-4, 3e-4, 1e-3)


def sweep_arm(runs_dir: Path, name: str, steps: int, lr: float, *, group: str = "lr-sweep",
              tags: tuple[str, ...] = (), finish: bool = True, **config: Any) -> Run:
    """An SFT arm of a learning-rate sweep: loss every step, val loss every 10th step."""
    run = init(name=name, dir=runs_dir, method="sft", base_model="tiny-gpt", dataset="arith",
               trainer="runwatch-sft", backend="local", group=group, tags=tags,
               flush_interval=0.05,
               config={"learning_rate": lr, "batch_size": 8, "optim": {"name": "adamw"},
                       **config})
    assert isinstance(run, Run)
    for i in range(steps):
        m = {"loss": 2.0 * math.exp(-i * lr * 100) + 0.1, "learning_rate": lr,
             "custom/score": i * lr}
        if i % 10 == 9:
            m["val/loss"] = 2.1 * math.exp(-i * lr * 100) + 0.15
            m["custom/rare"] = 1.0
        run.log(m, step=i)
    if finish:
        run.finish("SUCCEEDED")
    return run


def three_arms(runs_dir: Path, server: Runner) -> list[str]:
    """Three finished arms of one group, 30, 40 and 50 steps; their names, oldest first."""
    names = [f"arm-{i}" for i in range(3)]
    for i, (name, lr) in enumerate(zip(names, LRS, strict=True)):
        sweep_arm(runs_dir, name, 30 + 10 * i, lr)
    for i, name in enumerate(names):
        wait_indexed(server.url, name, 29 + 10 * i)
    return names


def run_id(page: Page, name: str) -> str:
    return page.get_attribute(f'.run-row:has-text("{name}")', "data-run") or ""


def query(page: Page) -> dict[str, list[str]]:
    return parse_qs(urlparse(page.url).query)


def test_a_group_overlaid_on_shared_charts_with_its_settings_compared(
        page: Page, server: Runner, runs_dir: Path) -> None:
    names = three_arms(runs_dir, server)
    sweep_arm(runs_dir, "other", 10, 1e-4, group="other-sweep")
    wait_indexed(server.url, "other", 9)
    # the series come with the runs' keys (GET /api/overlay) or after them (/api/series)
    data_requests: list[Request] = []
    page.on("request", lambda r: data_requests.append(r)
            if re.search(r"/api/(series\?|overlay\?|runs/[^/?]+/metrics/keys)", r.url) else None)
    page.goto(f"{server.url}/runs")
    expect(page.locator(".run-row")).to_have_count(4)
    expect(page.locator("#compare-button")).to_be_disabled()
    # one click on a run's group ticks every run of that group, listed or not, and no other
    page.fill("#search", "arm-0")
    expect(page.locator(".run-row")).to_have_count(1)
    page.locator('.run-row:has-text("arm-0") .run-group').click()
    expect(page.locator("#compare-button")).to_have_text("Compare (3)")
    page.fill("#search", "")
    expect(page.locator(".run-row")).to_have_count(4)
    expect(page.locator(".run-row .run-check:checked")).to_have_count(3)
    assert not page.locator('.run-row:has-text("other") .run-check').is_checked()
    ids = [run_id(page, n) for n in names]
    page.click("#compare-button")
    expect(page.locator("#compare-charts")).to_have_attribute("data-drawn", "true")
    assert urlparse(page.url).path == "/compare"
    assert sorted(query(page)["run"]) == sorted(ids)
    # each run has its own lines (30, 40, 50 steps; val every 10th), all from one request:
    # the server cut every run's series at the same bucket edges
    loss = page.locator('[data-chart="loss"]')
    counts = loss.get_attribute("data-counts") or ""
    assert sorted(counts.split(";")) == sorted(
        ["loss=30", "val/loss=3", "loss=40", "val/loss=4", "loss=50", "val/loss=5"])
    # no round of each run's keys before it
    assert len(data_requests) == 1, [r.url for r in data_requests]
    sent = parse_qs(urlparse(data_requests[0].url).query)
    assert sorted(sent["run"]) == sorted(ids)
    steps = {i: 30 + 10 * k for k, i in enumerate(ids)}
    expect(page.locator('[data-chart="lr"]')).to_have_attribute(
        "data-counts", ";".join(f"learning_rate={steps[i]}" for i in shown_runs(page)))
    # the settings: the learning rates differ, the batch size and the optimizer do not
    table = page.locator("#compare-config")
    expect(table.locator('tr[data-key="learning_rate"]')).to_have_class("diff")
    expect(table.locator('tr[data-key="batch_size"]')).not_to_have_class("diff")
    expect(table.locator('tr[data-key="optim.name"]')).not_to_have_class("diff")
    expect(table.locator('tr[data-key="learning_rate"] td')).to_have_text(
        ["learning_rate", *[str(lr) for lr in _in_order(page, ids)]])
    shot(page, "compare-overlay")
    # the smoothing slider shows its value, as the run page's does
    smoothing = page.locator(".card.charts .smoothing")
    expect(smoothing.locator(".smoothing-value")).to_have_text("0.60")
    smoothing.locator("input").fill("0.9")
    expect(smoothing.locator(".smoothing-value")).to_have_text("0.90")
    page.check("#compare-only-diff")
    expect(table.locator('tr[data-key="batch_size"]')).to_be_hidden()
    expect(table.locator('tr[data-key="learning_rate"]')).to_be_visible()
    assert query(page)["only_diff"] == ["1"]
    shot(page, "compare-only-differences")


def test_the_charts_do_not_wait_for_the_run_details(page: Page, server: Runner,
                                                   runs_dir: Path) -> None:
    """A run's detail reads its whole series where no cache holds them (a second or more
    for a long run on a cold server): the charts are drawn without it, the settings after
    (the details are asked for once the charts have their series, so as not to slow them)."""
    names = three_arms(runs_dir, server)
    held: list[Route] = []
    page.route(re.compile(r"/api/runs/[^/?]+$"), lambda route: held.append(route))
    page.goto(f"{server.url}/compare?run={names[0]}&run={names[1]}")
    expect(page.locator("#compare-charts")).to_have_attribute("data-drawn", "true")
    expect(page.locator('[data-chart="loss"]')).to_have_attribute(
        "data-counts", "loss=30;val/loss=3;loss=40;val/loss=4")
    deadline = time.monotonic() + 10
    while len(held) < 2 and time.monotonic() < deadline:
        page.wait_for_timeout(50)  # route handlers run while the page is waited on
    assert len(held) == 2 and page.locator("#compare-config tr").count() == 0
    for route in held:
        route.continue_()
    expect(page.locator('#compare-config tr[data-key="learning_rate"]')).to_have_class("diff")


@pytest.mark.module_server
def test_a_live_run_keeps_drawing_in_the_compare_view(page: Page, server: Runner,
                                                     runs_dir: Path) -> None:
    sweep_arm(runs_dir, "done", 20, 1e-4)
    live = sweep_arm(runs_dir, "going", 20, 3e-4, finish=False)
    wait_indexed(server.url, "done", 19)
    wait_indexed(server.url, "going", 19)
    page.goto(f"{server.url}/compare?run=done&run=going")
    loss = page.locator('[data-chart="loss"]')
    expect(page.locator("#compare-charts")).to_have_attribute("data-drawn", "true")
    expect(loss).to_have_attribute("data-counts", "loss=20;val/loss=2;loss=20;val/loss=2")
    page.evaluate("window.__marker = 'same page'")
    for i in range(20, 30):
        live.log({"loss": 0.5, "learning_rate": 3e-4, **({"val/loss": 0.6} if i == 29 else {})},
                 step=i)
    expect(loss).to_have_attribute("data-counts", "loss=20;val/loss=2;loss=30;val/loss=3",
                                   timeout=20_000)
    live.finish("SUCCEEDED")
    expect(page.locator('.compare-chip[data-run] .status').nth(1)).to_have_text("Succeeded")
    assert page.evaluate("window.__marker") == "same page"


@pytest.mark.module_server
def test_a_click_on_a_chip_whose_run_changes_under_it_opens_the_run(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """A run's chip is patched as the run changes: rebuilt between the press and the
    release, the click reached no chip and the run did not open."""
    sweep_arm(runs_dir, "chip-done", 5, 1e-4)
    live = sweep_arm(runs_dir, "chip-live", 5, 3e-4, finish=False)
    wait_indexed(server.url, "chip-done", 4)
    wait_indexed(server.url, "chip-live", 4)
    page.goto(f"{server.url}/compare?run=chip-done&run=chip-live")
    expect(page.locator("#compare-charts")).to_have_attribute("data-drawn", "true")
    chip = page.locator('.compare-chip:has-text("chip-live")')
    click_as_it_ends(page, live, chip.locator(".chip-name"), chip.locator(".status"))
    expect(page.locator("#run-title")).to_have_text("chip-live")


def test_a_comparison_url_asks_for_its_overlay_before_the_app_loads(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """The first script asks for a /compare URL's overlay before it imports the app's chunk
    (whose fetch and compile then overlap the server's answer), and the view takes that
    answer: one overlay request, the charts drawn from it."""
    names = three_arms(runs_dir, server)
    asked: list[str] = []
    page.on("request", lambda r: asked.append(urlparse(r.url).path)
            if r.resource_type == "script" or "/api/overlay" in r.url else None)
    page.goto(f"{server.url}/compare?run={names[0]}&run={names[1]}&key=custom/score")
    expect(page.locator("#compare-charts")).to_have_attribute("data-drawn", "true")
    expect(page.locator('[data-chart="key:custom/score"]')).to_have_attribute(
        "data-counts", "custom/score=30;custom/score=40")
    scripts = [a for a in asked if a != "/api/overlay"]
    assert asked.count("/api/overlay") == 1 and len(scripts) >= 2
    assert asked.index("/api/overlay") < asked.index(scripts[-1])


def test_the_view_is_kept_in_the_url(page: Page, server: Runner, runs_dir: Path) -> None:
    names = three_arms(runs_dir, server)
    page.goto(f"{server.url}/runs")
    ids = [run_id(page, n) for n in names]
    url = (f"{server.url}/compare?run={ids[0]}&run={ids[1]}&run={ids[2]}&key=custom/score"
           f"&baseline={ids[2]}&subject={ids[1]}&only_diff=1")
    page.goto(url)
    expect(page.locator("#compare-charts")).to_have_attribute("data-drawn", "true")
    assert shown_runs(page) == ids
    expect(page.locator('[data-chart="key:custom/score"]')).to_have_attribute(
        "data-counts", "custom/score=30;custom/score=40;custom/score=50")
    expect(page.locator("#compare-baseline")).to_have_value(ids[2])
    expect(page.locator("#compare-subject")).to_have_value(ids[1])
    expect(page.locator("#compare-only-diff")).to_be_checked()
    expect(page.locator('#compare-config tr[data-key="batch_size"]')).to_be_hidden()
    # what changes in the view changes the URL, and a reload gives the same view back
    page.click("#chart-picker-open")
    page.fill("#chart-picker-search", "custom")
    # keys already on a chart cannot be picked again
    expect(page.locator('.picker-key[data-key="custom/score"]')).to_be_disabled()
    page.click('.picker-key[data-key="custom/rare"]')
    expect(page.locator('[data-chart="key:custom/rare"]')).to_have_attribute(
        "data-counts", "custom/rare=3;custom/rare=4;custom/rare=5")
    page.select_option("#compare-baseline", ids[0])
    page.uncheck("#compare-only-diff")
    page.locator(f'.compare-chip[data-run="{ids[1]}"] .chip-remove').click()
    expect(page.locator(".compare-chip")).to_have_count(2)
    state = query(page)
    assert state["run"] == [ids[0], ids[2]]
    assert state["key"] == ["custom/score", "custom/rare"]
    assert state["baseline"] == [ids[0]] and "only_diff" not in state
    page.reload()
    expect(page.locator("#compare-charts")).to_have_attribute("data-drawn", "true")
    assert shown_runs(page) == [ids[0], ids[2]]
    expect(page.locator('[data-chart="key:custom/rare"]')).to_have_attribute(
        "data-counts", "custom/rare=3;custom/rare=5")
    expect(page.locator("#compare-baseline")).to_have_value(ids[0])
    expect(page.locator('#compare-config tr[data-key="batch_size"]')).to_be_visible()
    # back goes to the three runs
    page.go_back()
    expect(page.locator(".compare-chip")).to_have_count(3)


@pytest.mark.module_server
def test_more_series_than_one_request_holds_come_in_whole_charts(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """12 runs × 36 keys is past the server's 400 series a request: the charts come in two
    requests, each holding whole charts (every run of a chart on the same edges)."""
    keys = [f"k/{i:02d}" for i in range(35)]
    for r in range(12):
        run = init(name=f"wide-{r:02d}", dir=runs_dir, method="sft")
        logged = keys if r else keys[:-1]  # the first run lacks the last key
        for step in range(3):
            run.log({"loss": 1.0 / (step + 1), **{k: float(step) for k in logged}}, step=step)
        run.finish("SUCCEEDED")
    for r in range(12):
        wait_indexed(server.url, f"wide-{r:02d}", 2)
    requests: list[Request] = []
    page.on("request", lambda r: requests.append(r) if "/api/series?" in r.url else None)
    page.goto(f"{server.url}/compare?" + "&".join(f"run=wide-{r:02d}" for r in range(12))
              + "".join(f"&key={k}" for k in keys))
    expect(page.locator("#compare-charts")).to_have_attribute("data-drawn", "true",
                                                              timeout=30_000)
    assert len(requests) == 2
    asked = [parse_qs(urlparse(r.url).query) for r in requests]
    assert all(len(a["run"]) * len(a["key"]) <= 400 for a in asked)
    assert sorted(k for a in asked for k in a["key"]) == sorted(["loss", *keys])
    expect(page.locator(f'[data-chart="key:{keys[0]}"]')).to_have_attribute(
        "data-counts", ";".join([f"{keys[0]}=3"] * 12))
    # a run that did not log a key still has its (empty) line: each run keeps its colour
    expect(page.locator(f'[data-chart="key:{keys[-1]}"]')).to_have_attribute(
        "data-counts", ";".join([f"{keys[-1]}=0"] + [f"{keys[-1]}=3"] * 11))
    expect(page.locator('[data-chart="loss"]')).to_have_attribute(
        "data-counts", ";".join(["loss=3"] * 12))


# what the grid held when it said the charts in the window were drawn (data-view-drawn):
# a MutationObserver's callback runs at the end of the task that set it, before anything the
# page does later (the held-back charts are drawn in later tasks)
AT_VIEW_DRAWN = """
new MutationObserver((changes, observer) => {
  if (!changes.some((c) => c.target.dataset && c.target.dataset.viewDrawn !== undefined)) return;
  observer.disconnect();
  window.__atViewDrawn = [...document.querySelectorAll('[data-chart]')].map((el) => {
    const r = el.getBoundingClientRect();
    return {chart: el.dataset.chart, drawn: el.dataset.points !== undefined,
            inWindow: r.bottom > 0 && r.top < window.innerHeight};
  });
}).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-view-drawn']});
"""


def test_the_charts_in_the_window_are_drawn_first_and_the_rest_after(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """The compare view draws the charts in the window first (data-view-drawn, the
    runwatch:drawn mark) and holds back those below it, drawn in the tasks after or when
    scrolled to (data-drawn, the runwatch:all-drawn mark): each with its runs' lines. What
    the page asks for besides (the run list, the projects, the runs' details for the
    settings table) waits for every chart drawn."""
    keys = [f"extra/{i:02d}" for i in range(10)]
    for name in ("tall-a", "tall-b"):
        run = init(name=name, dir=runs_dir, method="sft")
        for step in range(20):
            run.log({"loss": 1.0 / (step + 1), **{k: float(step) for k in keys}}, step=step)
        run.finish("SUCCEEDED")
        wait_indexed(server.url, name, 19)
    page.add_init_script(AT_VIEW_DRAWN)
    page.goto(f"{server.url}/compare?run=tall-a&run=tall-b" + "".join(f"&key={k}" for k in keys))
    grid = page.locator("#compare-charts")
    expect(grid).to_have_attribute("data-drawn", "true")
    seen = page.evaluate("window.__atViewDrawn")
    assert len(seen) == 11, seen
    in_window = [c["chart"] for c in seen if c["inWindow"]]
    # the window (1000 px) holds the first rows of two charts, not all 11
    assert 0 < len(in_window) < 11, seen
    assert [c["chart"] for c in seen if c["drawn"]] == in_window, seen
    assert grid.get_attribute("data-view-drawn") == str(len(in_window))
    marks = page.evaluate("""() => ['runwatch:drawn', 'runwatch:all-drawn'].map(
        (n) => performance.getEntriesByName(n).map((m) => m.startTime))""")
    assert len(marks[0]) == 1 and len(marks[1]) == 1 and marks[0][0] <= marks[1][0], marks
    expect(page.locator("#compare-config tr").first).to_be_attached()
    expect(page.locator(".run-row")).to_have_count(2)
    # a resource entry is listed once its response has ended: wait for both asks to end
    # (CI saw the run list's entry while the projects' ask was still in flight)
    page.wait_for_function("""() => ['/api/runs', '/api/projects'].every((want) =>
        performance.getEntriesByType('resource').some((r) => new URL(r.name).pathname === want))""")
    later = page.evaluate("""() => performance.getEntriesByType('resource')
        .map((r) => [new URL(r.name).pathname, r.startTime])
        .filter(([path]) => /^[/]api[/](runs|projects)/.test(path))""")
    assert {p for p, _ in later} >= {"/api/runs", "/api/projects"}, later
    assert all(t >= marks[1][0] for _, t in later), (marks, later)
    # every chart held back was drawn after, with both runs' lines
    for k in keys:
        expect(page.locator(f'[data-chart="key:{k}"]')).to_have_attribute(
            "data-counts", f"{k}=20;{k}=20")
    last = page.locator(f'[data-chart="key:{keys[-1]}"]')
    last.scroll_into_view_if_needed()
    expect(last.locator("canvas")).to_have_count(1)
    # a chart removed makes no chart: the count of the charts drawn in the window stays
    page.locator(f'[data-chart-card="key:{keys[-1]}"] .chart-remove').click()
    expect(page.locator("[data-chart]")).to_have_count(10)
    page.wait_for_function("performance.getEntriesByName('runwatch:drawn').length === 2")
    assert grid.get_attribute("data-view-drawn") == str(len(in_window))


def plan_run(runs_dir: Path, name: str, seed: int, extra: float = 0.0, spike_at: int = -1) -> None:
    """A finished SFT run of 30 steps: a falling loss (raised by `extra` from step 20 on)
    and a gradient norm of 1 (100 at `spike_at`)."""
    run = init(name=name, dir=runs_dir, method="sft", base_model="tiny-gpt", dataset="arith",
               config={"seed": seed, "learning_rate": 1e-4, "batch_size": 8})
    for i in range(30):
        run.log({"loss": 2.0 / (i + 1) + (extra if i >= 20 else 0.0),
                 "grad_norm": 100.0 if i == spike_at else 1.0}, step=i)
    run.finish("SUCCEEDED")


@pytest.mark.module_server
def test_the_report_of_a_run_against_a_baseline(page: Page, server: Runner,
                                                runs_dir: Path) -> None:
    plan_run(runs_dir, "base", seed=1)
    plan_run(runs_dir, "tuned", seed=1, extra=0.1, spike_at=15)
    plan_run(runs_dir, "reseeded", seed=2)
    for name in ("base", "tuned", "reseeded"):
        wait_indexed(server.url, name, 29)
    page.goto(f"{server.url}/compare?run=base&run=tuned&run=reseeded&baseline=base"
              "&subject=tuned")
    verdict = page.locator("#compare-verdict")
    expect(verdict).to_have_text(
        "Steps 20–29 are the first full window of 10 whose mean difference passes 0.03: "
        "the run's loss is higher by 0.1 on average.")
    expect(page.locator("#compare-windows tr.reported td").first).to_have_text("20–29")
    expect(page.locator("#compare-windows tbody tr")).to_have_count(3)
    expect(page.locator("#compare-spikes tbody tr td").first).to_have_text("15")
    shot(page, "compare-report")
    # a chart's CSV: a column per run, joined on the step
    with page.expect_download() as info:
        page.click('[data-chart-card="loss"] .chart-csv')
    rows = list(csv.reader(io.StringIO(Path(info.value.path()).read_text())))
    assert rows[0] == ["step", "base · train", "tuned · train", "reseeded · train"]
    assert len(rows) == 31 and rows[21][0] == "20"
    assert math.isclose(float(rows[21][2]) - float(rows[21][1]), 0.1)
    # a run of another plan is refused, with the differences, until compared across plans
    page.select_option("#compare-subject", label="reseeded")
    expect(page.locator("#compare-refused")).to_contain_text("different plans")
    expect(page.locator("#compare-differences tbody tr")).to_have_count(1)
    expect(page.locator("#compare-differences td")).to_have_text(["seed", "2", "1"])
    shot(page, "compare-refused")
    page.check("#compare-across-plans")
    expect(verdict).to_have_text("No full window of 10 steps differs by more than 0.03 on "
                                 "average.")
    expect(page.locator("#compare-differences td")).to_have_text(["seed", "2", "1"])
    state = query(page)
    assert state["across_plans"] == ["1"] and state["baseline"] != state["subject"]
    page.reload()
    expect(verdict).to_contain_text("No full window")
    expect(page.locator("#compare-subject option:checked")).to_have_text("reseeded")
    page.emulate_media(color_scheme="dark")
    shot(page, "compare-dark")


def test_the_run_table_sorts_shows_tags_and_exports_csv(page: Page, server: Runner,
                                                        runs_dir: Path) -> None:
    sweep_arm(runs_dir, "b-run", 30, 1e-3, tags=("baseline", "lr"))
    sweep_arm(runs_dir, "a-run", 20, 1e-4)
    sweep_arm(runs_dir, "c-run", 10, 3e-4, group="other")
    for name, last in (("b-run", 29), ("a-run", 19), ("c-run", 9)):
        wait_indexed(server.url, name, last)
    page.goto(f"{server.url}/runs")
    page.click("#table-link")
    body = page.locator("#run-table-body")
    expect(body).to_have_attribute("data-latest", "true")
    names = body.locator('td[data-col="name"]')
    expect(names).to_have_text(["c-run", "a-run", "b-run"])  # newest first
    expect(page.locator('tr:has-text("b-run") td[data-col="tags"] .tag')).to_have_text(
        ["baseline", "lr"])
    page.click('button[data-sort="name"]')
    expect(names).to_have_text(["a-run", "b-run", "c-run"])
    assert query(page)["sort"] == ["name"] and "desc" not in query(page)
    page.click('button[data-sort="name"]')
    expect(names).to_have_text(["c-run", "b-run", "a-run"])
    # latest loss: each arm's last loss, lowest first once sorted up
    page.click('button[data-sort="loss"]')
    page.click('button[data-sort="loss"]')
    losses = {n: 2.0 * math.exp(-(s - 1) * lr * 100) + 0.1
              for n, s, lr in (("a-run", 20, 1e-4), ("b-run", 30, 1e-3), ("c-run", 10, 3e-4))}
    lowest_first = sorted(losses, key=losses.__getitem__)
    expect(names).to_have_text(lowest_first)
    expect(page.locator('th[aria-sort="ascending"]')).to_have_text("Latest loss ▲")
    page.reload()
    expect(names).to_have_text(lowest_first)
    shot(page, "run-table")
    # the table's search is the list's: it stays in the URL and in the list's box
    page.fill("#table-search", "b-run")
    expect(names).to_have_text(["b-run"])
    page.click(".brand")
    expect(page.locator("#search")).to_have_value("b-run")
    expect(page.locator(".run-row")).to_have_count(1)
    page.go_back()
    expect(page.locator("#table-search")).to_have_value("b-run")
    expect(body).to_have_attribute("data-latest", "true")
    # the search cleared lists a-run and c-run again, whose latest values this page has
    # not read yet: an export clicked before they arrive waits for them (it wrote empty
    # cells, sorted last)
    held: list[Route] = []
    keys = re.compile(r"/metrics/keys(\?|$)")
    page.route(keys, lambda route: held.append(route))
    page.fill("#table-search", "")
    expect(names).to_have_count(3)
    with page.expect_download() as info:
        page.click("#table-csv")
        deadline = time.monotonic() + 10
        while len(held) < 3 and time.monotonic() < deadline:
            page.wait_for_timeout(50)  # route handlers run while the page is waited on
        for route in held:
            route.continue_()
        page.unroute(keys)
    download = info.value
    rows = list(csv.reader(io.StringIO(Path(download.path()).read_text())))
    assert rows[0] == ["run_id", "name", "status", "model", "method", "group", "tags",
                       "duration", "created", "loss", "reward"]
    assert [r[1] for r in rows[1:]] == sorted(losses, key=losses.__getitem__)
    by_name = {r[1]: r for r in rows[1:]}
    assert by_name["b-run"][6] == "baseline lr" and by_name["c-run"][5] == "other"
    for name, loss in losses.items():  # every run's latest loss, none left empty
        assert by_name[name][9] and math.isclose(float(by_name[name][9]), loss, rel_tol=1e-9)
    # ticked rows (by the keys too: j to the first row, x) open the compare view
    page.keyboard.press("j")
    expect(page.locator("#run-table-body tr.cursor")).to_contain_text("b-run")
    page.keyboard.press("x")
    expect(page.locator("#table-compare")).to_have_text("Compare (1)")
    page.check("#run-table-all")
    expect(page.locator("#table-compare")).to_have_text("Compare (3)")
    page.uncheck('tr:has-text("a-run") .run-check')
    expect(page.locator("#run-table-all")).not_to_be_checked()
    page.click("#table-compare")
    expect(page.locator(".compare-chip")).to_have_count(2)
    expect(page.locator(".compare-chip .chip-name")).to_have_text(["b-run", "c-run"])


def test_keys_move_through_the_list_tick_and_open(page: Page, server: Runner,
                                                  runs_dir: Path) -> None:
    names = three_arms(runs_dir, server)
    live = sweep_arm(runs_dir, "going", 5, 1e-4, finish=False)
    wait_indexed(server.url, "going", 4)
    page.goto(f"{server.url}/runs")
    rows = page.locator(".run-row")
    expect(rows).to_have_count(4)
    expect(rows.first).to_contain_text("going")
    cursor = page.locator(".run-row.cursor")
    page.keyboard.press("j")
    expect(cursor).to_contain_text("going")
    # the row under the cursor is drawn again when its run changes: the cursor stays on it
    live.finish("SUCCEEDED")
    expect(rows.first.locator(".status")).to_have_text("Succeeded")
    expect(cursor).to_contain_text("going")
    expect(cursor).to_be_focused()
    newest_first = names[::-1]
    for _ in range(4):
        page.keyboard.press("j")  # stops at the last row
    expect(cursor).to_contain_text(newest_first[2])
    page.keyboard.press("k")
    expect(cursor).to_contain_text(newest_first[1])
    page.keyboard.press("x")
    expect(page.locator("#compare-button")).to_have_text("Compare (1)")
    page.keyboard.press("Enter")
    expect(page.locator("#detail[data-loaded=true]")).to_be_visible()
    expect(page.locator(".run-row.selected")).to_contain_text(newest_first[1])
    assert query(page)["run"] == [run_id(page, newest_first[1])]
    # / goes to the search box; keys typed there are text, not moves
    page.keyboard.press("/")
    expect(page.locator("#search")).to_be_focused()
    page.keyboard.type("arm-0")
    expect(page.locator("#search")).to_have_value("arm-0")
    expect(rows).to_have_count(1)
    page.keyboard.press("Escape")
    expect(page.locator("#search")).not_to_be_focused()
    page.keyboard.press("j")
    expect(cursor).to_contain_text("arm-0")
    shot(page, "keyboard")


def shown_runs(page: Page) -> list[str]:
    """The run ids in the order the compare view shows the runs."""
    return page.locator("#compare-runs .compare-chip").evaluate_all(
        "els => els.map(e => e.dataset.run)")


def _in_order(page: Page, ids: list[str]) -> list[float]:
    """The learning rates in the order the compare view shows the runs."""
    return [LRS[ids.index(i)] for i in shown_runs(page)]
