"""What made a class of pathology invisible, or a healthy run warn, on the corpus's train
split once round 10 joined it (session 12), by class: a trigger series and a near miss each.

- One group a step: a share of groups without a spread that is only ever 0 or 1 counts
  groups, not steps; grpo.no_signal needs most of them.
- A DPO preference saturated short of a loss at 0: every pair preferred with the loss
  under 0.1, log after log (or, with no accuracy logged, the loss alone).
- A loss with no noise in a run of a few steps is left to loss.stuck's 50-step wait (a
  model at chance in its warm-up looks the same).
- Groups without a spread counted, not shared: a loop that logs how many groups it
  filtered out and how many it kept is judged by the filtered ones' share.
"""

from __future__ import annotations

from runwatch.health.engine import Engine

from .helpers import evaluate, rule_ids, to_batch


def test_one_group_a_step_without_a_spread_on_4_of_10_steps_is_no_signal_lost() -> None:
    # A run of one prompt a step logs frac_reward_zero_std as 0 or 1 (that group's
    # verdict): 4 steps in 10 at 1 is 40% of its groups, and the other 60% train
    # (grpo_levelforge_tool_env_62steps, healthy, warned). Most of them at 1 is no signal.
    healthy = [0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0] * 3
    assert "grpo.no_signal" not in rule_ids(
        evaluate("grpo", {}, {"zero_variance_skip_ratio": healthy}))
    flat = [1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0] * 3
    assert "grpo.no_signal" in rule_ids(evaluate("grpo", {}, {"zero_variance_skip_ratio": flat}))
    # Many groups a step: 4 steps in 10 with none of them spread is still no signal, and
    # so is a run that turns from one group a step to many.
    many = [0.25, 1.0, 0.5, 1.0, 1.0, 0.25, 0.0, 1.0, 0.5, 0.0] * 3
    assert "grpo.no_signal" in rule_ids(evaluate("grpo", {}, {"zero_variance_skip_ratio": many}))
    engine, found = Engine("grpo"), set()
    for step, value in enumerate(healthy[:10] + many):
        found |= rule_ids(engine.feed(to_batch({"zero_variance_skip_ratio": ([step], [value])})))
    assert "grpo.no_signal" in found


def test_a_dpo_loss_under_a_tenth_log_after_log_is_saturation_with_or_without_accuracy() -> None:
    # dpo_llama32_1b_padded_heavy_5ep: accuracy 1.0 from step 220, the loss 0.094 at 710
    # and 0.023 at 1000, never under 0.01; dpo_zephyr7b_beta_three_epochs: a model card's
    # table with no train accuracy, the loss 0.005-0.022 over its third epoch.
    loss = [0.69, 0.5, 0.3, 0.2] + [0.098 - 0.006 * i for i in range(12)]
    found = evaluate("dpo", {}, {"loss": loss, "preference_accuracy": [0.6, 0.8, 1.0, 0.9]
                                 + [1.0] * 12})
    assert "dpo.preference_saturated" in rule_ids(found)
    assert "dpo.preference_saturated" in rule_ids(evaluate("dpo", {}, {"loss": loss}))
    # Near misses: a loss that spikes back up between zeros (dpo_beta_dpo_loss_spikes'
    # exact zeros between 0.35s and spikes), one below 0 (no preference loss), and an
    # accuracy logged beside it that is not 1.
    spiky = [0.35, 0.0, 0.0, 0.0, 0.0, 0.74, 0.0, 0.35] * 4
    assert "dpo.preference_saturated" not in rule_ids(evaluate("dpo", {}, {"loss": spiky}))
    below = [-0.5 - 0.1 * i for i in range(20)]
    assert "dpo.preference_saturated" not in rule_ids(evaluate("dpo", {}, {"loss": below}))
    found = evaluate("dpo", {}, {"loss": [0.0] * 20, "preference_accuracy": [0.0] * 20})
    assert "dpo.preference_saturated" not in rule_ids(found)


def test_a_loop_that_counts_the_groups_it_filtered_is_judged_by_their_share() -> None:
    # grpo_tinker_ctxdistill_reward_only logs only train/groups_filtered (28-31) and
    # train/groups_kept (1-4) of 32 groups a step: most groups without a spread.
    filtered = [30.0, 31.0, 29.0, 31.0, 28.0, 31.0, 31.0, 30.0, 31.0, 31.0, 29.0, 31.0]
    series = {"train/groups_filtered": filtered,
              "train/groups_kept": [32.0 - f for f in filtered]}
    assert "grpo.zero_variance" in rule_ids(evaluate("grpo", {}, series))
    # Near miss: a loop that filters a third of its groups; and groups dropped for their
    # age, which are not groups without a spread.
    third = {"train/groups_filtered": [10.0, 12.0, 11.0] * 4,
             "train/groups_kept": [22.0, 20.0, 21.0] * 4}
    assert "grpo.zero_variance" not in rule_ids(evaluate("grpo", {}, third))
    stale = {"groups_dropped_stale": filtered, "train/groups_kept": [32.0 - f for f in filtered]}
    assert "grpo.zero_variance" not in rule_ids(evaluate("grpo", {}, stale))



def test_a_loss_at_chance_through_a_warm_up_is_not_stuck() -> None:
    # sft_medllm_small_real_lora_8ep (8 points at 10.735 +- 0.001, one step an epoch) is
    # left missed: 8 points over 8 steps are also a model at chance in its learning-rate
    # warm-up (a pretraining run from scratch, or a DPO run at ln 2), whose loss has no
    # batch noise yet. Judging them without the 50-step wait was tried and withdrawn.
    chance = [10.7355, 10.7350, 10.7342, 10.7337, 10.7334, 10.7348, 10.7354, 10.7357,
              10.7351, 10.7340, 10.72, 10.69, 10.61, 10.5, 10.3, 10.0]
    assert "loss.stuck" not in rule_ids(evaluate("sft", {}, {"loss": chance}))
    dpo = [0.6931, 0.6931, 0.6930, 0.6932, 0.6927, 0.6924, 0.6920, 0.6915, 0.690, 0.688,
           0.685, 0.681, 0.676, 0.670, 0.66, 0.65]
    assert "loss.stuck" not in rule_ids(evaluate("dpo", {}, {"loss": dpo}))
    # The same 8 points logged every 10 steps are past any warm-up: stuck.
    steps = [10 * (i + 1) for i in range(8)]
    assert "loss.stuck" in rule_ids(evaluate("sft", {}, {"loss": (steps, chance[:8])}))
