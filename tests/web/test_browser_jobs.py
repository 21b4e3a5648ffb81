"""Job control in a real browser, on a real server whose embedded worker runs real
subprocesses: the New job form, Cancel and Retry seen live (no reload), the failure
reason with what to do, the Cost card and the Resources page with Stop (drain)."""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import Engine

from runwatch.server.runner import Runner, free_port
from tests.support import http

from .webhelpers import drawn_charts, press, shot

# A training script that records into the job's run (runwatch.init attaches to it): it
# logs a step every `pause` seconds. Attempt 1 of a `fail_first` job raises after its
# steps; a later attempt logs half as many and succeeds. Stopping (SIGTERM) takes a
# second of clean-up, while the run is CANCEL_REQUESTED.
SCRIPT = """
import os, sys, time
import runwatch
from runwatch.sdk import StopRequested

steps, pause, fail_first = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "1"
first = os.environ["RUNWATCH_ATTEMPT"] == "1"
run = runwatch.init(method="sft", base_model="tiny", dataset="arith", trainer="browser-test",
                    flush_interval=0.05)
try:
    for i in range(steps if first or not fail_first else steps // 2):
        run.log({"loss": 1.0 / (i + 1)}, step=i)
        time.sleep(pause)
    if fail_first and first:
        raise RuntimeError("attempt 1 fails on purpose")
except StopRequested:
    time.sleep(1.0)
    raise
run.finish("SUCCEEDED")
"""

# Each change of the detail pane's status, in order (show() sets #detail's data-status).
WATCH_STATUS = """() => {
    window.__statuses = [];
    const el = document.querySelector('#detail');
    const seen = () => {
        const s = el.dataset.status;
        if (s && window.__statuses[window.__statuses.length - 1] !== s) window.__statuses.push(s);
    };
    seen();
    new MutationObserver(seen).observe(el, { attributes: true, attributeFilter: ['data-status'] });
    window.__marker = 'same page';
}"""


@pytest.fixture
def server(engine: Engine, runs_dir: Path) -> Iterator[Runner]:
    """The real server with one embedded worker of one cpu device (as `runwatch ui`)."""
    with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05, workers=1,
                worker_settings={"heartbeat_s": 0.5, "grace_s": 5.0}, warm=False) as srv:
        yield srv


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path


def command(script: Path, steps: int, pause: float, fail_first: bool = False) -> list[str]:
    return [sys.executable, str(script), str(steps), str(pause), str(int(fail_first))]


def submit(base_url: str, **body: Any) -> dict[str, Any]:
    resp = http.post(f"{base_url}/api/jobs", json=body, timeout=30)
    assert resp.status_code == 201, resp.text
    return resp.json()["run"]


def statuses(page: Page) -> list[str]:
    return list(page.evaluate("window.__statuses"))


def open_run_page(page: Page, base_url: str, run_id: str) -> None:
    page.goto(f"{base_url}/runs?run={run_id}")
    page.wait_for_selector("#detail[data-loaded=true]")
    page.evaluate(WATCH_STATUS)


@pytest.mark.console_error(r"status of 422\b")  # the refused submit
def test_new_job_form_then_cancel_while_running_live(page: Page, server: Runner,
                                                     script: Path) -> None:
    page.goto(f"{server.url}/runs")
    page.click("#new-job-button")
    expect(page.locator("#new-job[data-loaded=true]")).to_be_visible()
    # the recipes' settings are offered, without the ones the job itself sets
    expect(page.locator('#recipe-settings [data-setting="max_steps"]')).to_have_count(1)
    expect(page.locator('#recipe-settings [data-setting="runs_dir"]')).to_have_count(0)
    box = page.locator("#job-form").bounding_box()
    assert box is not None and box["width"] > 1000  # the form uses the window's width
    # the recipe's own check of a setting shows next to that setting
    page.fill('[data-setting="max_steps"]', "many")
    page.click("#submit-job")
    expect(page.locator('[data-error-for="settings.max_steps"]')).to_contain_text(
        "must be a whole number")
    shot(page, "new-job-recipe")

    page.check("#kind-command")
    page.fill("#command", shlex.join(command(script, steps=600, pause=0.1)))
    page.fill("#job-name", "slow")
    page.fill("#job-devices", "0")
    page.click("#submit-job")
    expect(page.locator('[data-error-for="devices"]')).to_have_text(
        "Devices must be a whole number of at least 1.")
    page.fill("#job-devices", "2")
    page.click("#submit-job")
    # the API's refusal (the cpu profile has one device) shows next to the field it is about
    expect(page.locator('[data-error-for="devices"]')).to_contain_text("at most")
    assert page.url.endswith("/new")
    page.fill("#job-devices", "1")
    shot(page, "new-job-command")
    page.click("#submit-job")

    page.wait_for_selector("#detail[data-loaded=true]")
    assert "run=" in page.url
    page.evaluate(WATCH_STATUS)
    expect(page.locator("#run-title")).to_have_text("slow")
    expect(page.locator("#run-status")).to_have_text("Running", timeout=60_000)
    expect(page.locator('[data-chart="loss"]')).to_be_visible()
    expect(page.locator('[data-cost="device-time"]')).to_contain_text("(estimate)")
    page.click("#action-cancel")
    expect(page.locator("#run-status")).to_have_text("Cancelled", timeout=60_000)
    seen = statuses(page)
    assert seen.index("RUNNING") < seen.index("CANCEL_REQUESTED") < seen.index("CANCELLED"), seen
    assert page.evaluate("window.__marker") == "same page"  # no reload happened
    expect(page.locator("#action-retry")).to_be_visible()
    expect(page.locator("#action-cancel")).to_have_count(0)
    expect(page.locator("#run-reason")).to_have_text("the training job was stopped")
    expect(page.locator('[data-cost="device-time"]')).not_to_contain_text("estimate")
    shot(page, "run-cancelled")


