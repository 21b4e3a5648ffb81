"""GRPOConfig: documented settings, YAML round-trip, presets, refusals with a reason."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from runwatch.recipes.config import ConfigError, TrainConfig, parse_argv
from runwatch.recipes.grpo import loop
from runwatch.recipes.grpo.config import GRPOConfig
from runwatch.recipes.grpo.pathologies import PATHOLOGIES, expand

DOCS = Path(__file__).resolve().parents[2] / "docs" / "recipes.md"


def _grpo_section() -> str:
    text = DOCS.read_text()
    start = text.index("## GRPO")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def test_every_grpo_setting_has_help_and_is_in_the_docs() -> None:
    section = _grpo_section()
    base = {f.name for f in dataclasses.fields(TrainConfig)}
    for f in dataclasses.fields(GRPOConfig):
        assert f.metadata.get("help"), f.name
        if f.name not in base:
            assert f"`{f.name}`" in section, f"{f.name} is not documented in docs/recipes.md"


def test_every_pathology_is_documented() -> None:
    section = _grpo_section()
    for name in PATHOLOGIES:
        assert f"pathology={name}" in section


def test_wandb_on_by_default_and_yaml_round_trip() -> None:
    cfg = GRPOConfig.from_dict({})
    assert cfg.wandb_project == "post-training-cookbook"
    changed = cfg.with_overrides(["max_steps_off_policy=2", "temperature=0.7",
                                  "wandb_project=None"])
    assert GRPOConfig.from_yaml(changed.to_yaml()) == changed
    assert changed.max_steps_off_policy == 2 and changed.wandb_project is None


def test_preset_then_explicit_settings_win(tmp_path: Path) -> None:
    cfg = parse_argv(GRPOConfig, ["pathology=high_lr", "learning_rate=5e-3"])
    assert cfg.num_minibatches == 4 and cfg.learning_rate == 5e-3
    assert cfg.pathology == "high_lr"
    assert expand(["seed=1"]) == ["seed=1"]
    with pytest.raises(ConfigError, match="unknown pathology"):
        parse_argv(GRPOConfig, ["pathology=nope"])
    # A saved config.yaml already holds its preset's settings; an explicit one still wins.
    path = tmp_path / "config.yaml"
    path.write_text(cfg.to_yaml())
    again = parse_argv(GRPOConfig, ["--config", str(path), "temperature=0.3"])
    assert again.learning_rate == 5e-3 and again.temperature == 0.3


def test_help_lists_every_setting_and_preset(capsys: pytest.CaptureFixture[str]) -> None:
    # `python -m runwatch.recipes.grpo --help` (the same main as `runwatch recipes grpo`)
    assert loop.main(["--help"]) == 0
    text = capsys.readouterr().out
    for f in dataclasses.fields(GRPOConfig):
        assert f"\n{f.name} (" in text and f.metadata["help"] in text
    assert "val_interval (int, default 15; alias validation_interval)" in text
    for name, p in PATHOLOGIES.items():
        assert f"pathology={name}: " in text and p.moves in text


@pytest.mark.parametrize("bad", [
    ["group_size=1"], ["env=chess"], ["clip_low_threshold=1.2"],
    ["max_steps_off_policy=1", "weights_sync_interval=3"], ["resume=true"],
])
def test_refuses_settings_that_cannot_work(bad: list[str]) -> None:
    with pytest.raises(ConfigError):
        parse_argv(GRPOConfig, bad)
