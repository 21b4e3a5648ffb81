"""Each pathology preset moves its metric in the direction docs/recipes.md claims."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runwatch.recipes.grpo.pathologies import PATHOLOGIES

from .conftest import grpo, series


def _mean(xs: list[float]) -> float:
    assert xs, "metric never recorded"
    return sum(xs) / len(xs)


@pytest.fixture(scope="module")
def default(tmp_path_factory: pytest.TempPathFactory, sft_run: Path) -> list[dict[str, Any]]:
    return grpo(tmp_path_factory.mktemp("default"), "max_steps=8", init=sft_run)


def test_every_preset_is_tested_here() -> None:
    tested = {"high_lr", "stale", "reward_hack", "tight_budget", "too_hard", "too_easy"}
    assert set(PATHOLOGIES) == tested


def test_high_lr_clips_and_moves_the_ratio(tmp_path: Path, sft_run: Path,
                                           default: list[dict[str, Any]]) -> None:
    bad = grpo(tmp_path, "pathology=high_lr", "max_steps=8", init=sft_run)

    def clip(lines: list[dict[str, Any]]) -> float:
        return _mean(series(lines, "fb/loss/clip/high_fraction")) + \
            _mean(series(lines, "fb/loss/clip/low_fraction"))

    def drift(lines: list[dict[str, Any]]) -> float:
        return _mean([abs(r - 1) for r in series(lines, "fb/loss/ratio/mean")])

    assert clip(bad) > clip(default) + 0.01
    assert drift(bad) > drift(default) + 0.01


def test_stale_rollouts_make_the_ratio_drift(tmp_path: Path, sft_run: Path,
                                             default: list[dict[str, Any]]) -> None:
    bad = grpo(tmp_path, "pathology=stale", "max_steps=8", init=sft_run)
    assert _mean(series(bad, "async/staleness_mean")) > 0
    assert max(series(bad, "async/staleness_max")) <= 4
    kl = _mean(series(bad, "fb/loss/kl_policy/k3/mean"))
    assert kl > _mean(series(default, "fb/loss/kl_policy/k3/mean")) + 1e-4
    drift = _mean([abs(r - 1) for r in series(bad, "fb/loss/ratio/mean")])
    assert drift > 1e-3 > _mean([abs(r - 1) for r in series(default, "fb/loss/ratio/mean")])


def test_hackable_reward_rises_while_validation_falls_and_length_climbs(
        tmp_path: Path, sft_run: Path, default: list[dict[str, Any]]) -> None:
    bad = grpo(tmp_path, "pathology=reward_hack", "max_steps=12", "val_interval=12",
               init=sft_run)
    lengths = series(bad, "mean_sampled_response_length")
    assert _mean(lengths[-3:]) > _mean(lengths[:3])
    assert _mean(lengths[-3:]) > _mean(series(default, "mean_sampled_response_length")[-3:])
    acc = series(bad, "accuracy")
    assert _mean(acc[-3:]) > _mean(acc[:3])
    val = series(bad, "val/accuracy")
    assert val[-1] < val[0]


def test_tight_budget_truncates(tmp_path: Path, sft_run: Path,
                                default: list[dict[str, Any]]) -> None:
    bad = grpo(tmp_path, "pathology=tight_budget", "max_steps=3", init=sft_run)
    assert _mean(series(bad, "truncated_ratio")) > 0.9
    assert _mean(series(default, "truncated_ratio")) < 0.5


def test_too_hard_skips_groups_that_all_fail(tmp_path: Path, sft_run: Path,
                                             default: list[dict[str, Any]]) -> None:
    bad = grpo(tmp_path, "pathology=too_hard", "max_steps=3", init=sft_run)
    zero = _mean(series(bad, "zero_variance_skip_ratio"))
    assert zero > _mean(series(default, "zero_variance_skip_ratio"))
    assert zero > 0.5
    assert _mean(series(bad, "identical_nonzero_reward_skip_ratio")) < 0.1


def test_too_easy_skips_groups_that_all_succeed(tmp_path: Path, sft_run: Path,
                                                default: list[dict[str, Any]]) -> None:
    bad = grpo(tmp_path, "pathology=too_easy", "max_steps=3", init=sft_run)
    zero = _mean(series(bad, "zero_variance_skip_ratio"))
    assert zero > _mean(series(default, "zero_variance_skip_ratio"))
    assert _mean(series(bad, "identical_nonzero_reward_skip_ratio")) > 0.5
