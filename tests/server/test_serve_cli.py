"""`runwatch ui`: prints its URL, indexes the folder, and --exit-when-done ends it for scripts."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from runwatch.cli.serve import ui
from runwatch.server.runner import free_port
from runwatch.store.db import open_engine
from runwatch.store.queries import list_runs

from .apiclient import MakeRun


def test_ui_exit_when_done_indexes_and_stops(runs_dir: Path, make_run: MakeRun) -> None:
    make_run("finished-a", steps=3)
    make_run("finished-b", steps=3, status="FAILED")
    app = typer.Typer()
    app.command()(ui)
    port = free_port()
    result = CliRunner().invoke(app, [str(runs_dir), "--port", str(port), "--exit-when-done",
                                      "--interval", "0.05"])
    assert result.exit_code == 0, result.output
    assert f"http://127.0.0.1:{port}/runs" in result.output
    with open_engine(runs_dir / ".runwatch" / "index.db").connect() as conn:
        assert {r.name for r in list_runs(conn)} == {"finished-a", "finished-b"}


def test_ui_refuses_a_missing_folder(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(ui)
    result = CliRunner().invoke(app, [str(tmp_path / "nope")])
    assert result.exit_code == 2 and "not a folder" in result.output
