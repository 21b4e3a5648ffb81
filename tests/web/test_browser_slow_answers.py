"""Pages that read the server again and again show the newest answer, not the last to come.

A cancel's notice on the run's page outlives a detail read that left before the cancel. The
page reads the run's detail again at each change the list's stream tells of. A read
that left the server before the cancel can come back after it (a slow answer): it
carries the phase before, and the next change the stream told of then looked like a new
phase and cleared the notice (seen in CI: "Cancel requested" shown, its notice empty).
The logs' level filter shows the lines of the level chosen last, whichever answer comes last.
The Resources page reads its workers every few seconds: a read that left before a Stop
and came back after the Stop's own read showed the worker as not stopping.

Here the answer of such a read is held (the server answered it; the browser gets it
later), so the order is the same on every run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from playwright.sync_api import APIResponse, Page, Route, expect
from sqlalchemy import Engine, update

from runwatch.sdk import Run, init
from runwatch.server.runner import Runner
from runwatch.store import jobs as store_jobs
from runwatch.store import schema as s

from .webhelpers import job_on_a_lost_worker, open_run, wait_indexed


class Held:
    """The server's answers to the page's requests matching a path, handed to the page only
    when the test releases them. Each request is sent to the server when the test's thread
    next waits on the page (Playwright runs route handlers then); `wait` is such a wait."""

    def __init__(self, page: Page, path: str) -> None:
        self.page = page
        self.answers: list[tuple[Route, APIResponse]] = []
        page.route(lambda url: urlparse(url).path == path, self._hold)

    def _hold(self, route: Route) -> None:
        self.answers.append((route, route.fetch()))

    def wait(self, n: int, until: Callable[[Any], bool] = lambda _: True) -> None:
        """Wait until `n` answers are held, or, with `until`, one whose JSON body it accepts."""
        deadline = time.monotonic() + 30
        while len(self.answers) < n or not any(until(a.json()) for _, a in self.answers):
            assert time.monotonic() < deadline, f"the page did not make {n} such requests"
            self.page.wait_for_timeout(50)

    def release(self, *, newest_first: bool = False) -> int:
        """Hand every held answer to the page; how many there were."""
        n = len(self.answers)
        while self.answers:
            route, answer = self.answers.pop(-1 if newest_first else 0)
            route.fulfill(response=answer)
        return n


def _answers(page: Page, selector: str) -> int:
    """How many reads the view at `selector` has had answered, shown or dropped (its
    `data-answers`)."""
    return int(page.locator(selector).get_attribute("data-answers") or 0)


def _wait_answers(page: Page, selector: str, n: int) -> None:
    """Wait until the view has had `n` reads answered: every answer released is handled."""
    expect(page.locator(selector)).to_have_attribute("data-answers", str(n))


def _set_stage(engine: Engine, run_id: str, stage: str) -> None:
    """A change of the run's list fields (its stage, as a worker reports it), which the
    list's stream tells the page of."""
    with engine.begin() as conn:
        conn.execute(update(s.runs).where(s.runs.c.run_id == run_id)
                     .values(stage=stage, updated_at=time.time()))


def test_a_cancel_notice_stays_when_an_older_detail_read_answers_after_it(
        page: Page, server: Runner, engine: Engine) -> None:
    # a worker that claimed the job and was lost: the cancel is a request, not an end
    run_id = job_on_a_lost_worker(server.url, engine, "slow-answers", "w-gone")
    # the list is read twice: when the page's shell starts, and again once the list's
    # stream watches (its `ready`); from then on the stream tells of each change
    lists: list[str] = []
    page.on("requestfinished", lambda r: lists.append(r.url) if "/api/runs?" in r.url else None)
    page.goto(f"{server.url}/runs?run={run_id}")
    page.wait_for_selector("#detail[data-loaded=true]")
    deadline = time.monotonic() + 30
    while len(lists) < 2:
        assert time.monotonic() < deadline, "the list's stream never said it watches"
        page.wait_for_timeout(50)
    expect(page.locator("#action-cancel")).to_be_visible()
    before = page.locator("#run-status").inner_text()
    assert before != "Cancel requested"

    # from here on, each read of the detail is answered by the server when it is asked
    # and handed to the page only when the test says so
    held = Held(page, f"/api/runs/{run_id}")
    # a change the stream tells of: the page reads the detail; its answer (the phase
    # before the cancel) is held
    _set_stage(engine, run_id, "first stage")
    held.wait(1)
    page.click("#action-cancel")
    expect(page.locator("#run-status")).to_have_text("Cancel requested")
    notice = page.locator(".notice")
    expect(notice).to_contain_text("Cancel requested:")
    # the old answer arrives after the cancel's; the read made after the cancel is asked
    # once it is in (one read at a time) and held too
    held.release()
    held.wait(1)
    expect(page.locator("#run-status")).to_have_text("Cancel requested")
    # another change the stream tells of, then every answer: the last read shows it
    _set_stage(engine, run_id, "second stage")
    deadline = time.monotonic() + 30
    while "second stage" not in page.locator("#detail header").inner_text():
        assert time.monotonic() < deadline, "the page never showed the second stage"
        held.release()
        page.wait_for_timeout(50)
    page.unroute_all()
    held.release()
    expect(page.locator("#run-status")).to_have_text("Cancel requested")
    expect(notice).to_contain_text("Cancel requested:")
    expect(notice).to_contain_text("w-gone no longer heartbeats")


