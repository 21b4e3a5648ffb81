"""The New job form's Working folder in a real browser, on a real server whose embedded
worker runs the job (trial 35, D1: any folder given there was refused, since the API's job
had no `cwd`): the command runs in the folder given, the run's Job details name it, and a
folder that does not exist is refused next to the field."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import Engine

from runwatch.server.runner import Runner, free_port

from .webhelpers import shot

# writes where it ran into a file of the folder it runs in
WHERE = "import os, pathlib; pathlib.Path('ran-here.txt').write_text(os.getcwd())"


@pytest.fixture
def server(engine: Engine, runs_dir: Path) -> Iterator[Runner]:
    """The real server with one embedded worker of one cpu device (as `runwatch ui`)."""
    with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05, workers=1,
                worker_settings={"heartbeat_s": 0.5}, warm=False) as srv:
        yield srv


@pytest.mark.console_error(r"status of 400\b")  # the folder that does not exist
def test_a_command_job_runs_in_the_working_folder_the_form_gives(
        page: Page, server: Runner, tmp_path: Path) -> None:
    folder = tmp_path / "my project"
    folder.mkdir()
    page.goto(f"{server.url}/new")
    expect(page.locator("#new-job[data-loaded=true]")).to_be_visible()
    page.check("#kind-command")
    page.fill("#command", shlex.join([sys.executable, "-c", WHERE]))
    page.fill("#job-name", "in-my-folder")

    page.fill("#job-cwd", str(tmp_path / "no such folder"))
    page.click("#submit-job")
    expect(page.locator('[data-error-for="cwd"]')).to_contain_text("does not exist")
    assert page.url.endswith("/new")
    shot(page, "trial-new-job-cwd-refused")

    page.fill("#job-cwd", str(folder))
    page.click("#submit-job")
    page.wait_for_selector("#detail[data-loaded=true]")
    expect(page.locator("#run-title")).to_have_text("in-my-folder")
    expect(page.locator('#job-details [data-row="working-folder"]')).to_have_text(str(folder))
    expect(page.locator("#run-status")).to_have_text("Succeeded", timeout=60_000)
    assert (folder / "ran-here.txt").read_text() == str(folder)
    shot(page, "trial-new-job-cwd-ran")
