"""Helpers of the browser tests: runs with known metrics, screenshots, chart readings."""

from __future__ import annotations

import math
import re
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, ConsoleMessage, FloatRect, Locator, Page, expect
from sqlalchemy import Engine

from runwatch.rundir import format as fmt
from runwatch.sdk import Run, init
from runwatch.store import jobs as store_jobs
from tests.support import http, wait_for
from tests.support.disk import fill

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "test-output"
# the light theme's line colours (style.css --blue, --orange)
TRAIN_RGB = (0x25, 0x63, 0xEB)
VAL_RGB = (0xEA, 0x58, 0x0C)
XSS_COMPLETION = "<script>window.__xss = 1</script><img src=x onerror=\"window.__xss = 2\">"


def shot(page: Page, name: str) -> None:
    """Save a full-page screenshot of the current view as test output."""
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def sft_run(runs_dir: Path, name: str = "sft-small", steps: int = 40) -> None:
    """A finished SFT run: loss every step, val loss every 10th, learning rate, accuracy."""
    run = init(name=name, dir=runs_dir, method="sft", base_model="Qwen/Qwen2.5-0.5B",
               dataset="gsm8k", trainer="runwatch-sft", backend="local",
               config={"learning_rate": 1e-4, "gradient_accumulation_steps": 2})
    for i in range(steps):
        m = {"loss": 2.0 * math.exp(-i / 20) + 0.1, "learning_rate": 1e-4 * (1 - i / steps),
             "accuracy": min(1.0, i / steps), "trained_tokens": 512.0}
        if i % 10 == 9:
            m["val/loss"] = 2.1 * math.exp(-i / 20) + 0.15
        run.log(m, step=i)
    run.log_text("training finished", data={"final_step": steps - 1})
    run.finish("SUCCEEDED")


def long_run(runs_dir: Path, name: str, steps: int = 5000) -> None:
    """A finished SFT run longer than a chart's points (its series come downsampled): loss,
    learning rate and gradient norm every step from step 0, val loss every 1000th."""
    run = init(name=name, dir=runs_dir, method="sft", base_model="tiny", dataset="arith")
    for i in range(steps):
        m = {"loss": 2.0 * math.exp(-i / 2000) + 0.05 * math.sin(i / 10),
             "learning_rate": 1e-4 * min(1.0, (i + 1) / 100), "grad_norm": 1.0 + 0.1 * math.cos(i)}
        if i % 1000 == 0:
            m["val/loss"] = 2.0 * math.exp(-i / 2000) + 0.1
        run.log(m, step=i)
    run.finish("SUCCEEDED")


def grpo_run(runs_dir: Path, name: str = "grpo-arith", steps: int = 25,
             finish: bool = True) -> Run:
    """A GRPO run with reward, stability and timing metrics and two steps of rollouts."""
    run = init(name=name, dir=runs_dir, method="grpo", base_model="tiny-gpt",
               dataset="arith", trainer="runwatch-grpo", backend="local", flush_interval=0.05)
    assert isinstance(run, Run)
    for i in range(steps):
        run.log({"loss": 0.01 * math.sin(i), "reward_mean": i / steps, "accuracy": i / steps,
                 "fb/loss/ratio/mean": 1.0 + 0.01 * math.sin(i),
                 "fb/loss/clip/high_fraction": 0.01, "fb/loss/clip/low_fraction": 0.005,
                 "fb/loss/kl_policy/mean": 0.001 * i, "timing/step_total_s": 1.5,
                 "timing/sample_s": 1.0}, step=i)
    for step in (10, 20):
        run.log_samples(step, [
            {"prompt": "What is 2+2?", "completion": XSS_COMPLETION, "reward": 1.0,
             "reward_terms": {"correct": 1.0, "format": 0.0}},
            {"prompt": "What is 3+3?", "completion": "6", "reward": 0.25,
             "reward_terms": {"correct": 0.25}},
            {"prompt": "What is 4+4?", "completion": "nine", "reward": -1.0},
        ], split="train")
    if finish:
        run.finish("SUCCEEDED")
    return run


