"""Recipe configs: documented fields, YAML round trip, typed key=value overrides, --help."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from runwatch.cli.recipes import recipes_app
from runwatch.recipes.config import ConfigError, DPOConfig, SFTConfig, TrainConfig, parse_argv
from runwatch.recipes.grpo.config import GRPOConfig

CONFIGS = [SFTConfig, DPOConfig, GRPOConfig]


@pytest.mark.parametrize("cls", CONFIGS)
def test_every_field_is_documented(cls: type[SFTConfig]) -> None:
    for f in dataclasses.fields(cls):
        assert len(f.metadata.get("help", "")) > 10, f"{cls.__name__}.{f.name} has no help"


@pytest.mark.parametrize("cls", CONFIGS)
def test_yaml_round_trip(cls: type[SFTConfig]) -> None:
    cfg = cls().with_overrides(["learning_rate=1e-4", "wandb_project=proj", "lora_rank=4"])
    assert cls.from_yaml(cfg.to_yaml()) == cfg


def test_overrides_are_parsed_by_type() -> None:
    cfg = SFTConfig().with_overrides(
        ["max_steps=1e3", "learning_rate=0.01", "resume=true", "name=x", "init_from=None",
         "export_samples=no"])
    assert cfg.max_steps == 1000 and cfg.learning_rate == 0.01 and cfg.resume is True
    assert cfg.init_from is None and cfg.export_samples is False
    with pytest.raises(ConfigError, match="unknown SFTConfig field"):
        SFTConfig().with_overrides(["learning_rat=1"])
    with pytest.raises(ConfigError, match="not a valid int"):
        SFTConfig().with_overrides(["max_steps=many"])
    with pytest.raises(ConfigError, match="key=value"):
        SFTConfig().with_overrides(["max_steps"])
    with pytest.raises(ConfigError, match="divisible"):
        SFTConfig().with_overrides(["d_model=30", "n_head=4"])


def test_config_file_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(DPOConfig(beta=0.5, max_steps=7).to_yaml())
    cfg = parse_argv(DPOConfig, ["--config", str(path), "max_steps=9"])
    assert cfg.beta == 0.5 and cfg.max_steps == 9


@pytest.mark.parametrize("command, cls", [("sft", SFTConfig), ("dpo", DPOConfig),
                                          ("grpo", GRPOConfig)])
def test_help_lists_every_field_with_its_documentation(command: str, cls: type[SFTConfig]
                                                       ) -> None:
    result = CliRunner().invoke(recipes_app, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for f in dataclasses.fields(cls):
        assert f"{f.name} (" in text
        assert " ".join(f.metadata["help"].split()) in text


@pytest.mark.parametrize("cls", CONFIGS)
def test_docs_list_every_field(cls: type[SFTConfig]) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "recipes.md").read_text()
    for f in dataclasses.fields(cls):
        assert f"`{f.name}`" in doc, f"docs/recipes.md does not mention {f.name}"


@pytest.mark.parametrize("cls", CONFIGS)
def test_validation_interval_is_an_alias_of_val_interval(cls: type[TrainConfig],
                                                          tmp_path: Path) -> None:
    assert "validation_interval" not in cls().to_dict()
    assert parse_argv(cls, ["validation_interval=7"]).val_interval == 7
    # Either name sets the one setting, so the later of the two wins.
    assert parse_argv(cls, ["validation_interval=7", "val_interval=3"]).val_interval == 3
    assert parse_argv(cls, ["val_interval=3", "validation_interval=7"]).val_interval == 7
    path = tmp_path / "config.yaml"
    path.write_text("validation_interval: 9\n")
    assert parse_argv(cls, ["--config", str(path)]).val_interval == 9
    assert parse_argv(cls, ["--config", str(path), "val_interval=4"]).val_interval == 4
    assert "alias validation_interval" in cls.help_text()


def test_a_grpo_config_saved_before_the_rename_keeps_its_interval(tmp_path: Path) -> None:
    # GRPO then wrote both names, validated every validation_interval steps and
    # ignored val_interval.
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(GRPOConfig().to_dict()
                                   | {"val_interval": 100, "validation_interval": 7}))
    assert parse_argv(GRPOConfig, ["--config", str(path)]).val_interval == 7
