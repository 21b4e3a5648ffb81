"""Pathology presets: settings that break a GRPO run on purpose, one health metric each.

Each preset is plain key=value settings over the defaults, so `pathology=high_lr` and
spelling its settings out on the command line run the same thing. The metric it moves
and the direction are listed here, tested in tests/recipes_grpo, and documented in
docs/recipes.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from runwatch.recipes.config import ConfigError


@dataclass(frozen=True)
class Pathology:
    settings: dict[str, str]
    moves: str          # what it does to the metrics, versus the default run


PATHOLOGIES: dict[str, Pathology] = {
    "high_lr": Pathology(
        {"learning_rate": "1e-2", "num_minibatches": "4", "temperature": "1.0",
         "lr_schedule": "constant", "warmup_steps": "0"},
        "fb/loss/clip/high_fraction and low_fraction rise; fb/loss/ratio/mean leaves 1"),
    "stale": Pathology(
        {"max_steps_off_policy": "4", "groups_in_flight": "16", "weights_sync_interval": "4",
         "batch_size": "8", "learning_rate": "1e-3", "temperature": "1.0",
         "lr_schedule": "constant", "warmup_steps": "0"},
        "async/staleness_mean rises; fb/loss/ratio/mean drifts and kl_policy grows"),
    "reward_hack": Pathology(
        {"reward": "digit_overlap", "max_sample_tokens": "16", "learning_rate": "1e-3",
         "temperature": "1.0", "lr_schedule": "constant", "warmup_steps": "0"},
        "accuracy (the flawed scorer's) rises while val/accuracy falls and "
        "mean_sampled_response_length climbs"),
    "tight_budget": Pathology(
        {"max_sample_tokens": "2"},
        "truncated_ratio rises to ~1 (answers are cut before they end)"),
    "too_hard": Pathology(
        {"digits": "5"},
        "zero_variance_skip_ratio rises; identical_nonzero_reward_skip_ratio stays ~0"),
    "too_easy": Pathology(
        {"reward": "format"},
        "zero_variance_skip_ratio and identical_nonzero_reward_skip_ratio rise"),
}


def preset(name: str) -> list[str]:
    """The key=value settings of pathology `name`."""
    if name not in PATHOLOGIES:
        raise ConfigError(f"unknown pathology {name!r}; choose one of {', '.join(PATHOLOGIES)}")
    return [f"{k}={v}" for k, v in PATHOLOGIES[name].settings.items()]


def expand(overrides: list[str]) -> list[str]:
    """Put a `pathology=NAME` preset's settings first, so explicit settings win."""
    names = [o.partition("=")[2].strip() for o in overrides
             if o.partition("=")[0].strip() == "pathology"]
    out: list[str] = []
    for name in names:
        if name.lower() not in ("", "none", "null"):
            out += preset(name)
    return out + overrides
