"""Roles: what a metric is to the displays (tiles, results, tables, charts), and which key plays it.

A run keeps the names it logged. `find_key` answers which of them plays a role: the
canonical name first, then the names other frameworks log for it (the alias table, in
its order), then names that reach it through a prefix or pattern rule (`train/loss`).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from runwatch.metrics.aliases import EXACT, SHOWN, canonical


class Role(StrEnum):
    """A part a metric (or, for GRAD_ACCUM, a run setting) plays in what runwatch shows."""

    TRAIN_LOSS = "train_loss"
    EVAL_LOSS = "eval_loss"
    REWARD = "reward"
    VAL_REWARD = "val_reward"
    ACCURACY = "accuracy"
    VAL_ACCURACY = "val_accuracy"
    PREFERENCE_ACCURACY = "preference_accuracy"
    VAL_PREFERENCE_ACCURACY = "val_preference_accuracy"
    MARGIN = "margin"
    VAL_MARGIN = "val_margin"
    LEARNING_RATE = "learning_rate"
    GRAD_NORM = "grad_norm"
    GRAD_CLIP_FACTOR = "grad_clip_factor"
    UPDATE_RATIO = "update_ratio"
    ADAPTER_NORM = "adapter_norm"
    EXAMPLES = "examples"
    TOKENS = "tokens"
    GRAD_ACCUM = "grad_accum"
    STEP_TIME = "step_time"
    RATIO_MEAN = "ratio_mean"
    CLIPPED_RATIO_MEAN = "clipped_ratio_mean"
    CLIP_HIGH = "clip_high"
    CLIP_LOW = "clip_low"
    KL_POLICY = "kl_policy"
    KL_POLICY_K3 = "kl_policy_k3"
    KL_REF = "kl_ref"


# The canonical name that plays each role. GRAD_ACCUM names a setting in the run's config.
ROLE_NAMES: dict[Role, str] = {
    Role.TRAIN_LOSS: "loss",
    Role.EVAL_LOSS: "val/loss",
    Role.REWARD: "reward_mean",
    Role.VAL_REWARD: "val/reward_mean",
    Role.ACCURACY: "accuracy",
    Role.VAL_ACCURACY: "val/accuracy",
    Role.PREFERENCE_ACCURACY: "preference_accuracy",
    Role.VAL_PREFERENCE_ACCURACY: "val/preference_accuracy",
    Role.MARGIN: "mean_margin",
    Role.VAL_MARGIN: "val/mean_margin",
    Role.LEARNING_RATE: "learning_rate",
    Role.GRAD_NORM: "grad_norm",
    Role.GRAD_CLIP_FACTOR: "grad_clip_factor",
    Role.UPDATE_RATIO: "update_ratio",
    Role.ADAPTER_NORM: "adapter_norm",
    Role.EXAMPLES: "samples",
    Role.TOKENS: "trained_tokens",
    Role.GRAD_ACCUM: "gradient_accumulation_steps",
    Role.STEP_TIME: "timing/step_total_s",
    Role.RATIO_MEAN: "fb/loss/ratio/mean",
    Role.CLIPPED_RATIO_MEAN: "fb/loss/clip/clipped_ratio/mean",
    Role.CLIP_HIGH: "fb/loss/clip/high_fraction",
    Role.CLIP_LOW: "fb/loss/clip/low_fraction",
    Role.KL_POLICY: "fb/loss/kl_policy/mean",
    Role.KL_POLICY_K3: "fb/loss/kl_policy/k3/mean",
    Role.KL_REF: "fb/loss/kl_ref/mean",
}


def names(role: Role) -> tuple[str, ...]:
    """The names that play `role`, best first: the canonical name, then its listed aliases.

    Names reached only through a prefix or pattern rule are not listed (see `find_key`)."""
    name = ROLE_NAMES[role]
    listed = [k for table in (EXACT, SHOWN) for k, a in table.items()
              if a.canonical == name and a.transform is None]
    return (name, *listed)


def find_key(keys: Iterable[str], role: Role) -> str | None:
    """The key among `keys` that plays `role`, or None when none does.

    The canonical name wins, then a listed alias (in `names` order), then any key that
    the prefix and pattern rules map to the canonical name (the first in sorted order).
    A key whose values need a transform (e.g. `1 - x`) is not offered."""
    listed = names(role)
    rank = {n: i for i, n in enumerate(listed)}
    present = set(keys)
    best = min((k for k in present if k in rank), key=rank.__getitem__, default=None)
    if best is not None:
        return best
    name = listed[0]
    return next((k for k in sorted(present) if canonical(k) == (name, None)), None)
