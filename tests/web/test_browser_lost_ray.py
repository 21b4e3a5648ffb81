"""The Resources page says what a lost Ray worker's job waits for, and so does its
cancel on the run's page.

No live worker can tell whether a lost Ray worker's job still runs but a Ray worker (a
local one cannot ask the cluster), so the job waits; the page says so on the job, and
shows the worker's executor by its device profile. The index holds the worker's row as a
Ray worker writes it (no cluster is needed to show it).
"""

from __future__ import annotations

import time

from playwright.sync_api import Page, expect
from sqlalchemy import Engine

from runwatch.server.runner import Runner
from runwatch.store import jobs as store_jobs

from .webhelpers import job_on_a_lost_worker


def test_a_lost_ray_workers_job_says_it_waits_for_a_ray_worker(page: Page, server: Runner,
                                                              engine: Engine) -> None:
    run_id = job_on_a_lost_worker(server.url, engine, "on-the-cluster", "w-ray",
                                  host="head-node", executor="ray")
    page.goto(f"{server.url}/resources")
    row = page.locator('tr[data-worker="w-ray"]')
    expect(row.locator("[data-state]")).to_have_attribute("data-state", "lost")
    expect(row).to_contain_text("cpu on Ray")
    expect(row.locator(".job-link")).to_have_text("on-the-cluster")
    expect(row.locator(f'[data-waits="{run_id}"]')).to_contain_text("waits for a Ray worker")
    # its cancel says that nothing can stop it before a Ray worker is up
    row.locator(".job-link").click()
    page.wait_for_selector("#detail[data-loaded=true]")
    page.click("#action-cancel")
    expect(page.locator("#run-status")).to_have_text("Cancel requested")
    notice = page.locator(".notice")
    expect(notice).to_contain_text("its worker w-ray no longer heartbeats")
    expect(notice).to_contain_text("it waits for a Ray worker")
    # a live Ray worker can reap it: the job no longer waits on anyone
    with engine.begin() as conn:
        store_jobs.register_worker(conn, store_jobs.WorkerRow(
            "w-ray-2", "other-node", 4343, 1, "cpu", time.time(), executor="ray"))
    page.goto(f"{server.url}/resources")
    expect(row.locator("[data-waits]")).to_have_count(0, timeout=30_000)


def test_a_live_ray_worker_whose_cluster_does_not_answer_says_it_starts_no_job(
        page: Page, server: Runner, engine: Engine) -> None:
    """The row a Ray worker writes while its cluster is silent (jobs.worker._heartbeat)
    shows on the page beside its Active state; once cleared, the line goes."""
    why = "its Ray cluster at http://127.0.0.1:8265 does not answer"
    with engine.begin() as conn:
        store_jobs.register_worker(conn, store_jobs.WorkerRow(
            "w-silent", "head-node", 4242, 1, "cpu", time.time(), executor="ray",
            heartbeat_timeout_s=3600.0))
        store_jobs.set_unavailable(conn, "w-silent", why)
    page.goto(f"{server.url}/resources")
    row = page.locator('tr[data-worker="w-silent"]')
    expect(row.locator("[data-state]")).to_have_attribute("data-state", "active")
    expect(row.locator('[data-unavailable="w-silent"]')).to_have_text(f"Starts no job: {why}")
    with engine.begin() as conn:
        store_jobs.set_unavailable(conn, "w-silent", None)
    page.reload()
    expect(row.locator("[data-state]")).to_have_attribute("data-state", "active")
    expect(row.locator("[data-unavailable]")).to_have_count(0)
