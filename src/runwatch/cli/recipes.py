"""`runwatch recipes sft|dpo key=value ...`: run the built-in recipes on a tiny model.

The recipes import PyTorch only when a command runs, so the rest of the CLI starts
fast and works without the `recipes` extra.
"""

from __future__ import annotations

from typing import Annotated

import typer

from runwatch.recipes.config import DPOConfig, RecipeConfig, SFTConfig

CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True,
           "help_option_names": ["-h", "--help"]}

recipes_app = typer.Typer(
    help="Train the built-in SFT, DPO and GRPO recipes on a tiny model (CPU is enough).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

Overrides = Annotated[
    list[str] | None,
    typer.Argument(help="Config overrides as key=value; --config FILE.yaml first to start "
                        "from a saved config.yaml.", show_default=False),
]


def _epilog(cls: type[RecipeConfig]) -> str:
    # "\b" keeps click from re-wrapping a field's entry into one line with the next.
    lines = cls.help_text().split("\n")
    entries = ["\b\n" + lines[i] + "\n" + lines[i + 1] for i in range(0, len(lines), 2)]
    return "Config fields (pass as key=value):\n" + "\n".join(entries)


@recipes_app.command("sft", context_settings=CONTEXT, epilog=_epilog(SFTConfig))
def sft_cmd(overrides: Overrides = None) -> None:
    """Supervised fine-tuning; defaults learn 2-digit addition on a CPU in about a minute."""
    from runwatch.recipes import sft

    raise typer.Exit(sft.main(list(overrides or [])))


@recipes_app.command("dpo", context_settings=CONTEXT, epilog=_epilog(DPOConfig))
def dpo_cmd(overrides: Overrides = None) -> None:
    """Direct preference optimisation, e.g. from an SFT run: init_from=runs/<sft-run>."""
    from runwatch.recipes import dpo

    raise typer.Exit(dpo.main(list(overrides or [])))
