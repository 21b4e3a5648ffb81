"""`runwatch recipes sft|dpo|grpo key=value ...`: run the built-in recipes on a tiny model.

Each command hands its arguments to the recipe's `main` (`runtime.recipe_main`, the
same for all three). The recipes import PyTorch only when a command runs, so the rest
of the CLI starts fast and works without the `recipes` extra.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Annotated

import typer

from runwatch.recipes.config import (
    REFUSED_EXIT,
    ConfigError,
    DPOConfig,
    SFTConfig,
    TrainConfig,
    refuse_settings,
)
from runwatch.recipes.grpo.config import GRPOConfig
from runwatch.rundir.format import ENV_RUN_DIR

CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True,
           "help_option_names": ["-h", "--help"]}

# command -> (config, module whose main(argv) runs it, one-line help)
RECIPES: dict[str, tuple[type[TrainConfig], str, str]] = {
    "sft": (SFTConfig, "runwatch.recipes.sft",
            "Supervised fine-tuning; defaults learn 2-digit addition on a CPU in about a "
            "minute."),
    "dpo": (DPOConfig, "runwatch.recipes.dpo",
            "Direct preference optimisation, e.g. from an SFT run: init_from=runs/<sft-run>."),
    "grpo": (GRPOConfig, "runwatch.recipes.grpo.loop",
             "GRPO: sample groups, reward them, update; starts from an SFT run: "
             "init_from=runs/<sft-run> (from_scratch=true trains a fresh model)."),
}

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


def _epilog(cls: type[TrainConfig]) -> str:
    # "\b" keeps click from re-wrapping an entry into one line with the next.
    return cls.help_text(before_entry="\b\n")


def _command(cls: type[TrainConfig], module: str) -> Callable[[Overrides], None]:
    def command(overrides: Overrides = None) -> None:
        args = list(overrides or [])
        # Settings it would refuse are refused before the recipe's modules load torch
        # (seconds); under a job the recipe refuses them itself, recording why.
        if (not os.environ.get(ENV_RUN_DIR) and not any(a in ("-h", "--help") for a in args)
                and isinstance(refuse_settings(cls, args), ConfigError)):
            raise typer.Exit(REFUSED_EXIT)
        raise typer.Exit(importlib.import_module(module).main(args))
    return command


for _name, (_cls, _module, _help) in RECIPES.items():
    recipes_app.command(_name, help=_help, context_settings=CONTEXT,
                        epilog=_epilog(_cls))(_command(_cls, _module))
