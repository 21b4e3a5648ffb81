"""Which of a run's keys plays a role: the canonical name first, then aliases."""

from __future__ import annotations

import pytest

from runwatch.metrics import Alias, Role, find_key, names
from runwatch.metrics.aliases import EXACT, resolve


def test_canonical_name_wins_over_aliases() -> None:
    assert find_key(["train_loss", "loss", "train/loss"], Role.TRAIN_LOSS) == "loss"
    assert find_key(["reward", "reward_mean"], Role.REWARD) == "reward_mean"


def test_listed_alias_wins_over_prefixed_name() -> None:
    assert find_key(["train/loss", "train_loss"], Role.TRAIN_LOSS) == "train_loss"


def test_prefix_rules_reach_the_role() -> None:
    assert find_key(["train/loss", "step"], Role.TRAIN_LOSS) == "train/loss"
    assert find_key(["eval/loss"], Role.EVAL_LOSS) == "eval/loss"
    assert find_key(["train/learning_rate"], Role.LEARNING_RATE) == "train/learning_rate"


def test_framework_aliases_and_patterns_play_the_role() -> None:
    assert find_key(["actor/grad_norm"], Role.GRAD_NORM) == "actor/grad_norm"
    assert find_key(["val-core/gsm8k/acc/mean@1"], Role.VAL_ACCURACY) == "val-core/gsm8k/acc/mean@1"


def test_no_key_plays_the_role() -> None:
    assert find_key(["loss", "accuracy"], Role.REWARD) is None
    assert find_key([], Role.TRAIN_LOSS) is None


def test_an_alias_that_needs_a_transform_plays_no_role(monkeypatch: pytest.MonkeyPatch) -> None:
    # Shown as is, a complement (like tinker-cookbook's frac_mixed) would lie.
    monkeypatch.setitem(EXACT, "inverted_loss", Alias("loss", "a test", "1 - x"))
    names.cache_clear()
    resolve.cache_clear()
    try:
        assert "inverted_loss" not in names(Role.TRAIN_LOSS)
        assert find_key(["inverted_loss"], Role.TRAIN_LOSS) is None
    finally:
        names.cache_clear()
        resolve.cache_clear()


def test_setting_names_for_grad_accum() -> None:
    assert names(Role.GRAD_ACCUM)[0] == "gradient_accumulation_steps"
    assert "grad_accum" in names(Role.GRAD_ACCUM)