def test_a_queued_job_is_cancelled_at_once(page: Page, server: Runner, script: Path) -> None:
    # the worker's one device is taken by the first job: the second waits in the queue
    submit(server.url, kind="command", name="busy", argv=command(script, 600, 0.1))
    run = submit(server.url, kind="command", name="waits", argv=command(script, 3, 0.0))
    open_run_page(page, server.url, run["run_id"])
    expect(page.locator("#run-status")).to_have_text("Queued")
    page.click("#action-cancel")
    expect(page.locator("#run-status")).to_have_text("Cancelled")
    assert statuses(page) == ["QUEUED", "CANCELLED"]
    expect(page.locator(".notice")).to_contain_text("Cancelled before it started")


def test_retry_after_a_failure_runs_attempt_two_live(page: Page, server: Runner,
                                                     script: Path) -> None:
    run = submit(server.url, kind="command", name="flaky", max_attempts=1,
                 argv=command(script, steps=6, pause=0.3, fail_first=True))
    open_run_page(page, server.url, run["run_id"])
    expect(page.locator("#run-status")).to_have_text("Failed", timeout=60_000)
    expect(page.locator("#run-reason")).to_contain_text("the training job failed")
    expect(page.locator("#what-to-do")).not_to_be_empty()
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-points", "6")
    shot(page, "run-failed")

    # The notice is about the phase it announces: the page clears it once attempt 2 starts,
    # which a fast worker does before an assertion can poll, so every text it shows is kept.
    page.evaluate("""() => {
        const notice = document.querySelector(".notice");
        window.__notices = [];
        new MutationObserver(() => window.__notices.push(notice.textContent)).observe(
            notice, {childList: true, characterData: true, subtree: true});
    }""")
    page.click("#action-retry")
    expect(page.locator("#run-attempt")).to_have_text("attempt 2")
    # who starts it: the web app's own worker, by name
    page.wait_for_function(
        "() => window.__notices.some(t => t.includes('Queued again (attempt 2: worker '))")
    shown = [t for t in page.evaluate("window.__notices") if "Queued again" in t]
    assert "will start it when its devices are free" in shown[0], shown
    expect(page.locator("#run-status")).to_have_text("Running", timeout=60_000)
    expect(page.locator("#run-status")).to_have_text("Succeeded", timeout=60_000)
    seen = statuses(page)
    retried = seen.index("FAILED") + 1
    # QUEUED, or already PREPARING when the web app's worker claimed attempt 2 before the
    # retry's answer read the run (the answer holds the run as it is then; seen in CI)
    assert seen[retried] in ("QUEUED", "PREPARING") and "RUNNING" in seen[retried:], seen
    assert seen[-1] == "SUCCEEDED", seen
    assert page.evaluate("window.__marker") == "same page"  # no reload happened
    # the charts hold attempt 2's three points only (a stream kept from attempt 1 would
    # still show its six: attempt 2's records start again at seq 0)
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-points", "3")
    assert drawn_charts(page) == {"loss"}
    # the history table, empty when the pane loaded again at QUEUED, fills as it runs
    expect(page.locator("#history tbody tr")).to_have_count(3)
    expect(page.locator("#history thead")).to_contain_text("train loss")
    # a retry by hand past its one automatic attempt (it read "2 of at most 1")
    expect(page.locator('[data-cost="attempts"]')).to_have_text(
        "2 (retried by hand, past its automatic attempts)")
    expect(page.locator("#cost-attempts tbody tr")).to_have_count(2)
    # each attempt's spend at the rate its worker recorded (the built-in cpu profile's)
    for attempt in ("1", "2"):
        expect(page.locator(f'[data-attempt-spend="{attempt}"]')).to_contain_text(" at 0.05/h")
    expect(page.locator('[data-cost="device-time"]')).not_to_contain_text("estimate")
    shot(page, "run-retried")


