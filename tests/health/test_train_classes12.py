"""Later in session 16 (E19), on the train split: a trigger series and a near miss for
each change to the RL rules.

- A mean completion length that returns to exactly its highest value on most steps has
  every completion of those steps stopped at one length, the token limit:
  `grpo.length_at_ceiling` (grpo_unsloth_llama31_recipes_stopped_27steps, 200 tokens on
  10 of 27 steps; grpo_unsloth_qwen3_4b_t4_truncated_100steps, 1846 tokens on 40 of 100),
  for runs whose limit is not among their settings.
- A step whose highest reward equals its lowest had every completion score the same:
  `grpo.reward_range_zero`, read from verl's `critic/rewards/max` and `min`
  (grpo_rllm_deepscaler_all_zero_score_issue: 0 at each of its 3 logged steps, where the
  gradient, carrying the KL term, is never 0).
"""

from __future__ import annotations

import math

from runwatch.metrics.aliases import health_name

from .helpers import evaluate, rule_ids
from .test_engine import OneStep, split_feed

LENGTHS_27 = [200.0, 168.7, 199.2, 199.7, 169.3, 200.0, 200.0, 188.2, 184.3, 200.0, 155.7,
              200.0, 200.0, 200.0, 187.7, 133.0, 200.0, 200.0, 178.0, 166.2, 193.7, 194.8,
              192.3, 118.2, 166.0, 200.0, 191.5]


def test_a_mean_length_back_at_its_highest_on_most_steps_is_at_the_limit() -> None:
    # grpo_unsloth_llama31_recipes_stopped_27steps's completion_length: exactly 200.0 on
    # 10 of its 27 steps, on 5 of 10 running by step 13. No rule read it on the engine
    # before (its settings name no token limit).
    found = evaluate("grpo", {}, {"mean_sampled_response_length": LENGTHS_27})
    hit = next(f for f in found if f.rule_id == "grpo.length_at_ceiling")
    assert hit.severity == "warning" and hit.first_step <= 12
    assert "exactly 200" in hit.message


def test_a_mean_length_at_its_highest_now_and_then_is_no_limit() -> None:
    # Near miss: a healthy run's mean length at its highest, 200, on 6 of 132 steps
    # (grpo_unsloth_llama31_8b_gsm8k_first132_window), never 3 of 10 running.
    lengths = [150.0 + 30.0 * ((7 * i) % 11) / 11 for i in range(132)]
    for i in (6, 19, 44, 51, 63, 90):
        lengths[i] = 200.0
    assert "grpo.length_at_ceiling" not in rule_ids(
        evaluate("grpo", {}, {"mean_sampled_response_length": lengths}))


def test_a_rising_length_that_sets_new_highs_is_no_limit() -> None:
    # Near miss: every point a new high (a length growing), no value repeated.
    lengths = [100.0 + 2.0 * i for i in range(40)]
    assert "grpo.length_at_ceiling" not in rule_ids(
        evaluate("grpo", {}, {"mean_sampled_response_length": lengths}))


def test_verl_reward_max_and_min_are_read() -> None:
    assert health_name("critic/rewards/max") == ("reward_max", None)
    assert health_name("critic/rewards/min") == ("reward_min", None)


def test_every_completion_scoring_alike_at_three_steps_is_found() -> None:
    # grpo_rllm_deepscaler_all_zero_score_issue: verl's console at steps 1, 4 and 7, every
    # score 0 (critic/rewards/max = min = 0), grad_norm 0.004-0.005 from the KL loss.
    # Nothing fired on the engine before.
    steps = [1, 4, 7]
    found = evaluate("grpo", {}, {"critic/rewards/max": (steps, [0.0, 0.0, 0.0]),
                                  "critic/rewards/min": (steps, [0.0, 0.0, 0.0]),
                                  "critic/rewards/mean": (steps, [0.0, 0.0, 0.0]),
                                  "actor/grad_norm": (steps, [0.004, 0.005, 0.004])})
    hit = next(f for f in found if f.rule_id == "grpo.reward_range_zero")
    assert hit.severity == "warning"


def test_completions_that_differ_are_no_zero_range() -> None:
    # Near miss: a verl batch whose scores span 0 to 1 at every step but two.
    steps = list(range(1, 11))
    top = [1.0] * 10
    top[2] = top[6] = 0.0
    found = evaluate("grpo", {}, {"critic/rewards/max": (steps, top),
                                  "critic/rewards/min": (steps, [0.0] * 10)})
    assert "grpo.reward_range_zero" not in rule_ids(found)


