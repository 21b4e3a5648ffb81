"""A config.yaml of a few hundred bytes whose YAML aliases expand to millions of values (a
"billion laughs") is refused by every reader, not expanded into the run detail: before,
the detail of such a run cost seconds to minutes of CPU and gigabytes of memory, and
stalled every other request of the server meanwhile (trial, session 35)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from runwatch.rundir import format as fmt
from runwatch.rundir.configtext import MAX_VALUES, ConfigError, load_config, measure

from .apiclient import Api, MakeRun


def laughs(levels: int) -> str:
    """Each line a list of nine of the line before: 9**levels values in a few hundred
    bytes."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_aliases_are_measured_expanded_without_expanding_them() -> None:
    # 9**9 values (387 million) measured at the cost of the text
    with pytest.raises(ConfigError, match="aliases"):
        load_config(laughs(9))
    assert measure(yaml.safe_load(laughs(4))) > 9 ** 4  # under the bound: read as it is
    assert load_config(laughs(4))["a3"][0][0][0][0] == "lol"
    assert 9 ** 5 < MAX_VALUES < 9 ** 6


def test_a_config_that_contains_itself_or_nests_too_deep_is_refused() -> None:
    with pytest.raises(ConfigError, match="contains itself"):
        load_config("a: &x [1, *x]\n")
    with pytest.raises(ConfigError, match="levels deep"):
        load_config("a: " + "[" * 80 + "]" * 80 + "\n")
    # block nesting that the parser itself refuses is a YAML error, not a crash
    with pytest.raises(yaml.YAMLError):
        load_config("".join("  " * i + "a:\n" for i in range(2000)) + "  " * 2000 + "1\n")


def test_an_ordinary_config_with_aliases_reads_as_before() -> None:
    text = "lr: 0.001\nbetas: [0.9, 0.999]\nshared: &s {warmup: 10}\nother: *s\n"
    assert load_config(text) == yaml.safe_load(text)


def _bomb_run(make_run: MakeRun, runs_dir: Path, levels: int) -> str:
    run_id = make_run("laughs", steps=3)
    (runs_dir / "laughs" / fmt.CONFIG).write_text(laughs(levels))
    return run_id


def test_the_run_detail_shows_the_text_and_a_problem(
        api: Api, make_run: MakeRun, runs_dir: Path, index: Callable[[], None]) -> None:
    # 9**6 values: on the code before, a 3.7 MB detail of the expanded lists
    _bomb_run(make_run, runs_dir, 6)
    index()
    detail = api.ok("/api/runs/laughs")
    assert detail["settings"]["config"] == laughs(6)
    assert detail["settings"]["config_text"] == laughs(6)
    (problem,) = [p for p in detail["problems"] if "aliases" in p]
    assert "its text is shown as it is" in problem
    # the other runs' readers are untouched: the run's metrics still read
    assert api.ok("/api/runs/laughs/history")["rows"]


def test_the_cli_refuses_it_with_a_message(make_run: MakeRun, runs_dir: Path,
                                            index: Callable[[], None], db_url: str) -> None:
    _bomb_run(make_run, runs_dir, 7)
    index()
    out = subprocess.run([sys.executable, "-m", "runwatch", "runs", "hparams", "laughs",
                          "--db", db_url],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "holds more than 100,000 values once its YAML aliases" in out.stderr
