"""What the server's indexer says of its runs folder as a whole reaches the web app: runs
kept though their folders are gone (most of a folder's runs gone at once, as a disk that is
not mounted looks) stay in the list, and the list says why and what to do, until the
folders are back. Before, the app listed them with no word (the server's log alone said it,
once). GET /api/server gives the notes; the run list reads it."""

from __future__ import annotations

import shutil
from pathlib import Path

from playwright.sync_api import Page, expect

from runwatch.server.runner import Runner
from tests.support import http, sdk_run

from .webhelpers import wait_indexed

NOTE_WAIT_MS = 15_000  # the list reads the notes every 2 s


def notes(server: Runner) -> list[str]:
    got: list[str] = http.get(f"{server.url}/api/server").json()["notes"]
    return got


def test_runs_kept_though_their_folders_are_gone_are_said_in_the_list(
        page: Page, server: Runner, runs_dir: Path, tmp_path: Path) -> None:
    names = [f"r{i}" for i in range(5)]
    for name in names:
        sdk_run(runs_dir, name, steps=3)
    for name in names:
        wait_indexed(server.url, name, 2)
    page.goto(f"{server.url}/runs")
    expect(page.locator(".run-row")).to_have_count(5)
    expect(page.locator("#folder-notes")).to_be_hidden()
    assert notes(server) == []

    away = tmp_path / "away"
    away.mkdir()
    with server._index_lock:  # all at once, as a pass sees an unmounted disk
        for name in names[:4]:  # more than half: kept (ingest/forget.too_many)
            shutil.move(runs_dir / name, away / name)
    said = (f"the folders of 4 of the 5 runs indexed from the runs folder {runs_dir} are "
            "gone at once, so they are kept")
    note = page.locator("#folder-notes")
    expect(note).to_contain_text(said, timeout=NOTE_WAIT_MS)
    expect(note).to_contain_text(f"runwatch index {runs_dir} --forget-gone")
    assert [n for n in notes(server) if said in n]
    expect(page.locator(".run-row")).to_have_count(5)  # still listed, as the note says

    with server._index_lock:  # the disk is back
        for name in names[:4]:
            shutil.move(away / name, runs_dir / name)
    expect(note).to_be_hidden(timeout=NOTE_WAIT_MS)
    assert notes(server) == []
