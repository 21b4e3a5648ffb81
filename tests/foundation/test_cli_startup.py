"""The CLI's start-up (#13): a command imports what it needs and no other command's
libraries, its help listings read from the commands' sources say what the commands say,
and options converted without pydantic come out as typer's own conversion gives them.

No timing here: what is imported is what start-up costs, and it is checked exactly."""

from __future__ import annotations

import json
import subprocess
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from runwatch.cli import lazy, main
from runwatch.cli import plainparams as pp
from runwatch.cli.main import app
from runwatch.cli.plainparams import PlainRuntimeParam
from tests.support import sdk_run

# Libraries no help listing needs; the server's and the recipes' never on a read command.
HEAVY = ("sqlalchemy", "fastapi", "uvicorn", "starlette", "numpy", "torch", "pydantic", "yaml",
         "httpx", "alembic", "jq")
SERVER_AND_TRAINING = ("fastapi", "uvicorn", "starlette", "torch", "transformers", "pydantic",
                       "alembic", "httpx")

PROBE = """
import json, sys
from runwatch.cli.main import app
try:
    app(sys.argv[1:])
except SystemExit:
    pass
sys.stdout.flush()
print(json.dumps(sorted(m for m in sys.modules if "." not in m)), file=sys.stderr)
"""


def imported_by(*args: str) -> set[str]:
    """The top-level modules a `runwatch ARGS` process has imported when it ends."""
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"}, timeout=120)
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [["--help"], ["runs", "--help"], []])
def test_help_listings_import_no_heavy_library(args: list[str]) -> None:
    assert imported_by(*args) & set(HEAVY) == set()


def test_a_typer_group_s_command_converts_its_options_without_pydantic(tmp_path: Path) -> None:
    loaded = imported_by("grafana", "dashboard", "-o", str(tmp_path / "board.json"))
    assert (tmp_path / "board.json").is_file()
    assert loaded & {"pydantic", "sqlalchemy", "numpy"} == set()


def test_compare_imports_neither_the_server_nor_the_other_commands(runs_dir: Path) -> None:
    for name in ("base", "cand"):
        sdk_run(runs_dir, name, steps=30, metrics=lambda i: {"loss": 1.0 / (i + 1)})
    loaded = imported_by("runs", "compare", "cand", "base", "--dir", str(runs_dir), "-o", "json")
    assert "numpy" in loaded, "the probe saw the comparison run"
    assert loaded & set(SERVER_AND_TRAINING) == set()
    modules = imported_by("runs", "compare", "cand", "base", "--dir", str(runs_dir), "--help")
    assert "numpy" not in modules, "its --help does not load the comparison"


def groups() -> list[lazy.LazyGroup]:
    root = typer.main.get_command(app)
    assert isinstance(root, lazy.LazyGroup)
    found = [root]
    for group in found:
        found += [c for c in map(group.load, group.entries) if isinstance(c, lazy.LazyGroup)]
    return found


def test_listed_help_read_from_source_is_the_commands_own() -> None:
    checked = 0
    for group in groups():
        for name, target in group.entries.items():
            command = group.load(name)
            assert lazy.help_of(target) == (command.help or ""), f"{group.name} {name}"
            checked += 1
    assert checked >= 30


def test_listing_is_the_eager_apps_listing() -> None:
    """`runwatch --help` and `runwatch runs --help` print what an app that imported every
    command up front would print."""

    def eager(group: lazy.LazyGroup, help_text: str) -> typer.Typer:
        out = typer.Typer(help=help_text, no_args_is_help=True)
        for name, target in group.entries.items():
            obj = lazy.resolve(target) if isinstance(target, str) else target
            if isinstance(obj, typer.Typer):
                sub = group.load(name)
                assert isinstance(sub, typer.core.TyperGroup)
                out.add_typer(obj if not isinstance(sub, lazy.LazyGroup)
                              else eager(sub, sub.help or ""), name=name)
            else:
                out.command(name)(obj)
        return out

    root = groups()[0]
    reference = eager(root, root.help or "")
    reference.callback()(main._main)  # the root's own options (--version)
    for args in (["--help"], ["runs", "--help"], ["grafana", "--help"]):
        got = CliRunner().invoke(app, args, env={"COLUMNS": "100"}, prog_name="runwatch")
        want = CliRunner().invoke(reference, args, env={"COLUMNS": "100"},
                                  prog_name="runwatch")
        assert got.exit_code == want.exit_code == 0
        assert got.output == want.output


class Color(StrEnum):
    red = "red"
    blue = "blue"


def show(name: str, count: Annotated[int, typer.Option(min=1, max=5)] = 2,
         rate: Annotated[float, typer.Option(min=0.0)] = 0.5,
         color: Color = Color.red, where: Path = Path("runs"),
         maybe: Annotated[str | None, typer.Option()] = None,
         n: Annotated[int | None, typer.Option()] = None) -> None:
    """Show what the options were converted to."""
    typer.echo(repr((name, count, rate, color, where, maybe, n)))


def _no_options() -> None:
    pass


@pytest.mark.parametrize("args", [[*a.split()] for a in (
    "show x", "show x --count 5 --rate 1e-3 --color blue", "show x --count 0",
    "show x --count 6", "show x --count 1.5", "show x --count abc", "show x --count 007",
    "show x --count -1", "show x --rate -0.1", "show x --rate inf", "show x --rate .5",
    "show x --rate 2", "show x --color RED", "show x --color green", "show x --where a/b",
    "show x --maybe y --n 3", "show x --n -0", "show --help", "show")])
def test_plain_conversion_is_typers(args: list[str]) -> None:
    """The same values (types included) and the same errors as typer's own conversion."""
    plain = lazy.LazyTyper()
    plain.lazy("show", f"{__name__}:show")
    typers = typer.Typer()
    typers.command("show")(show)
    typers.callback()(_no_options)
    loaded = typer.main.get_command(plain)
    assert isinstance(loaded, lazy.LazyGroup)
    assert all(isinstance(p._runtime_param, PlainRuntimeParam)  # type: ignore[attr-defined]
               for p in loaded.load("show").params)
    got = CliRunner().invoke(plain, args, env={"COLUMNS": "100"})
    want = CliRunner().invoke(typers, args, env={"COLUMNS": "100"})
    assert (got.exit_code, got.output) == (want.exit_code, want.output)


def test_plain_conversion_takes_only_plain_values() -> None:
    command = typer.main.get_command_from_info(
        typer.models.CommandInfo(callback=show), pretty_exceptions_short=True,
        rich_markup_mode=None)
    params: dict[str, Any] = {p.name: p for p in command.params}

    def plain(name: str, value: object) -> object:
        return pp.plain_value(value, params[name].type_descriptor, params[name])

    assert plain("count", "3") == 3 and plain("rate", "2") == 2.0
    assert type(plain("rate", "2")) is float and plain("color", "blue") is Color.blue
    for name, value in [("count", "9"), ("count", " 3"), ("count", "+3"), ("rate", "nan"),
                        ("color", "Blue"), ("name", b"x")]:
        assert plain(name, value) is pp.UNSET, (name, value)
