"""A job's recipe settings are refused before anything is made, naming the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from runwatch.jobs.settings import SettingsError, check_recipe_settings
from runwatch.recipes.config import ConfigError, SFTConfig, refuse_settings

INSTEAD = {k: f"use --{k}" for k in ("name", "project", "runs_dir", "resume")}


def check(recipe: str, *argv: str) -> SettingsError | None:
    try:
        check_recipe_settings(recipe, argv, INSTEAD, "see --help")
    except SettingsError as exc:
        return exc
    return None


def test_good_settings_pass_and_aliases_are_their_setting() -> None:
    assert check("sft", "max_steps=5", "lora_rank=4", "wandb_project=none") is None
    assert check("grpo", "validation_interval=5", "init_from=runs/sft-1") is None  # old name
    assert check("sft") is None


@pytest.mark.parametrize(("argv", "field", "words"), [
    (("max_steps=x",), "settings.max_steps", "max_steps='x' is not a valid int"),
    (("max_stpes=3",), "settings.max_stpes", "the sft recipe has no setting 'max_stpes'; "
                                             "see --help"),
    (("runs_dir=/tmp",), "settings.runs_dir", "runs_dir is the job's own, not a recipe "
                                              "setting: use --runs_dir"),
    (("max_steps=3", "batch_size=0"), "settings.batch_size", "batch_size must be positive"),
    (("d_model=36", "n_head=8"), None, "d_model 36 must be divisible by n_head 8"),
    (("lonely",), "settings.lonely", "override 'lonely' is not key=value"),
])
def test_a_refusal_names_the_setting_at_fault(argv: tuple[str, ...], field: str | None,
                                              words: str) -> None:
    exc = check("sft", *argv)
    assert exc is not None and exc.field == field and words in str(exc)


def test_a_config_file_refused_says_what_runwatch_recipes_says(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`runwatch submit recipes sft --config FILE` said "--config needs a YAML file path"
    for a file that is missing or is not YAML (it judged `--config` alone): now the
    sentence of `runwatch recipes sft --config FILE`, naming no setting."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("max_steps: [\n")
    for path in (tmp_path / "missing.yaml", broken):
        said = refuse_settings(SFTConfig, ["--config", str(path)])
        assert isinstance(said, ConfigError)
        exc = check("sft", "--config", str(path), "max_steps=3")
        assert exc is not None and (str(exc), exc.field) == (str(said), None)
    capsys.readouterr()  # refuse_settings said it on stderr


def test_a_job_setting_names_no_config_file() -> None:
    """A config file is the command line's (`--config FILE` first); as a job's setting
    (POST /api/jobs settings {"--config": …}) it is refused before any file is read."""
    exc = check("sft", "--config=/etc/hostname")
    assert exc is not None and exc.field == "settings.--config"
    assert "the sft recipe has no setting '--config'" in str(exc)
