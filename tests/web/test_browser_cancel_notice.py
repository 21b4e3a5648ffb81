"""A cancel's notice on the run's page outlives a detail read that left before the cancel.

The page reads the run's detail again at each change the list's stream tells of. A read
that left the server before the cancel can come back after it (a slow answer): it
carries the phase before, and the next change the stream told of then looked like a new
phase and cleared the notice (seen in CI: "Cancel requested" shown, its notice empty).
Here the answer of such a read is held (the server answered it; the browser gets it
later), so the order is the same on every run.
"""

from __future__ import annotations

import sys
import time
from urllib.parse import urlparse

from playwright.sync_api import APIResponse, Page, Route, expect
from sqlalchemy import Engine, update

from runwatch.server.runner import Runner
from runwatch.store import jobs as store_jobs
from runwatch.store import schema as s
from tests.support import http


def _set_stage(engine: Engine, run_id: str, stage: str) -> None:
    """A change of the run's list fields (its stage, as a worker reports it), which the
    list's stream tells the page of."""
    with engine.begin() as conn:
        conn.execute(update(s.runs).where(s.runs.c.run_id == run_id)
                     .values(stage=stage, updated_at=time.time()))


def test_a_cancel_notice_stays_when_an_older_detail_read_answers_after_it(
        page: Page, server: Runner, engine: Engine) -> None:
    resp = http.post(f"{server.url}/api/jobs", json={
        "kind": "command", "name": "slow-answers", "argv": [sys.executable, "-c", "pass"]},
        timeout=30)
    assert resp.status_code == 201, resp.text
    run_id = resp.json()["run"]["run_id"]
    # a worker that claimed the job and was lost: the cancel is a request, not an end
    with engine.begin() as conn:
        store_jobs.register_worker(conn, store_jobs.WorkerRow(
            "w-gone", "other-host", 4242, 1, "cpu", time.time() - 600))
        assert store_jobs.claim(conn, "w-gone", 1, time.time()) is not None
        store_jobs.heartbeat(conn, "w-gone", time.time() - 300)
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
    held: list[tuple[Route, APIResponse]] = []

    def hold(route: Route) -> None:
        held.append((route, route.fetch()))

    def wait_held(n: int) -> None:
        deadline = time.monotonic() + 30
        while len(held) < n:
            assert time.monotonic() < deadline, f"the page did not read its detail {n} times"
            page.wait_for_timeout(50)

    def release() -> None:
        while held:
            route, answer = held.pop(0)
            route.fulfill(response=answer)

    page.route(lambda url: urlparse(url).path == f"/api/runs/{run_id}", hold)
    # a change the stream tells of: the page reads the detail; its answer (the phase
    # before the cancel) is held
    _set_stage(engine, run_id, "first stage")
    wait_held(1)
    page.click("#action-cancel")
    expect(page.locator("#run-status")).to_have_text("Cancel requested")
    notice = page.locator(".notice")
    expect(notice).to_contain_text("Cancel requested:")
    # the old answer arrives after the cancel's; the read made after the cancel is asked
    # once it is in (one read at a time) and held too
    release()
    wait_held(1)
    expect(page.locator("#run-status")).to_have_text("Cancel requested")
    # another change the stream tells of, then every answer: the last read shows it
    _set_stage(engine, run_id, "second stage")
    deadline = time.monotonic() + 30
    while "second stage" not in page.locator("#detail header").inner_text():
        assert time.monotonic() < deadline, "the page never showed the second stage"
        release()
        page.wait_for_timeout(50)
    page.unroute_all()
    release()
    expect(page.locator("#run-status")).to_have_text("Cancel requested")
    expect(notice).to_contain_text("Cancel requested:")
    expect(notice).to_contain_text("w-gone no longer heartbeats")
