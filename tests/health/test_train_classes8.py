"""Session 15 (E14), on the train split: a trigger series and a near miss for each change
to `rl.no_progress`, the RL rule that says a reward is not improving.

- A reward flat while the learning rate still warms up is no warning
  (grpo_levelforge_tool_env_62steps, healthy: flat over steps 1-40 while the learning
  rate climbs 0 -> 5e-6 over 50 steps, then rising).
- A reward whose two halves' medians barely differ but whose trend through every point
  rises is no warning (grpo_incident_ops_openenv_rewards, healthy: a reward that swings
  between -1.5 and 1.8 a step and climbs from its first steps).
- A log that starts far from step 0 does not show the run's start, so a flat reward there
  is info (grpo_verl_finqa_search_agent_150steps, healthy: an export from step 51).
- A share of the groups a loop filtered (`train/fraction_filtered`) is the zero-variance
  share (grpo_verl_polaris_cs224r_three_windows, reward_zero_variance).
- A loss at exactly 0 is not "not falling" (sft_lora_one_batch_1000ep, loss_zero: 0.0 at
  every log; loss.zero reports it).
- A validation statistic over the N samples of each held-out prompt (`…/mean@1`) is no
  training reward (grpo_verl_polaris_cs224r_three_windows's `mean_accuracies/…`), and
  verl's core validation metric is read with a data source that holds a slash
  (`val-core/openai/gsm8k/reward/mean@1`, ppo_verl_gsm8k_qwen7b_resumed_sampled).
"""

from __future__ import annotations

import math

from runwatch.metrics.aliases import health_name

from .helpers import evaluate

PHI = (math.sqrt(5) - 1) / 2


def _severities(series: dict[str, object]) -> list[str]:
    return [f.severity for f in evaluate("grpo", {}, series) if f.rule_id == "rl.no_progress"]


def _flat(n: int) -> list[float]:
    """A reward flat at 0.5 with a wobble of ±0.1 a step."""
    return [0.5 + 0.1 * math.sin(1.7 * i) for i in range(n)]


def _warming(n: int, warmup: int) -> list[float]:
    """A learning rate rising linearly to 1e-6 over `warmup` logged steps, then held."""
    return [1e-6 * min(i + 1, warmup) / warmup for i in range(n)]


def test_a_reward_flat_while_the_learning_rate_warms_up_gives_no_warning() -> None:
    # 60 points, 44 of them logged while the rate still rises: 16 judged after warm-up.
    # On the engine before, a warning at 30 points.
    found = _severities({"reward_mean": _flat(60), "learning_rate": _warming(60, 45)})
    assert found == ["info"]


def test_a_hand_written_loops_lr_is_read_as_the_learning_rate() -> None:
    assert _severities({"reward_mean": _flat(60), "lr": _warming(60, 45)}) == ["info"]


def test_a_reward_flat_for_30_points_after_a_short_warm_up_warns() -> None:
    # Near miss: a warm-up of 10 points leaves 51 judged points.
    assert _severities({"reward_mean": _flat(60), "learning_rate": _warming(60, 10)}) == [
        "warning"]
    # and a constant rate is no warm-up at all
    assert _severities({"reward_mean": _flat(60), "learning_rate": [1e-6] * 60}) == [
        "warning"]


def _swinging(rise: float, n: int = 40) -> list[float]:
    """A reward rising by `rise` over `n` steps under a swing of ±1 a step (spread evenly
    over that range, a different value each step)."""
    return [rise * i / (n - 1) + 2 * ((i * PHI) % 1) - 1 for i in range(n)]


def test_a_reward_whose_trend_rises_beyond_its_noise_gives_no_warning() -> None:
    # The latest 20 points' median is 0.23 above the first 20's (one standard error is
    # 0.27), while the Theil-Sen trend through all 40 rises 0.42 (one error: 0.36).
    # On the engine before, a warning at 40 points.
    assert _severities({"reward_mean": _swinging(0.5)}) == ["info"]


def test_a_swinging_reward_with_no_trend_warns() -> None:
    # Near miss: the same swing with no rise.
    assert _severities({"reward_mean": _swinging(0.0)}) == ["warning"]


def test_a_flat_reward_in_a_window_of_a_longer_run_is_info() -> None:
    # Logged every step from step 500: the run's first 500 steps are not in the log.
    # On the engine before, a warning at 30 points.
    assert _severities({"reward_mean": (list(range(500, 560)), _flat(60))}) == ["info"]


def test_a_flat_reward_logged_from_the_runs_start_warns() -> None:
    # Near misses: the same reward from step 1, and logged every 10 steps from step 10.
    assert _severities({"reward_mean": (list(range(1, 61)), _flat(60))}) == ["warning"]
    assert _severities({"reward_mean": (list(range(10, 610, 10)), _flat(60))}) == [
        "warning"]


def _share(n: int = 28) -> list[float]:
    """A share of groups between 0.55 and 0.69 a step."""
    return [0.62 + 0.07 * math.sin(1.3 * i) for i in range(n)]


def test_a_share_of_filtered_groups_is_read_as_the_zero_variance_share() -> None:
    # grpo_verl_polaris_cs224r_three_windows logs `train/fraction_filtered`, which is 1 -
    # pass@8 (the groups all wrong) plus a whole number of 128ths (those all right) at
    # each of its 28 steps. On the engine before, the name was read as nothing.
    found = evaluate("grpo", {}, {"train/fraction_filtered": _share()})
    assert "grpo.zero_variance" in {f.rule_id for f in found}


def test_a_share_filtered_for_another_reason_is_not() -> None:
    # Near miss: groups filtered for their age or length are no zero-spread groups.
    for name in ("train/fraction_filtered_stale", "train/overlong_filtered_ratio"):
        found = evaluate("grpo", {}, {name: _share()})
        assert "grpo.zero_variance" not in {f.rule_id for f in found}


def test_a_loss_at_exactly_zero_is_not_a_loss_that_does_not_fall() -> None:
    # On the engine before, loss.stuck and sft.loss_not_falling warned beside loss.zero.
    found = {f.rule_id for f in evaluate("sft", {}, {"loss": [0.0] * 60})}
    assert found == {"loss.zero"}


def test_a_loss_flat_above_zero_does_not_fall() -> None:
    # Near miss: the same flat loss at 0.5.
    found = {f.rule_id for f in evaluate("sft", {}, {"loss": [0.5] * 60})}
    assert {"loss.stuck", "sft.loss_not_falling"} <= found


def test_a_statistic_over_each_held_out_prompts_samples_is_no_training_reward() -> None:
    # On the engine before, read as reward_mean by its words (rl.no_progress then left
    # the run's training score for two validation points).
    assert health_name("mean_accuracies/polaris/reward/mean@1")[0] != "reward_mean"


def test_the_same_name_without_samples_per_prompt_is_a_reward() -> None:
    # Near miss.
    assert health_name("mean_accuracies/polaris/reward/mean")[0] == "reward_mean"


def test_verls_core_validation_metric_may_name_a_data_source_with_a_slash() -> None:
    # On the engine before, `openai/gsm8k` did not match the pattern.
    assert health_name("val-core/openai/gsm8k/reward/mean@1")[0] == "val/accuracy"
    assert health_name("val-core/gsm8k/acc/mean@16")[0] == "val/accuracy"
    # Near miss: not the core metric.
    assert health_name("val-aux/openai/gsm8k/reward/std@4")[0] != "val/accuracy"
