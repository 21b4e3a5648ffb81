"""A recipe's settings are refused in one place (recipes/config.refuse_settings): `runwatch
recipes NAME` (before torch loads) and the recipe's own `main` (runtime.recipe_main) say the
same sentence and exit 2, and make nothing; a --config file that cannot be read or is not
YAML is refused like any setting, not a traceback."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runwatch.cli.main import app
from runwatch.cli.recipes import RECIPES
from runwatch.rundir.format import ENV_RUN_DIR

CASES = [
    ("sft", ["max_steps=0"], "max_steps must be positive, got 0"),
    ("sft", ["no_such_setting=1"], "unknown SFTConfig field(s) no_such_setting"),
    ("sft", ["learning_rate"], "is not key=value"),
    ("sft", ["--config", "{tmp}/missing.yaml"],
     "cannot read --config {tmp}/missing.yaml: No such file or directory"),
    ("sft", ["--config={tmp}/broken.yaml"], "--config {tmp}/broken.yaml is not YAML ("),
    ("sft", ["--config", "{tmp}/list.yaml"], "YAML document must be a mapping of fields"),
    ("dpo", ["beta=0"], "beta must be positive"),
    ("grpo", ["group_size=4"], "init_from is not set"),
]


@pytest.mark.parametrize(("recipe", "args", "said"), CASES,
                         ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(CASES)])
def test_the_command_and_the_recipe_refuse_alike(
        recipe: str, args: list[str], said: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(ENV_RUN_DIR, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken.yaml").write_text("max_steps: [\n")
    (tmp_path / "list.yaml").write_text("- max_steps\n")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    said = said.replace("{tmp}", str(tmp_path))
    before = sorted(p.name for p in tmp_path.iterdir())

    command = CliRunner().invoke(app, ["recipes", recipe, *argv])
    assert command.exit_code == 2, command.output
    assert command.exception is None or isinstance(command.exception, SystemExit), \
        command.exception

    main = importlib.import_module(RECIPES[recipe][1]).main
    capsys.readouterr()
    code = main(argv)
    recipe_said = capsys.readouterr().err

    assert code == 2
    assert recipe_said == command.stderr, "the same sentence from both"
    assert recipe_said.startswith("error: ") and said in recipe_said, recipe_said
    assert len(recipe_said.splitlines()) == 1, "one sentence, no traceback"
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "nothing made"
