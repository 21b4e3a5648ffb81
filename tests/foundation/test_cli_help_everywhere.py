"""Every command's `--help` prints and exits 0: help text is read as Rich markup, so a
bracket in it (`[/PATH]` in `runs grafana`'s `--grafana-url`, found in a trial) crashed
the help with a MarkupError. The commands are found by walking the CLI's tree, so a new
command is checked without being listed here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from typer import _click

from runwatch.cli.main import app
from tests.support.cli import cli_here, run_cli


def _command_paths(command: Any, path: list[str], ctx: _click.Context) -> Iterator[list[str]]:
    yield path
    if hasattr(command, "list_commands"):  # a group: its commands, loaded
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            yield from _command_paths(sub, [*path, name],
                                      _click.Context(sub, info_name=name, parent=ctx))


def test_every_command_and_subcommand_prints_its_help() -> None:
    root = typer.main.get_command(app)
    paths = list(_command_paths(root, [], _click.Context(root, info_name="runwatch")))
    assert ["runs", "grafana"] in paths and ["grafana", "dashboard"] in paths
    for path in paths:
        said = cli_here(*path, "--help")
        assert "Usage:" in said.stdout, (path, said.stdout)


def test_runs_grafana_help_shows_the_address_it_takes() -> None:
    said = run_cli("runs", "grafana", "--help", env={"COLUMNS": "200"})
    assert "--grafana-url" in said.stdout and "http://localhost:3000" in said.stdout


def _runs_options() -> dict[str, set[str]]:
    root: Any = typer.main.get_command(app)
    ctx = _click.Context(root, info_name="runwatch")
    runs = root.get_command(ctx, "runs")
    runs_ctx = _click.Context(runs, info_name="runs", parent=ctx)
    return {name: {opt for param in runs.get_command(runs_ctx, name).params
                   for opt in param.opts} for name in runs.list_commands(runs_ctx)}


def test_the_readme_names_every_runs_command_without_o_or_jq() -> None:
    """The README said every `runs` command takes -o and --jq; `wait`, `share`,
    `tensorboard` and `grafana` did not (a trial). `share` takes --jq now; the README
    names the others, and this keeps it true."""
    options = _runs_options()
    no_jq = sorted(name for name, opts in options.items() if "--jq" not in opts)
    no_o = sorted(name for name, opts in options.items() if "-o" not in opts)
    assert (no_jq, no_o) == (["grafana", "tensorboard", "wait"], ["grafana", "tensorboard"])
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text()
                      .split())
    assert ("take `-o table|wide|json` and `--jq EXPR` (`-r` for raw strings), but for "
            "`wait`, whose `-o json` writes its events as JSON lines and which takes no "
            "`--jq`, and `tensorboard` and `grafana`, which write files and links and take "
            "neither.") in readme
