"""The settings a job gives a built-in recipe, checked as `runwatch recipes NAME` checks
them, before anything is made: `runwatch submit recipes NAME key=value …` and
`POST /api/jobs` refuse the same settings with the same sentences.

A job's run folder, name and project are the job's own, so the recipe settings that
would choose them (`JOB_OWNED`) are refused; each caller says what to do instead. A
config file is the command line's (`runwatch submit -- recipes NAME --config FILE …`:
after `--`, which passes the options on to the recipe); as a setting (`--config=FILE`, a
POST's settings key) it is no setting, refused before any file is read. Whether a recipe
can resume a job's run from its checkpoint is asked of it the same way (`resume_refusal`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from runwatch.cli.recipes import RECIPES
from runwatch.jobs.resume import recipe_settings
from runwatch.jobs.spec import recipe_argv
from runwatch.recipes.config import (
    ConfigError,
    RecipeConfig,
    TrainConfig,
    parse_argv,
    start_settings,
)

JOB_OWNED = ("name", "project", "runs_dir", "resume")


class SettingsError(ValueError):
    """A recipe setting a job cannot run with; `field` is "settings.KEY" when one setting
    is at fault (None when only the settings together are refused)."""

    def __init__(self, message: str, field: str | None) -> None:
        super().__init__(message)
        self.field = field


def check_recipe_settings(recipe: str, argv: Sequence[str], instead: Mapping[str, str],
                          listing: str) -> TrainConfig:
    """The settings recipe `recipe` runs with from the `key=value` items of `argv`;
    SettingsError if it cannot. `instead[key]` says what to do instead of a JOB_OWNED
    setting; `listing` says where the recipe's settings are listed. The recipe's own
    refusal is kept."""
    cfg = RECIPES[recipe][0]
    names = {f.name for f in dataclasses.fields(cfg)}
    for item in argv:
        given, sep, _ = item.partition("=")
        key = cfg.ALIASES.get(given.strip(), given.strip())
        if sep and key in JOB_OWNED:
            raise SettingsError(f"{key} is the job's own, not a recipe setting: "
                                f"{instead[key]}", f"settings.{key}")
        if sep and key not in names:
            raise SettingsError(f"the {recipe} recipe has no setting {given.strip()!r}; "
                                f"{listing}", f"settings.{given.strip()}")
    try:
        # The recipe's start check too (GRPO without init_from): a job is refused at
        # submit, not after it waited in the queue.
        return start_settings(cfg, list(argv))
    except ConfigError as whole:
        raise SettingsError(str(whole), _at_fault(cfg, argv, whole)) from None


def resume_refusal(recipe: str, argv: Sequence[str], name: str) -> str | None:
    """Why built-in recipe `recipe`, the job's command `argv` (spec.recipe_argv), cannot
    resume run `name` from its checkpoint, in the recipe's own words (GRPO cannot resume
    yet); None when it can."""
    settings = list(argv[len(recipe_argv(recipe)):])
    try:
        start_settings(RECIPES[recipe][0], [*settings, *recipe_settings(name)])
    except ConfigError as exc:
        return str(exc)
    return None


def _at_fault(cfg: type[RecipeConfig], argv: Sequence[str], whole: ConfigError) -> str | None:
    """The field ("settings.KEY") of the setting `whole` refuses: the one it names, else
    the first item refused alone for the same reason (a value that does not parse); None
    when the settings together are refused (a --config file that cannot be read, two
    settings that do not fit)."""
    if whole.setting is not None:
        return f"settings.{whole.setting}"
    for item in argv:
        try:
            parse_argv(cfg, [item])
        except ConfigError as alone:
            if str(alone) == str(whole):
                return f"settings.{item.partition('=')[0].strip()}"
    return None
