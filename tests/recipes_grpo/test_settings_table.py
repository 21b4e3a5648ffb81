"""docs/recipes.md's GRPO settings table is GRPOConfig's: a row for every setting GRPO
declares, and for every shared one whose default or meaning it changes, with that default
and help text; and its W&B sections say what GRPO's default does.

Found in a trial (trial37, defect 5): the table lacked `checkpoint_interval` (GRPO's 1000,
not SFT's 150), and the W&B section said "off by default" where GRPO's is on."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from runwatch.recipes.config import TrainConfig
from runwatch.recipes.grpo.config import GRPOConfig

DOCS = Path(__file__).resolve().parents[2] / "docs" / "recipes.md"


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def test_every_setting_grpo_declares_is_a_row_with_its_default_and_help() -> None:
    section = _section(DOCS.read_text(), "## GRPO")
    base = {f.name: f for f in dataclasses.fields(TrainConfig)}
    missing = []
    for f in dataclasses.fields(GRPOConfig):
        shared = base.get(f.name)
        if (shared is not None and shared.default == f.default
                and shared.metadata["help"] == f.metadata["help"]):
            continue  # as the SFT section has it
        row = f"| `{f.name}` | `{f.default!r}` | {f.metadata['help']} |"
        if row not in section:
            missing.append(row)
    assert not missing, "\n".join(missing)


def test_the_w_and_b_section_says_grpo_logs_to_w_and_b_by_default() -> None:
    default = GRPOConfig.from_dict({}).wandb_project
    assert default is not None
    text = DOCS.read_text()
    shared = " ".join(_section(text, "## Weights & Biases").split())
    assert f"GRPO's default is on (`wandb_project={default}`" in shared, shared
    assert "docs/recipes.md" not in _section(text, "## GRPO")