def _kl_windows(late: list[float]) -> dict[str, tuple[list[int], list[float]]]:
    """A KL to the reference logged at steps 1-77 (1e-4 rising to 0.02, a wobble of 30%)
    and again from step 473 on with `late`: two windows of a 500-step run."""
    early = [(0.0001 + 0.02 * i / 76) * (1 + 0.3 * math.sin(1.3 * i)) for i in range(77)]
    steps = list(range(1, 78)) + list(range(473, 473 + len(late)))
    return {"kl": (steps, early + late)}


def test_a_trend_starts_afresh_after_a_gap_longer_than_its_window() -> None:
    # grpo_unsloth_llama32_3b_csc422_windows (healthy): after 395 unlogged steps the KL is
    # 0.08-0.17 with no direction. On the engine before, grpo.kl_ref_growing read the rise
    # across the gap (0.02 -> 0.1) as growth within its window of 64 points and warned.
    late = [0.11 * (1 + 0.25 * math.sin(2.1 * i)) for i in range(28)]
    assert "grpo.kl_ref_growing" not in rule_ids(evaluate("grpo", {}, _kl_windows(late)))


def test_a_kl_that_keeps_growing_after_the_gap_is_found() -> None:
    # Near miss: the same gap, then a KL that climbs 0.1 -> 0.45 over 64 logged steps.
    late = [(0.1 + 0.0055 * i) * (1 + 0.05 * math.sin(2.1 * i)) for i in range(64)]
    assert "grpo.kl_ref_growing" in rule_ids(evaluate("grpo", {}, _kl_windows(late)))


def test_a_growth_that_ends_at_a_gap_says_how_much_it_grew() -> None:
    # grpo_gemma2_2b_gsm8k_cuda_lr1e5_1000_updates: windows of a 1,000-step log; the
    # KL grew to 0.94 by step 193, then the log jumps to step 980. The trend starts afresh
    # after the gap, and the finding open at it resolved reading the new trend's effect
    # (none yet): "did not change from step 5 to 193" on the engine before.
    early = [0.5 * i / 76 * (1 + 0.05 * math.sin(1.3 * i)) for i in range(77)]
    late = [0.6 * (1 + 0.05 * math.sin(2.1 * i)) for i in range(28)]
    steps = list(range(1, 78)) + list(range(473, 501))
    found = evaluate("grpo", {}, {"kl": (steps, early + late)})
    (hit,) = [f for f in found if f.rule_id == "grpo.kl_ref_growing"]
    assert hit.status == "resolved" and hit.last_step <= 77
    assert hit.evidence["effect"] > 0.1
    assert " rose " in hit.message


def test_a_growth_that_ends_at_a_gap_starts_where_it_does_live() -> None:
    # Read whole, the trend started afresh after the gap kept only its new stretch's
    # windows, so the finding open before the gap took a window start from the wrong
    # stretch: "from step 32" where a live run says "from step 5".
    early = [0.5 * i / 76 * (1 + 0.05 * math.sin(1.3 * i)) for i in range(77)]
    late = [0.6 * (1 + 0.05 * math.sin(2.1 * i)) for i in range(8)]
    series = {"kl": (list(range(1, 78)) + list(range(473, 481)), early + late)}
    whole = [f for f in evaluate("grpo", {}, series) if f.rule_id == "grpo.kl_ref_growing"]
    live = [f for f in split_feed("grpo", {}, series, OneStep())
            if f.rule_id == "grpo.kl_ref_growing"]
    assert [(f.first_step, f.message) for f in whole] == [
        (f.first_step, f.message) for f in live]
    assert whole[0].first_step < 10


def test_a_log_every_fifty_steps_is_no_gap() -> None:
    # Near miss: a KL logged every 50 steps that climbs 0 -> 1: its gaps are its stride.
    steps = [50 * (i + 1) for i in range(40)]
    kl = [0.025 * i * (1 + 0.05 * math.sin(2.1 * i)) for i in range(40)]
    assert "grpo.kl_ref_growing" in rule_ids(evaluate("grpo", {}, {"kl": (steps, kl)}))