def test_a_cancel_answered_after_the_run_ended_does_not_bring_the_run_back(
        page: Page, server: Runner, engine: Engine) -> None:
    run_id = job_on_a_lost_worker(server.url, engine, "ended-first", "w-late")
    open_run(page, server.url, "ended-first")
    expect(page.locator("#action-cancel")).to_be_visible()
    # the server takes the cancel at once; its answer (the run as cancel requested)
    # reaches the page only when the test releases it
    held = Held(page, f"/api/runs/{run_id}/cancel")
    page.click("#action-cancel")
    held.wait(1)
    # meanwhile the run ends, and the list's stream tells the page first
    with engine.begin() as conn:
        now = time.time()
        conn.execute(update(s.runs).where(s.runs.c.run_id == run_id)
                     .values(status="CANCELLED", ended_at=now, updated_at=now))
    status = page.locator("#run-status")
    expect(status).to_have_text("Cancelled")
    # note whether the pane is ever loaded again from here on (a run the page took for
    # restarted is: its data-loaded goes, then comes back with the server's phase)
    page.evaluate("""() => {
        const pane = document.querySelector("#detail");
        window.paneReloaded = false;
        new MutationObserver(() => {
            if (!pane.hasAttribute("data-loaded")) window.paneReloaded = true;
        }).observe(pane, {attributes: true});
    }""")
    assert held.release() == 1
    notice = page.locator(".notice")
    expect(notice).to_contain_text("The run ended (cancelled) before the cancel's answer came back")
    # the older answer did not put the run back: the pane was not loaded again, and the
    # run stays ended, with nothing to cancel
    assert page.evaluate("() => window.paneReloaded") is False
    expect(status).to_have_text("Cancelled")
    expect(page.locator("#action-cancel")).to_have_count(0)


def test_a_stopped_worker_stays_stopping_when_an_older_read_answers_last(
        page: Page, server: Runner, engine: Engine) -> None:
    with engine.begin() as conn:
        store_jobs.register_worker(conn, store_jobs.WorkerRow(
            "w-idle", "other-host", 4242, 1, "cpu", time.time()))
    page.goto(f"{server.url}/resources")
    row = page.locator('tr[data-worker="w-idle"]')
    expect(row.locator("[data-drain]")).to_have_text("Stop")
    # the page's next periodic read leaves before the Stop; its answer is held
    held = Held(page, "/api/workers")
    held.wait(1)
    before = _answers(page, "#resources")
    row.locator("[data-drain]").click()
    expect(page.locator(".notice")).to_contain_text("takes no new ones")
    # the Stop's own read (it sees the worker draining) answers first, then the older one
    held.wait(2, lambda body: any(w["id"] == "w-idle" and w["draining"] for w in body["workers"]))
    released = held.release(newest_first=True)
    _wait_answers(page, "#resources", before + released)
    # every answer is in, the older last: what shows is the newest
    expect(row.locator("[data-drain]")).to_have_text("Stopping…")
    expect(row.locator("[data-state]")).to_have_attribute("data-state", "draining")
    page.unroute_all()
    held.release()


SHARD_LINES = [("info", f"tokenizing shard {i}") for i in range(3)]


def _open_run_with_lines(page: Page, server: Runner, runs_dir: Path, name: str,
                         lines: list[tuple[str, str]]) -> Run:
    """A running SFT run that logged two steps and `lines` (level, text), opened on its
    page; the test finishes it."""
    run = init(name=name, dir=runs_dir, method="sft", base_model="tiny", dataset="arith",
               trainer="t", backend="local", flush_interval=0.05)
    assert isinstance(run, Run)
    run.log({"loss": 1.0}, step=0)
    for level, text in lines:
        run.log_text(text, level=level)
    run.log({"loss": 0.9}, step=1)
    wait_indexed(server.url, name, 1)
    open_run(page, server.url, name)
    return run


def test_the_logs_show_the_level_chosen_last_when_an_earlier_choice_answers_last(
        page: Page, server: Runner, runs_dir: Path) -> None:
    run = _open_run_with_lines(page, server, runs_dir, "chatty",
                               [*SHARD_LINES, ("error", "a shard could not be read")])
    rows = page.locator("#logs .log-row")
    expect(rows).to_have_count(4)
    held = Held(page, f"/api/runs/{run.id}/logs")
    before = _answers(page, "#live-logs")
    level = '#live-logs select[aria-label="Minimum level"]'
    page.select_option(level, "INFO")
    held.wait(1)
    page.select_option(level, "ERROR")
    held.wait(2)
    # the ERROR list answers first, then the INFO one asked before it
    released = held.release(newest_first=True)
    page.unroute_all()
    _wait_answers(page, "#live-logs", before + released)
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("a shard could not be read")
    run.finish("SUCCEEDED")


def test_a_line_streamed_while_the_logs_load_stays_after_the_older_ones(
        page: Page, server: Runner, runs_dir: Path) -> None:
    run = _open_run_with_lines(page, server, runs_dir, "streaming", SHARD_LINES)
    rows = page.locator("#logs .log-row")
    expect(rows).to_have_count(3)
    held = Held(page, f"/api/runs/{run.id}/logs")
    before = _answers(page, "#live-logs")
    page.select_option('#live-logs select[aria-label="Minimum level"]', "INFO")
    held.wait(1)  # its page, read now, holds the three lines
    # a line written while that page travels reaches the list by the run's stream first
    run.log_text("the first batch is ready", level="warning")
    expect(rows).to_have_count(1)
    released = held.release()
    page.unroute_all()
    _wait_answers(page, "#live-logs", before + released)
    # the page's lines go before it, each once
    expect(rows).to_have_count(4)
    expect(rows.last).to_contain_text("the first batch is ready")
    expect(rows.first).to_contain_text("tokenizing shard 0")
    run.finish("SUCCEEDED")