def wait_indexed(base_url: str, name: str, last_step: int, samples: int = 0) -> None:
    """Wait until the server has indexed the run up to `last_step` (and `samples` files)."""
    with http.client(base_url=base_url, timeout=30) as client:

        def indexed() -> bool:
            resp = client.get(f"/api/runs/{name}")
            if resp.status_code != 200 or resp.json()["run"]["observed_step"] != last_step:
                return False
            kept = client.get(f"/api/runs/{name}/samples").json()["available"]
            return len(kept) >= samples

        wait_for(indexed, what=f"the server to index run {name!r} up to step {last_step} "
                 f"with {samples} sample files")


def records_lost_run(runs_dir: Path, name: str) -> int:
    """A run recorded for real into a folder on a small disk that fills up while it logs
    and stays full to its end: the SDK's final SUCCEEDED event counts the records the disk
    refused in its reason. The run folder must be `small_disk`'s; returns the count."""
    run = init(name=name, dir=runs_dir, method="sft", base_model="tiny", dataset="arith",
               flush_interval=0.05)
    assert isinstance(run, Run)
    run.log({"loss": 1.0}, step=0)
    run._writer.flush_now()
    wait_for(lambda: (runs_dir / name / fmt.METRICS).exists(), what="the first record on disk")
    filler = fill(runs_dir / name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the SDK warns of each write the disk refused
        for step in range(1, 1000):
            run.log({"loss": 0.5, "pad": float(step)}, step=step)
        run.finish()
    filler.unlink()  # the run folder as the SDK left it
    assert run.dropped_lines > 0
    return run.dropped_lines


def chart_points(page: Page, chart: str) -> int:
    value = page.get_attribute(f'[data-chart="{chart}"]', "data-points")
    return int(value or 0)


def drawn_charts(page: Page) -> set[str]:
    return {c.get_attribute("data-chart") or "" for c in page.query_selector_all("[data-chart]")}


def open_run(page: Page, base_url: str, name: str) -> None:
    """Open the list, click the run, and wait until its detail is loaded."""
    page.goto(f"{base_url}/runs")
    page.click(f'.run-row:has-text("{name}")')
    page.wait_for_selector("#detail[data-loaded=true]")


def job_on_a_lost_worker(base_url: str, engine: Engine, name: str, worker: str,
                         host: str = "other-host", executor: str = "local") -> str:
    """A command job (its run id) claimed by `worker`, whose row the index holds as the
    worker writes it, and whose heartbeat stopped 300 s ago: lost, its job not ended. No
    worker process runs; the row is all the pages read."""
    resp = http.post(f"{base_url}/api/jobs", json={
        "kind": "command", "name": name, "argv": [sys.executable, "-c", "pass"]}, timeout=30)
    assert resp.status_code == 201, resp.text
    run_id: str = resp.json()["run"]["run_id"]
    with engine.begin() as conn:
        store_jobs.register_worker(conn, store_jobs.WorkerRow(
            worker, host, 4242, 1, "cpu", time.time() - 600, executor=executor))
        assert store_jobs.claim(conn, worker, 1, time.time()) is not None
        store_jobs.heartbeat(conn, worker, time.time() - 300)
    return run_id


def drag_zoom(page: Page, box: FloatRect, start: float, end: float) -> None:
    """Drag across a chart (its bounding `box`) from `start` to `end`, fractions of its
    plot's width, at mid height: a zoom into those steps."""
    plot = box["width"] - 64 - 24  # the chart's grid, as hover_tooltip has it
    mid_y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + 64 + start * plot, mid_y)
    page.mouse.down()
    page.mouse.move(box["x"] + 64 + end * plot, mid_y, steps=5)
    page.mouse.up()


