"""Every command that takes a runs folder reads $RUNWATCH_DIR when it is given none, as
`runs`, `submit` and `import` do: `index`, `worker` and `ui` too, so a job submitted into
$RUNWATCH_DIR is started by a plain `runwatch worker`; and each one's --help says so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from runwatch.server.runner import free_port
from tests.support import first_line, sdk_run
from tests.support.cli import cli_here, run_cli
from tests.support.wait import DEADLINE_S


@pytest.fixture
def away(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A folder to type in (no ./runs there) and the environment naming the runs folder."""
    runs = tmp_path / "elsewhere"
    sdk_run(runs, "e1", steps=2)
    here = tmp_path / "here"
    here.mkdir()
    return here, {"RUNWATCH_DIR": str(runs)}


def test_index_and_ui_read_runwatch_dir(away: tuple[Path, dict[str, str]]) -> None:
    here, env = away
    runs = Path(env["RUNWATCH_DIR"])
    said = run_cli("index", cwd=here, env=env).stdout
    assert "indexed 1 runs (1 new)" in said and str(runs) in said, said
    served = run_cli("ui", "--port", str(free_port()), "--workers", "0", "--exit-when-done",
                     cwd=here, env=env).stdout
    assert f"(indexing {runs})" in served, served
    assert (runs / ".runwatch" / "index.db").is_file()
    assert not (here / "runs").exists()


def test_a_plain_worker_starts_a_job_submitted_into_runwatch_dir(
        away: tuple[Path, dict[str, str]]) -> None:
    here, env = away
    run_cli("submit", "--name", "j1", "--", "true", cwd=here, env=env)
    worker = subprocess.Popen([sys.executable, "-m", "runwatch", "worker", "--heartbeat-s",
                               "0.2"], cwd=here, env={**os.environ, **env},
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              start_new_session=True)
    try:
        said = first_line(worker, what="runwatch worker to start")
        assert said.rstrip().endswith(f"from {env['RUNWATCH_DIR']}"), said
        run_cli("runs", "wait", "j1", "--exit-status", "--timeout", str(DEADLINE_S),
                cwd=here, env=env)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=DEADLINE_S)
    assert not (here / "runs").exists()


@pytest.mark.parametrize("command", ["index", "worker", "ui", "resources", "demo", "submit"])
def test_the_help_of_each_command_that_takes_a_runs_folder_names_runwatch_dir(
        command: str) -> None:
    said = " ".join(cli_here(command, "--help", env={"COLUMNS": "200"}).stdout.split())
    assert "(default: $RUNWATCH_DIR or ./runs)" in said, said
