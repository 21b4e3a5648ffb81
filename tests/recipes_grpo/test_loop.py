"""Whole GRPO runs, in-process: on-policy ratios, staleness bounds, metric ranges, samples."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .conftest import grpo, series

UNIT = (0.0, 1.0)
NONNEG = (0.0, math.inf)
ANY = (-math.inf, math.inf)

# Where every recorded metric must lie (the "valid range" of each).
RANGES: dict[str, tuple[float, float]] = {
    "fb/loss/ratio/mean": (0.0, math.inf), "fb/loss/kl_policy/mean": ANY,
    "fb/loss/kl_policy/k3/mean": NONNEG, "fb/loss/clip/high_fraction": UNIT,
    "fb/loss/clip/low_fraction": UNIT, "fb/loss/clip/clipped_ratio/mean": (0.0, math.inf),
    "fb/loss/kl_ref/mean": NONNEG, "fb/loss/aggregate/active_fraction": UNIT, "loss": ANY,
    "accuracy": UNIT, "reward_mean": ANY, "reward_std": NONNEG,
    "zero_variance_skip_ratio": UNIT, "identical_nonzero_reward_skip_ratio": UNIT,
    "truncated_ratio": UNIT, "mean_sampled_response_length": NONNEG,
    "mean_response_budget": NONNEG, "mean_trainable_response_length": NONNEG,
    "post_budget_clip_ratio": UNIT, "overlong_penalized_ratio": UNIT,
    "mean_overlong_penalty": (-math.inf, 0.0), "completion_advantage_std": NONNEG,
    "mean_logprob": (-math.inf, 0.0), "learning_rate": NONNEG, "grad_norm": NONNEG,
    "grad_clip_factor": (0.0, 1.0), "adapter_norm": NONNEG, "update_ratio": NONNEG,
    "dynamic_sampling/attempts": NONNEG, "dynamic_sampling/total_groups_sampled": NONNEG,
    "dynamic_sampling/kept_groups": NONNEG, "async/accepted_groups": NONNEG,
    "async/staleness_mean": NONNEG, "async/staleness_max": NONNEG,
    "async/dropped_stale_groups": NONNEG, "async/dropped_zero_variance_groups": NONNEG,
    "async/queue_depth": NONNEG, "async/train_wait_s": NONNEG,
    "async/mid_rollout_drift_ratio": UNIT, "policy/trainer_step": NONNEG,
    "policy/target_weights_version": NONNEG, "policy/applied_weights_version": NONNEG,
    "val/accuracy": UNIT, "val/reward_mean": ANY, "val/mean_response_length": NONNEG,
    "val/num_turns_mean": NONNEG, "val/terminated_ratio": UNIT, "val/truncated_ratio": UNIT,
    "val/parse_failure_ratio": UNIT, "val/context_overflow_ratio": UNIT,
    "num_turns_mean": NONNEG, "terminated_ratio": UNIT, "parse_failure_ratio": UNIT,
    "context_overflow_ratio": UNIT,
}


def assert_in_range(lines: list[dict[str, Any]]) -> None:
    for line in lines:
        for key, value in line.items():
            if key in ("step", "ts", "seq"):
                continue
            if key.startswith(("timing/", "memory/")):  # seconds and bytes
                assert value >= 0, key
                continue
            assert key in RANGES, f"metric {key} has no documented range"
            lo, hi = RANGES[key]
            assert math.isfinite(value) and lo <= value <= hi, (key, value, line["step"])


def test_on_policy_every_step_has_ratio_one_and_no_clipping(tmp_path: Path,
                                                            sft_run: Path) -> None:
    lines = grpo(tmp_path, "max_steps=5", init=sft_run)
    ratios = series(lines, "fb/loss/ratio/mean")
    assert len(ratios) >= 3
    assert all(abs(r - 1.0) < 1e-4 for r in ratios)
    assert all(v == 0 for v in series(lines, "fb/loss/clip/high_fraction"))
    assert all(v == 0 for v in series(lines, "fb/loss/clip/low_fraction"))
    assert_in_range(lines)
    trainer_steps = series(lines, "policy/trainer_step")
    assert trainer_steps == sorted(trainer_steps) and trainer_steps[-1] > 0


def test_single_turn_metrics_in_range_with_kl_penalty_and_dynamic_sampling(
        tmp_path: Path, sft_run: Path) -> None:
    lines = grpo(tmp_path, "beta=0.05", "max_sampling_attempts=3", "num_minibatches=2",
                 "overlong_penalty_factor=0.5", "max_sample_tokens=5",
                 "overlong_buffer_tokens=2", "lr_schedule=linear", init=sft_run)
    assert_in_range(lines)
    train = [line for line in lines if "learning_rate" in line]
    for key in ("fb/loss/kl_ref/mean", "dynamic_sampling/attempts",
                "dynamic_sampling/total_groups_sampled", "dynamic_sampling/kept_groups",
                "mean_response_budget", "overlong_penalized_ratio", "mean_logprob",
                "grad_norm", "grad_clip_factor", "adapter_norm", "update_ratio",
                "timing/step_total_s"):
        assert any(key in line for line in train), key
    for line in train:
        assert line["dynamic_sampling/kept_groups"] <= 4
        assert line["dynamic_sampling/attempts"] <= 3
    # An answer of 3 digits + end reaches the penalty ramp of a 5-token budget.
    assert max(series(lines, "overlong_penalized_ratio")) > 0
    assert series(lines, "val/accuracy")


def test_async_staleness_never_exceeds_the_budget(tmp_path: Path, sft_run: Path) -> None:
    for k in (0, 2):
        lines = grpo(tmp_path / f"k{k}", f"max_steps_off_policy={k}", "groups_in_flight=8",
                     f"weights_sync_interval={k + 1}", "max_steps=8", init=sft_run)
        assert_in_range(lines)
        train = [line for line in lines if "learning_rate" in line]
        assert len(train) == 8
        assert all(line["async/staleness_max"] <= k for line in train)
        assert all("policy/target_weights_version" in line for line in train)
        assert "dynamic_sampling/attempts" not in train[0]
        for line in train:
            assert line["policy/applied_weights_version"] <= \
                line["policy/target_weights_version"] <= line["policy/trainer_step"]


def test_multi_turn_metrics_and_episode_samples(tmp_path: Path) -> None:
    lines = grpo(tmp_path, "env=guess_number", "max_turns=3", "guess_max=9",
                 "max_sample_tokens=3", "export_samples=true", "max_steps=2")
    assert_in_range(lines)
    train = [line for line in lines if "learning_rate" in line]
    for key in ("num_turns_mean", "terminated_ratio", "truncated_ratio", "parse_failure_ratio",
                "context_overflow_ratio"):
        assert key in train[0]
    assert "mean_response_budget" not in train[0]
    for key in ("val/reward_mean", "val/num_turns_mean", "val/terminated_ratio"):
        assert key in lines[0]
    episodes = json.loads((tmp_path / "grpo" / "step_0000_episodes.json").read_text())
    assert episodes["kind"] == "episodes" and episodes["samples"][0]["turns"]
    assert (tmp_path / "grpo" / "val_0000_episodes.json").exists()


def test_exported_completions_carry_what_the_rollouts_view_needs(tmp_path: Path,
                                                                 sft_run: Path) -> None:
    grpo(tmp_path, "export_samples=true", "max_steps=1", init=sft_run)
    run = tmp_path / "grpo"
    data = json.loads((run / "step_0000_completions.json").read_text())
    sample = data["samples"][0]
    for key in ("prompt", "completion", "reward", "reward_terms", "advantage", "group",
                "truncated", "prompt_tokens", "completion_tokens"):
        assert key in sample
    assert len(data["samples"]) == 4 * 6
    assert (run / "val_0000_completions.json").exists()
    assert (run / "val_0001_completions.json").exists()