def press(page: Page, target: Locator) -> None:
    """Hold the mouse's button down on the middle of `target` (released by the test)."""
    box = target.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()


def click_as_it_ends(page: Page, run: Run, target: Locator, status: Locator) -> None:
    """Press on `target`, end `run` while the button is down, and release once `status`
    shows the run ended (its row has changed under the pointer)."""
    expect(status).to_have_class(re.compile("status-running"))
    press(page, target)
    run.finish("SUCCEEDED")
    expect(status).to_have_class(re.compile("status-succeeded"))
    page.mouse.up()


@contextmanager
def themed_page(browser: Browser, scheme: str, width: int = 1400,
                expected_errors: tuple[str, ...] = ()) -> Iterator[Page]:
    """A page whose system colour setting is `scheme` ("light" or "dark"), sized as the
    `page` fixture's; a page error or console error (except those matching a pattern of
    `expected_errors`) fails the test when the block ends."""
    context = browser.new_context(viewport={"width": width, "height": 1000}, color_scheme=scheme)  # type: ignore[arg-type]
    pg = context.new_page()
    problems: list[str] = []
    pg.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type == "error" and not any(re.search(p, msg.text) for p in expected_errors):
            problems.append(f"console error: {msg.text}")

    pg.on("console", on_console)
    try:
        yield pg
    finally:
        context.close()
    assert not problems, problems


# Every visible element that breaks dark mode: a light grey/white background (alpha over
# 0.5; saturated accents such as a primary button or a status dot are not counted) or own
# text too dark to read on a dark page; as "tag#id.class background|text colour", at most
# 20. Relative luminance as WCAG defines it.
LIGHT_IN_DARK = """() => {
    const lum = (c) => {
        const m = c.match(/rgba?\\(([\\d.]+),\\s*([\\d.]+),\\s*([\\d.]+)(?:,\\s*([\\d.]+))?/);
        if (!m) return null;
        const a = m[4] === undefined ? 1 : Number(m[4]);
        const ch = [m[1], m[2], m[3]].map((v) => {
            const s = Number(v) / 255;
            return s <= 0.03928 ? s / 12.92 : Math.pow((s + 0.055) / 1.055, 2.4);
        });
        return { l: 0.2126 * ch[0] + 0.7152 * ch[1] + 0.0722 * ch[2], a };
    };
    const cls = (el) => typeof el.className === 'string' && el.className.trim()
        ? '.' + el.className.trim().split(/\\s+/).join('.') : '';
    const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + cls(el);
    const bad = [];
    for (const el of document.querySelectorAll('body, body *')) {
        const r = el.getBoundingClientRect();
        if (r.width === 0 || r.height === 0 || el.closest('[hidden]')) continue;
        const st = getComputedStyle(el);
        if (st.visibility === 'hidden' || st.display === 'none') continue;
        const bg = lum(st.backgroundColor);
        if (bg && bg.a > 0.5 && bg.l > 0.35) {
            // coloured accents (a primary button, a status dot) are neither light nor dark
            const [r1, g1, b1] = st.backgroundColor.match(/[\\d.]+/g).map(Number);
            if (Math.max(r1, g1, b1) - Math.min(r1, g1, b1) < 60) {
                bad.push(`${name(el)} background ${st.backgroundColor}`);
            }
        }
        const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
        const fg = lum(st.color);
        if (own && fg && fg.a > 0.5 && fg.l < 0.12) {
            bad.push(`${name(el)} text ${st.color}`);
        }
    }
    return bad.slice(0, 20);
}"""


def light_in_dark(page: Page) -> list[str]:
    """The visible elements of a dark page still coloured for light (see LIGHT_IN_DARK)."""
    found: list[str] = page.evaluate(LIGHT_IN_DARK)
    return found


def background(page: Page, selector: str) -> str:
    """The computed background colour of the first element `selector` matches."""
    colour: str = page.eval_on_selector(selector, "el => getComputedStyle(el).backgroundColor")
    return colour