def test_a_click_on_a_job_link_across_the_resources_pages_redraw_opens_the_run(
        page: Page, server: Runner, script: Path) -> None:
    """The workers' rows are redrawn every second (heartbeat ages, spend): patched, not
    rebuilt, so a press and release that straddle a redraw still open the job's run (a
    rebuilt row took the click to the table itself)."""
    running = submit(server.url, kind="command", name="straddle",
                     argv=command(script, steps=600, pause=0.1))
    page.goto(f"{server.url}/resources")
    row = page.locator("#workers tr").first
    link = row.locator(".job-link")
    expect(link).to_have_text("straddle", timeout=60_000)
    # a mark the page's own rows never carry: gone once the row has been drawn again
    row.evaluate("el => el.setAttribute('data-probe', '1')")
    press(page, link)
    expect(page.locator("#workers tr[data-probe]")).to_have_count(0)
    page.mouse.up()
    expect(page.locator("#run-title")).to_have_text("straddle")
    http.post(f"{server.url}/api/runs/{running['run_id']}/cancel", json={}, timeout=30)


def test_resources_page_shows_the_worker_and_stops_it(page: Page, server: Runner,
                                                      script: Path) -> None:
    running = submit(server.url, kind="command", name="busy",
                     argv=command(script, steps=600, pause=0.1))
    submit(server.url, kind="command", name="waiting", argv=command(script, 3, 0.0))
    page.goto(f"{server.url}/runs")
    page.click("#resources-link")
    assert page.url.endswith("/resources")
    rows = page.locator("#workers tr")
    expect(rows).to_have_count(1)
    row = rows.first
    expect(row.locator(".job-link")).to_have_text("busy", timeout=60_000)
    expect(page.locator("#queue-depth")).to_have_attribute("data-depth", "1")
    expect(page.locator("#waiting li")).to_have_text(["waiting"])
    expect(row).to_contain_text("1 / 1")
    expect(row).to_contain_text("cpu")
    expect(row.locator("[data-state]")).to_have_attribute("data-state", "active")
    shot(page, "resources")
    row.locator(".job-link").click()
    expect(page.locator("#run-title")).to_have_text("busy")
    page.go_back()
    expect(row.locator(".job-link")).to_have_text("busy")

    row.locator("[data-drain]").click()
    expect(row.locator("[data-state]")).to_have_attribute("data-state", "draining")
    expect(page.locator(".notice")).to_contain_text("takes no new ones")
    # a drained worker finishes what it runs: cancel it, and the worker stops
    http.post(f"{server.url}/api/runs/{running['run_id']}/cancel", json={}, timeout=30)
    expect(page.locator("#past-workers tr [data-state]")).to_have_attribute(
        "data-state", "stopped", timeout=60_000)
    expect(page.locator("#no-workers")).to_be_visible()


# Logs a step and a training checkpoint every `pause` seconds, from the step its attempt
# resumes at (RUNWATCH_RESUME_STEP + 1, the checkpoint's step done), to `steps`.
RESUMABLE = """
import os, sys, time
import runwatch

steps, pause = int(sys.argv[1]), float(sys.argv[2])
start = int(os.environ.get("RUNWATCH_RESUME_STEP", "-1")) + 1
run = runwatch.init(method="sft", base_model="tiny", dataset="arith", flush_interval=0.05)
for i in range(start, steps):
    run.log({"loss": 1.0 / (i + 1)}, step=i)
    run.log_checkpoint(i, "training", f"ck-{i}")
    time.sleep(pause)
run.finish("SUCCEEDED")
"""


def test_resume_goes_on_from_the_checkpoint_live(page: Page, server: Runner,
                                                 tmp_path: Path) -> None:
    """A cancelled job's Resume (beside Retry) queues attempt 2 from its last training
    checkpoint: the charts keep the steps up to it, and the run ends with every step once,
    without a reload."""
    script = tmp_path / "resumable.py"
    script.write_text(RESUMABLE)
    run = submit(server.url, kind="command", name="resumable",
                 argv=[sys.executable, str(script), "12", "0.25"])
    open_run_page(page, server.url, run["run_id"])
    expect(page.locator('[data-chart="loss"]')).to_have_attribute(
        "data-points", re.compile(r"^([3-9]|1[01])$"), timeout=60_000)
    page.click("#action-cancel")
    expect(page.locator("#run-status")).to_have_text("Cancelled", timeout=60_000)
    expect(page.locator("#action-resume")).to_be_visible()
    saved = int(http.get(f"{server.url}/api/runs/{run['run_id']}", timeout=30)
                .json()["run"]["saved_step"])
    page.click("#action-resume")
    expect(page.locator(".notice")).to_contain_text(
        "the charts show the run up to its checkpoint once a worker starts it")
    expect(page.locator("#run-status")).to_have_text("Succeeded", timeout=60_000)
    expect(page.locator('[data-chart="loss"]')).to_have_attribute("data-points", "12")
    assert page.evaluate("window.__marker") == "same page"  # no reload happened
    points = http.get(f"{server.url}/api/runs/{run['run_id']}/history?limit=50&key=loss",
                      timeout=30).json()["rows"]
    assert [p["step"] for p in points] == list(range(12))  # each step once
    assert saved >= 2
