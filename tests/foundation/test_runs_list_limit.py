"""`runwatch runs list` cut at its `--limit` says so under the table, and how to see more;
a list that ends at the limit or before it says nothing more. `-o json` keeps its shape (a
list of exactly the runs shown). The same from a local index and from a team server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.server.runner import Runner, free_port
from tests.support import sdk_run
from tests.support.cli import cli_here, run_cli

CUT = "showing the newest 3 runs; more match (--limit N shows more"
NAMES = [f"run-{i}" for i in range(5)]  # written oldest first; listed newest first


@pytest.fixture
def five_runs(runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("RUNWATCH_SERVER", "RUNWATCH_TOKEN", "RUNWATCH_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    for name in NAMES:
        sdk_run(runs_dir, name, steps=2, project="many")
    return runs_dir


def listed(table: str) -> list[str]:
    return [line.split()[0] for line in table.splitlines() if line.startswith("run-")]


def test_a_cut_list_says_so_and_json_keeps_its_shape(five_runs: Path) -> None:
    where = ["--dir", str(five_runs)]
    cut = run_cli("runs", "list", *where, "--limit", "3")
    assert listed(cut.stdout) == NAMES[:1:-1]
    assert CUT in cut.stdout and not cut.stderr
    for limit in ("5", "100"):
        whole = cli_here("runs", "list", *where, "--project", "many", "--limit", limit)
        assert listed(whole.stdout) == NAMES[::-1]
        assert "showing" not in whole.stdout, limit
    found = json.loads(cli_here("runs", "list", *where, "--limit", "3", "-o", "json").stdout)
    assert [run["name"] for run in found] == NAMES[:1:-1]
    assert CUT in cli_here("runs", "list", *where, "--search", "run-", "--limit", "3").stdout


def test_a_cut_list_from_a_team_server_says_so(engine: Engine, five_runs: Path) -> None:
    with Runner(engine, runs_dir=five_runs, port=free_port(), interval=0.05, prewarm=False,
                warm=False) as srv:
        remote = ["--server", srv.url]
        cut = cli_here("runs", "list", *remote, "--limit", "3")
        assert listed(cut.stdout) == NAMES[:1:-1]
        assert CUT in cut.stdout
        whole = cli_here("runs", "list", *remote, "--limit", "5")
        assert listed(whole.stdout) == NAMES[::-1] and "showing" not in whole.stdout
        found = json.loads(cli_here("runs", "list", *remote, "--limit", "3", "-o", "json").stdout)
        assert [run["name"] for run in found] == NAMES[:1:-1]
