"""The web app shows money (a worker's spend and rate on the Resources page) in fixed
notation, as the CLI does (runwatch.cli.output.fmt_money): "< 0.0001" below a cent's
hundredth, else four significant digits, never "1.4e-5". And a lost worker's spend does
not grow on the page: it stopped where the worker was found lost (analysis/workers.py).

Found in a trial (trial35, a wording finding, and defect 7).
"""

from __future__ import annotations

import time

from playwright.sync_api import Page, expect
from sqlalchemy import Engine

from runwatch.server.runner import Runner
from runwatch.store import jobs as store_jobs


def test_the_resources_page_shows_spend_and_rate_in_fixed_notation(
        page: Page, server: Runner, engine: Engine) -> None:
    now = time.time()
    with engine.begin() as conn:
        # up 1 s and 10 s at 0.05 per device-hour: 1.4e-5 and 1.389e-4
        for wid, up_s in (("w-tiny", 1.0), ("w-short", 10.0)):
            store_jobs.register_worker(conn, store_jobs.WorkerRow(
                wid, "host-a", 1, 1, "cpu", now - up_s, hourly_rate=0.05))
            store_jobs.stop_worker(conn, wid, now)
        # lost: up 40 s, then no heartbeat for 60 s past its 30 s timeout
        store_jobs.register_worker(conn, store_jobs.WorkerRow(
            "w-lost", "host-a", 2, 1, "cpu", now - 100, hourly_rate=0.05,
            heartbeat_timeout_s=30.0))
        store_jobs.heartbeat(conn, "w-lost", now - 60)
    page.goto(f"{server.url}/resources")
    expect(page.locator('tr[data-worker="w-tiny"] [data-spend]')).to_have_text("< 0.0001")
    expect(page.locator('tr[data-worker="w-short"] [data-spend]')).to_have_text("0.0001389")
    expect(page.locator('tr[data-worker="w-short"]')).to_contain_text("0.05")
    lost = page.locator('tr[data-worker="w-lost"]')
    expect(lost.locator("[data-state]")).to_have_attribute("data-state", "lost")
    # 70 s (its 40 s up and its timeout) at 0.05: the same after the row is redrawn, which
    # counted on from its answer grew it by a seventieth a second
    expect(lost.locator("[data-spend]")).to_have_text("0.0009722")
    lost.evaluate("el => el.setAttribute('data-probe', '1')")
    expect(page.locator('tr[data-worker="w-lost"][data-probe]')).to_have_count(0)
    assert lost.locator("[data-spend]").inner_text() == "0.0009722"
