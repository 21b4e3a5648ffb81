"""`runwatch recipes grpo key=value …`: the GRPO recipe's command, mounted on the recipes app.

Kept apart from cli/recipes.py (the SFT/DPO commands) so each recipe's owner edits
one file; `register(recipes_app)` adds the command. PyTorch loads only when it runs.
"""

from __future__ import annotations

from typing import Annotated

import typer

from runwatch.recipes.grpo.config import GRPOConfig
from runwatch.recipes.grpo.pathologies import PATHOLOGIES

CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True,
           "help_option_names": ["-h", "--help"]}

Overrides = Annotated[
    list[str] | None,
    typer.Argument(help="Config overrides as key=value (pathology=NAME applies a preset); "
                        "--config FILE.yaml first to start from a saved config.yaml.",
                   show_default=False),
]


def _epilog() -> str:
    # "\b" keeps click from re-wrapping an entry into one line with the next.
    lines = GRPOConfig.help_text().split("\n")
    entries = ["\b\n" + lines[i] + "\n" + lines[i + 1] for i in range(0, len(lines), 2)]
    presets = ["\b\n" + f"pathology={name}: " + " ".join(
        f"{k}={v}" for k, v in p.settings.items()) + "\n    " + p.moves
        for name, p in PATHOLOGIES.items()]
    return ("Config fields (pass as key=value):\n" + "\n".join(entries)
            + "\n\nPathology presets:\n" + "\n".join(presets))


def grpo_cmd(overrides: Overrides = None) -> None:
    """GRPO: sample groups, reward them, update; e.g. init_from=runs/<sft-run>."""
    from runwatch.recipes.grpo.__main__ import main

    raise typer.Exit(main(list(overrides or [])))


def register(app: typer.Typer) -> None:
    """Add `grpo` to the `runwatch recipes` sub-app."""
    app.command("grpo", context_settings=CONTEXT, epilog=_epilog())(grpo_cmd)
