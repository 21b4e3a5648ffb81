"""Comparisons at their edges in a real browser: one run (alone, or beside a run that does
not exist), runs the loss report cannot compare (GRPO, a run that logged no loss), fifty
runs (more series than one overlay request holds, each run a line style of its own, the
legend's "+N more" clear of the axis), and a settings row of numbers. Each is read without
a request the server refuses: the `page` fixture fails a test on any console error."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, Request, Response, expect

from runwatch.analysis.compare import REINFORCEMENT
from runwatch.sdk import Run, init
from runwatch.server.runner import Runner

from .webhelpers import REPO, shot, wait_indexed

pytestmark = pytest.mark.module_server

FIFTY = [f"many-{i:02d}" for i in range(50)]


@pytest.fixture(scope="module")
def fifty(module_server: Runner, module_runs_dir: Path) -> list[str]:
    """Fifty finished SFT runs of five steps, each logging nine keys the standard charts
    show: 450 series, past the 400 one request holds."""
    for i, name in enumerate(FIFTY):
        run = init(name=name, dir=module_runs_dir, method="sft", config={"seed": i})
        for step in range(5):
            run.log({"loss": 2.0 / (step + 1) + i / 100, "val/loss": 2.1 / (step + 1),
                     "learning_rate": 1e-4 * (1 + i / 10), "grad_norm": 1.0 + step,
                     "accuracy": step / 5, "val/accuracy": step / 6,
                     "grad_clip_factor": 1.0, "update_ratio": 1e-3,
                     "timing/step_total_s": 1.5}, step=step)
        run.finish("SUCCEEDED")
    for name in FIFTY:
        wait_indexed(module_server.url, name, 4)
    return FIFTY


def refused(page: Page) -> list[str]:
    """Collects every answer of the API with a 4xx or 5xx status, as "status url"."""
    seen: list[str] = []

    def on_response(r: Response) -> None:
        if "/api/" in r.url and r.status >= 400:
            seen.append(f"{r.status} {r.url}")

    page.on("response", on_response)
    return seen


def compare_requests(page: Page) -> list[str]:
    asked: list[str] = []

    def on_request(r: Request) -> None:
        if "/api/compare?" in r.url:
            asked.append(r.url)

    page.on("request", on_request)
    return asked


def compare_url(server: Runner, runs: list[str]) -> str:
    return f"{server.url}/compare?" + "&".join(f"run={r}" for r in runs)


def test_fifty_runs_are_read_without_a_request_the_server_refuses(
        page: Page, server: Runner, fifty: list[str]) -> None:
    """50 runs × 9 keys is more series than GET /api/overlay answers (400 past 400): the
    page counts them first and reads the runs' keys, then the charts' series in groups of
    whole charts, and never asks for what the server would refuse."""
    bad = refused(page)
    page.goto(compare_url(server, fifty))
    expect(page.locator("#compare-charts")).to_have_attribute("data-drawn", "true",
                                                              timeout=30_000)
    expect(page.locator('[data-chart="loss"]')).to_have_attribute(
        "data-counts", ";".join(["loss=5;val/loss=5"] * 50))
    expect(page.locator('[data-chart="lr"]')).to_have_attribute(
        "data-counts", ";".join(["learning_rate=5"] * 50))
    expect(page.locator("h2")).to_have_text("Compare 50 runs")
    assert bad == []


def rgb(colour: str) -> tuple[int, ...]:
    if colour.startswith("#"):
        return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return tuple(int(float(v)) for v in re.findall(r"[\d.]+", colour)[:3])


def box(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(","))


def test_fifty_runs_each_have_a_style_and_the_legend_note_overlaps_nothing(
        page: Page, server: Runner, fifty: list[str]) -> None:
    """Past the palette's 8 colours a run's lines are a lighter or darker shade of one,
    past 24 drawn in another dash: no two runs look alike. The legend shows three rows and
    says "+N more" at the end of its last row, above the plot, where the top label of a log
    axis (the learning rate's) is drawn."""
    page.goto(compare_url(server, fifty))
    expect(page.locator("#compare-charts")).to_have_attribute("data-drawn", "true",
                                                              timeout=30_000)
    lr = page.locator('[data-chart="lr"]')
    expect(lr).to_have_attribute("data-log", "true")
    colours = [c.rsplit("=", 1)[1] for c in (lr.get_attribute("data-colors") or "").split("|")]
    dashes = (lr.get_attribute("data-dashes") or "").split("|")
    assert len(colours) == len(dashes) == 50
    styles = list(zip(colours, dashes, strict=True))
    assert len(set(styles)) == 50, styles
    # two runs drawn in the same dash are told apart by colour (the palette's closest pair,
    # orange and amber, is 36 apart in RGB; a shade darker, 25)
    for (c1, d1), (c2, d2) in itertools.combinations(styles, 2):
        if d1 == d2:
            assert math.dist(rgb(c1), rgb(c2)) > 20, (c1, c2, d1)
    # the note: inside the canvas, clear of the legend's entries and above the plot by
    # more than half the axis labels' height (the top label is centred on the plot's edge)
    note = box(lr.get_attribute("data-legend-more") or "0,0,0,0")
    entries = [box(b) for b in (lr.get_attribute("data-legend-boxes") or "").split("|")]
    canvas = lr.locator("canvas").bounding_box()
    plot = lr.locator(".u-over").bounding_box()
    assert canvas is not None and plot is not None
    plot_top = plot["y"] - canvas["y"]
    assert 0 <= note[0] < note[2] <= canvas["width"] and 0 <= note[1] < note[3], note
    assert note[3] <= plot_top - 6, (note, plot_top)
    for e in entries:
        assert note[2] <= e[0] or e[2] <= note[0] or note[3] <= e[1] or e[3] <= note[1], (note, e)
    shot(page, "compare-fifty")


def test_the_legend_names_what_it_cannot_show(page: Page, server: Runner, runs_dir: Path,
                                               fifty: list[str]) -> None:
    """A legend entry's name longer than the chart is cut to it with an ellipsis, and the
    mouse over an entry shows its whole name; over "+N more", the names of the lines it
    stands for (the canvas shows neither)."""
    long = ("a-run-whose-name-is-longer-than-any-chart-is-wide-" * 3)[:124] + "-end"
    sft(runs_dir, long)
    sft(runs_dir, "short-one")
    wait_indexed(server.url, long, 9)
    wait_indexed(server.url, "short-one", 9)
    page.goto(compare_url(server, [long, "short-one"]))
    expect(page.locator("#compare-charts")).to_have_attribute("data-drawn", "true")
    chart = page.locator('[data-chart="loss"]')
    canvas = chart.locator("canvas").bounding_box()
    assert canvas is not None
    entries = [box(b) for b in (chart.get_attribute("data-legend-boxes") or "").split("|")]
    assert len(entries) == 2
    for e in entries:  # each entry stays inside the canvas
        assert 0 <= e[0] < e[2] <= canvas["width"], (e, canvas)
    root = chart.locator(".uplot")
    for e, name in zip(entries, [long, "short-one"], strict=True):
        page.mouse.move(canvas["x"] + (e[0] + e[2]) / 2, canvas["y"] + (e[1] + e[3]) / 2)
        expect(root).to_have_attribute("title", re.compile(rf"^{re.escape(name)}\b"))

    page.goto(compare_url(server, fifty))
    expect(page.locator("#compare-charts")).to_have_attribute("data-drawn", "true",
                                                              timeout=30_000)
    lr = page.locator('[data-chart="lr"]')
    shown = len((lr.get_attribute("data-legend-boxes") or "").split("|"))
    note = box(lr.get_attribute("data-legend-more") or "0,0,0,0")
    canvas = lr.locator("canvas").bounding_box()
    assert canvas is not None and 0 < shown < 50
    page.mouse.move(canvas["x"] + (note[0] + note[2]) / 2, canvas["y"] + (note[1] + note[3]) / 2)
    title = lr.locator(".uplot")
    last = re.compile(r"^many-\d\d .*many-49 · learning rate$", re.S)
    expect(title).to_have_attribute("title", last)
    names = (title.get_attribute("title") or "").split("\n")
    assert len(names) == 50 - shown and names[0].startswith(f"{FIFTY[shown]} "), names[:2]


def sft(runs_dir: Path, name: str, *, loss: bool = True, **config: float) -> None:
    run = init(name=name, dir=runs_dir, method="sft", base_model="tiny", dataset="arith",
               config={"seed": 1, **config})
    for i in range(10):
        run.log({"loss": 1.0 / (i + 1)} if loss else {"accuracy": i / 10}, step=i)
    run.finish("SUCCEEDED")


def reinforced(runs_dir: Path, name: str, method: str) -> None:
    """A finished run of `method` that logs a loss beside its reward (GRPO's is no progress
    signal) or, for DPO, a loss and a margin."""
    run = init(name=name, dir=runs_dir, method=method, base_model="tiny", dataset="arith")
    assert isinstance(run, Run)
    for i in range(10):
        run.log({"loss": 0.5 / (i + 1), "reward_mean": i / 10, "mean_margin": i / 5}, step=i)
    run.finish("SUCCEEDED")


@pytest.mark.parametrize("also", [[], ["deadbeef"]], ids=["alone", "beside-a-missing-run"])
def test_one_run_says_that_comparing_needs_two(page: Page, server: Runner, runs_dir: Path,
                                               also: list[str]) -> None:
    name = f"lonely-{len(also)}"
    sft(runs_dir, name)
    wait_indexed(server.url, name, 9)
    asked = compare_requests(page)
    page.goto(compare_url(server, [name, *also]))
    expect(page.locator("#compare-charts")).to_have_attribute("data-drawn", "true")
    expect(page.locator("h2")).to_have_text("Compare 1 run")
    expect(page.locator("#compare-needs-two")).to_have_text(
        "Comparing needs two or more runs: tick another run in the list (or press a run's "
        "group), then press Compare.")
    if also:
        expect(page.locator(".notice.error")).to_contain_text("Not compared: deadbeef (")
    # nothing to report on: no baseline to pick
    expect(page.locator("#compare-report")).to_have_count(0)
    expect(page.locator(".compare-chip")).to_have_count(1)
    assert asked == []


@pytest.mark.parametrize("methods", [("grpo", "grpo"), ("grpo", "dpo")],
                         ids=["grpo-grpo", "grpo-dpo"])
def test_runs_the_report_cannot_compare_are_not_asked_for(
        page: Page, server: Runner, runs_dir: Path, methods: tuple[str, str]) -> None:
    """GET /api/compare refuses a reinforcement run (400: it records a reward, not a
    training loss): the page does not ask, and its report card says why."""
    names = [f"{m}-{i}-{'-'.join(methods)}" for i, m in enumerate(methods)]
    for name, method in zip(names, methods, strict=True):
        reinforced(runs_dir, name, method)
        wait_indexed(server.url, name, 9)
    asked = compare_requests(page)
    page.goto(compare_url(server, names))
    why = page.locator("#compare-not-comparable")
    expect(why).to_contain_text(f"{names[0]} is a reinforcement run (grpo): it records a "
                                "reward at each step, not a training loss.")
    expect(why).to_contain_text("The report compares the training loss of two supervised "
                                "runs (SFT, DPO)")
    expect(page.locator("#compare-report-body")).not_to_have_attribute("data-status",
                                                                       re.compile("."))
    assert asked == []
    shot(page, f"compare-not-comparable-{'-'.join(methods)}")


def test_the_page_knows_the_methods_the_api_refuses() -> None:
    """comparereport.ts keeps its own list of the methods GET /api/compare refuses (the page
    does not ask for those): it must be the analysis module's."""
    source = (REPO / "web" / "src" / "comparereport.ts").read_text()
    listed = re.search(r"export const REINFORCEMENT = \[([^\]]*)\]", source)
    assert listed is not None
    assert set(re.findall(r'"([^"]+)"', listed.group(1))) == REINFORCEMENT


def test_the_report_picks_runs_it_can_compare_and_says_why_not_for_others(
        page: Page, server: Runner, runs_dir: Path) -> None:
    """Among an SFT run, a GRPO run, an SFT run and one that logged no loss, the report
    starts from the two it can compare; picking another says why instead of asking."""
    sft(runs_dir, "pick-a")
    reinforced(runs_dir, "pick-rl", "grpo")
    sft(runs_dir, "pick-b")
    sft(runs_dir, "pick-noloss", loss=False)
    for name in ("pick-a", "pick-rl", "pick-b", "pick-noloss"):
        wait_indexed(server.url, name, 9)
    asked = compare_requests(page)
    page.goto(compare_url(server, ["pick-a", "pick-rl", "pick-b", "pick-noloss"]))
    body = page.locator("#compare-report-body")
    expect(body).to_have_attribute("data-status", "200")
    expect(page.locator("#compare-baseline option:checked")).to_have_text("pick-a")
    expect(page.locator("#compare-subject option:checked")).to_have_text("pick-b")
    assert len(asked) == 1
    page.select_option("#compare-subject", label="pick-rl")
    expect(page.locator("#compare-not-comparable")).to_contain_text(
        "pick-rl is a reinforcement run (grpo)")
    page.select_option("#compare-subject", label="pick-noloss")
    expect(page.locator("#compare-not-comparable")).to_contain_text(
        "pick-noloss has logged no training loss.")
    expect(page.locator("#compare-not-comparable")).to_contain_text(
        "Pick two runs that log a training loss")
    assert len(asked) == 1
    page.select_option("#compare-subject", label="pick-b")
    expect(body).to_have_attribute("data-status", "200")
    assert len(asked) == 2


def test_a_settings_row_writes_its_numbers_in_one_style(page: Page, server: Runner,
                                                        runs_dir: Path) -> None:
    """JavaScript writes 1e-6 as 0.000001 and 5e-7 as 5e-7: a row with both writes each in
    exponent form; a row whose numbers all read plainly stays plain."""
    sft(runs_dir, "style-a", lr=1e-6, warmup=0.0001, clip=1.0)
    sft(runs_dir, "style-b", lr=5e-7, warmup=0.0003, clip=0.5)
    for name in ("style-a", "style-b"):
        wait_indexed(server.url, name, 9)
    page.goto(compare_url(server, ["style-a", "style-b"]))
    table = page.locator("#compare-config")
    expect(table.locator('tr[data-key="lr"] td')).to_have_text(["lr", "1e-6", "5e-7"])
    expect(table.locator('tr[data-key="warmup"] td')).to_have_text(["warmup", "0.0001", "0.0003"])
    expect(table.locator('tr[data-key="clip"] td')).to_have_text(["clip", "1", "0.5"])
    expect(table.locator('tr[data-key="seed"] td')).to_have_text(["seed", "1", "1"])
