"""Per-rule series: one that must trigger the rule and a near miss that must not.

Each case is (method, settings, series) where series maps a metric name to its values
at steps 0, 1, 2, … or to explicit (steps, values) for sparse validation metrics. A rule
that waits for the run's end (detector `whole_window`) is judged on a finished run.
"""

from __future__ import annotations

import math
from typing import Any

Series = dict[str, Any]
Case = tuple[str, dict[str, float], Series]


def const(value: float, n: int = 30) -> list[float]:
    return [value] * n


def ramp(start: float, slope: float, n: int) -> list[float]:
    return [start + slope * i for i in range(n)]


def every(interval: int, values: list[float]) -> tuple[list[int], list[float]]:
    return [interval * (k + 1) for k in range(len(values))], values


def spike(base: float, peak: float, n: int = 30) -> list[float]:
    return [base] * n + [peak] + [base] * 5


def mostly(value: float, other: float, hits: int, n: int = 30) -> list[float]:
    """`value` on `hits` of every 10 points, `other` elsewhere."""
    return [value if i % 10 < hits else other for i in range(n)]


def settled() -> list[float]:
    """A loss that falls and settles at 1.0, wobbling by 0.0004 (an LSTM's epoch means)."""
    return [2.0 * 0.9 ** i + 1.0 for i in range(20)] + [1.0 + 0.0004 * (-1) ** i
                                                         for i in range(30)]


NO: dict[str, float] = {}

# rule id -> (trigger case, near-miss case)
CASES: dict[str, tuple[Case, Case]] = {
    "grpo.ratio_drift": (
        ("grpo", NO, {"fb/loss/ratio/mean": const(1.0, 10) + const(1.2, 20)}),
        ("grpo", NO, {"fb/loss/ratio/mean": const(1.0, 10) + mostly(1.2, 1.0, 7, 20)}),
    ),
    "grpo.ratio_extreme": (
        ("grpo", NO, {"fb/loss/ratio/mean": [*const(1.0, 5), 4.8, *const(1.0, 5)]}),
        ("grpo", NO, {"fb/loss/ratio/mean": [*const(1.0, 5), 1.3, 0.75, *const(1.0, 5)]}),
    ),
    "grpo.ratio_growth": (
        ("grpo", NO, {"fb/loss/ratio/mean": ramp(1.0, 0.003, 128)}),
        ("grpo", NO, {"fb/loss/ratio/mean": ramp(1.0, 0.0005, 128)}),
    ),
    "grpo.kl_policy_spike": (
        ("grpo", NO, {"fb/loss/kl_policy/mean": spike(0.001, 0.05)}),
        ("grpo", NO, {"fb/loss/kl_policy/mean": spike(0.001, 0.009)}),
    ),
    "grpo.clip_high": (
        ("grpo", NO, {"fb/loss/clip/high_fraction": const(0.15)}),
        ("grpo", NO, {"fb/loss/clip/high_fraction": const(0.09)}),
    ),
    "grpo.clip_low": (
        ("grpo", NO, {"fb/loss/clip/low_fraction": const(0.15)}),
        ("grpo", NO, {"fb/loss/clip/low_fraction": mostly(0.15, 0.01, 7)}),
    ),
    "grpo.clip_rising_plateau": (
        ("grpo", NO, {"accuracy": const(0.5, 200),
                      "fb/loss/clip/high_fraction": ramp(0.005, 0.0003, 200)}),
        ("grpo", NO, {"accuracy": ramp(0.3, 0.002, 200),
                      "fb/loss/clip/high_fraction": ramp(0.005, 0.0003, 200)}),
    ),
    "grpo.kl_ref_spike": (
        ("grpo", NO, {"fb/loss/kl_ref/mean": spike(0.02, 0.6)}),
        # A KL that starts at 0 and rises once to 0.15: growth, not a spike.
        ("grpo", NO, {"fb/loss/kl_ref/mean": const(0.0, 10) + ramp(0.0, 0.015, 10)
                      + const(0.15, 20)}),
    ),
    "grpo.active_fraction_drop": (
        ("grpo", NO, {"fb/loss/aggregate/active_fraction": spike(0.6, 0.2)}),
        ("grpo", NO, {"fb/loss/aggregate/active_fraction": spike(0.6, 0.35)}),
    ),
    "grpo.zero_variance": (
        ("grpo", NO, {"zero_variance_skip_ratio": const(0.6)}),
        ("grpo", NO, {"zero_variance_skip_ratio": const(0.45)}),
    ),
    "grpo.saturated_groups": (
        ("grpo", NO, {"identical_nonzero_reward_skip_ratio": const(0.4)}),
        ("grpo", NO, {"identical_nonzero_reward_skip_ratio": const(0.25)}),
    ),
    "grpo.truncation": (
        ("grpo", NO, {"truncated_ratio": const(0.4)}),
        ("grpo", NO, {"truncated_ratio": const(0.25)}),
    ),
    "grpo.length_at_budget": (
        ("grpo", {"max_sample_tokens": 512}, {"mean_sampled_response_length": const(500)}),
        ("grpo", {"max_sample_tokens": 512}, {"mean_sampled_response_length": const(400)}),
    ),
    "grpo.budget_squeezed": (
        ("grpo", {"max_sample_tokens": 512}, {"mean_response_budget": const(300)}),
        ("grpo", {"max_sample_tokens": 512}, {"mean_response_budget": const(450)}),
    ),
    "grpo.post_budget_clip": (
        ("grpo", NO, {"post_budget_clip_ratio": const(0.1)}),
        ("grpo", NO, {"post_budget_clip_ratio": const(0.03)}),
    ),
    "grpo.overlong_penalty": (
        ("grpo", NO, {"mean_overlong_penalty": const(-0.3)}),
        ("grpo", NO, {"mean_overlong_penalty": const(-0.1)}),
    ),
    "grpo.reward_below_accuracy": (
        ("grpo", NO, {"accuracy": const(0.6), "reward_mean": const(0.4)}),
        ("grpo", NO, {"accuracy": const(0.6), "reward_mean": const(0.55)}),
    ),
    "grpo.advantage_collapse": (
        ("grpo", NO, {"completion_advantage_std": const(0.001)}),
        ("grpo", NO, {"completion_advantage_std": const(0.05)}),
    ),
    "grpo.logprob_falling": (
        ("grpo", NO, {"mean_logprob": ramp(-0.5, -0.01, 128)}),
        ("grpo", NO, {"mean_logprob": ramp(-0.5, -0.001, 128)}),
    ),
    "grpo.sampling_attempts_cap": (
        ("grpo", {"max_sampling_attempts": 4}, {"dynamic_sampling/attempts": const(4)}),
        ("grpo", {"max_sampling_attempts": 4}, {"dynamic_sampling/attempts": const(3)}),
    ),
    "grpo.sampling_short_batch": (
        ("grpo", {"batch_size": 32}, {"dynamic_sampling/kept_groups": const(28)}),
        ("grpo", {"batch_size": 32}, {"dynamic_sampling/kept_groups": const(32)}),
    ),
    "grpo.reward_hacking": (
        ("grpo", NO, {"accuracy": ramp(0.3, 0.004, 200),
                      "val/accuracy": every(20, ramp(0.6, -0.02, 9))}),
        ("grpo", NO, {"accuracy": ramp(0.3, 0.004, 200),
                      "val/accuracy": every(20, ramp(0.6, 0.005, 9))}),
    ),
    "grpo.length_runaway": (
        ("grpo", NO, {"val/mean_response_length": every(10, [200 * 1.1**k for k in range(10)])}),
        ("grpo", NO, {"val/mean_response_length": every(10, ramp(200, 2, 10))}),
    ),
    "multiturn.unfinished_episodes": (
        ("grpo", NO, {"terminated_ratio": const(0.3), "truncated_ratio": const(0.5)}),
        ("grpo", NO, {"terminated_ratio": const(0.7), "truncated_ratio": const(0.5)}),
    ),
    "multiturn.parse_failures_rising": (
        ("grpo", NO, {"parse_failure_ratio": ramp(0.01, 0.003, 64)}),
        ("grpo", NO, {"parse_failure_ratio": ramp(0.01, 0.0005, 64)}),
    ),
    "multiturn.context_overflow": (
        ("grpo", NO, {"context_overflow_ratio": const(0.2)}),
        ("grpo", NO, {"context_overflow_ratio": const(0.05)}),
    ),
    "async.dropped_stale": (
        ("grpo", NO, {"async/dropped_stale_groups": const(2)}),
        ("grpo", NO, {"async/dropped_stale_groups": mostly(2, 0, 4)}),
    ),
    "async.short_steps": (
        ("grpo", {"batch_size": 32}, {"async/accepted_groups": const(20)}),
        ("grpo", {"batch_size": 32}, {"async/accepted_groups": const(32)}),
    ),
    "async.staleness_over_budget": (
        ("grpo", {"max_steps_off_policy": 2}, {"async/staleness_max": [*const(2), 3.0]}),
        ("grpo", {"max_steps_off_policy": 2}, {"async/staleness_max": const(2)}),
    ),
    "async.zero_variance_drops": (
        ("grpo", {"batch_size": 8, "max_sampling_attempts": 2},
         {"async/dropped_zero_variance_groups": const(16)}),
        ("grpo", {"batch_size": 8, "max_sampling_attempts": 2},
         {"async/dropped_zero_variance_groups": const(10)}),
    ),
    "async.training_waits": (
        ("grpo", NO, {"async/train_wait_s": const(5.0), "async/queue_depth": const(0)}),
        ("grpo", NO, {"async/train_wait_s": const(5.0), "async/queue_depth": const(2)}),
    ),
    "async.collection_outruns": (
        ("grpo", {"groups_in_flight": 8}, {"async/queue_depth": const(8)}),
        ("grpo", {"groups_in_flight": 8}, {"async/queue_depth": const(6)}),
    ),
    "policy.weights_not_applied": (
        ("grpo", NO, {"policy/target_weights_version": ramp(3, 1, 30),
                      "policy/applied_weights_version": ramp(0, 1, 30)}),
        ("grpo", NO, {"policy/target_weights_version": ramp(1, 1, 30),
                      "policy/applied_weights_version": ramp(0, 1, 30)}),
    ),
    "policy.trainer_ahead": (
        ("grpo", NO, {"policy/trainer_step": ramp(4, 1, 30),
                      "policy/applied_weights_version": ramp(0, 1, 30)}),
        ("grpo", NO, {"policy/trainer_step": ramp(2, 1, 30),
                      "policy/applied_weights_version": ramp(0, 1, 30)}),
    ),
    "sft.loss_not_falling": (
        ("sft", NO, {"loss": [2.0 + 0.01 * (i % 3) for i in range(60)]}),
        ("sft", NO, {"loss": [2.0 * math.exp(-0.03 * i) for i in range(60)]}),
    ),
    "sft.plateau": (
        # A LoRA that barely moves the model: the training loss within its noise of 3.30
        # and the validation loss 1.8% lower after 50 steps, both logged every 5 steps.
        ("sft", NO, {"loss": every(5, [3.30 - 0.001 * i + 0.02 * math.sin(1.9 * i)
                                       for i in range(10)]),
                     "val/loss": every(5, [3.28 - 0.006 * i for i in range(10)])}),
        # A slow healthy run: the validation loss as flat, but the training loss 8% lower.
        ("sft", NO, {"loss": every(5, [3.30 - 0.03 * i + 0.02 * math.sin(1.9 * i)
                                       for i in range(10)]),
                     "val/loss": every(5, [3.28 - 0.006 * i for i in range(10)])}),
    ),
    "loss.excursion": (
        # A noisy loss near 7 climbs to 15-20 for 12 points and comes back.
        ("sft", NO, {"loss": [7 + 0.8 * math.sin(1.7 * i) for i in range(25)]
                     + [15 + 5 * math.sin(0.3 * i) for i in range(12)]
                     + [7 + 0.8 * math.sin(1.7 * i) for i in range(6)]}),
        # The same climb that stays up (a rising loss, not an excursion).
        ("sft", NO, {"loss": [7 + 0.8 * math.sin(1.7 * i) for i in range(25)]
                     + [15 + 5 * math.sin(0.3 * i) for i in range(18)]}),
    ),
    "sft.overfitting": (
        ("sft", NO, {"loss": ramp(2.0, -0.005, 200), "val/loss": every(20, ramp(1.5, 0.05, 9))}),
        ("sft", NO, {"loss": ramp(2.0, -0.005, 200), "val/loss": every(20, ramp(1.5, -0.03, 9))}),
    ),
    "dpo.loss_not_falling": (
        ("dpo", NO, {"loss": const(0.693, 60)}),
        ("dpo", NO, {"loss": [0.693 * math.exp(-0.02 * i) for i in range(60)]}),
    ),
    "dpo.preference_accuracy_low": (
        ("dpo", NO, {"val/preference_accuracy": every(10, const(0.5, 6))}),
        ("dpo", NO, {"val/preference_accuracy": every(10, [0.5, 0.5, *const(0.7, 4)])}),
    ),
    "dpo.margin_not_positive": (
        ("dpo", NO, {"val/mean_margin": every(10, const(-0.1, 6))}),
        ("dpo", NO, {"val/mean_margin": every(10, [-0.1, 0.0, *ramp(0.2, 0.2, 4)])}),
    ),
    "dpo.train_margin_not_positive": (
        # An ORPO run whose training margin stays just under 0 over 10 logs.
        ("dpo", NO, {"mean_margin": every(10, ramp(-0.021, 0.0006, 10))}),
        # A margin that starts at 0 and turns positive from the second log.
        ("dpo", NO, {"mean_margin": every(10, [0.0, *ramp(0.02, 0.02, 11)])}),
    ),
    "optim.clipping_every_step": (
        ("sft", NO, {"grad_clip_factor": const(0.5)}),
        ("sft", NO, {"grad_clip_factor": mostly(0.5, 1.0, 4)}),
    ),
    "optim.grad_norm_spike": (
        ("sft", NO, {"grad_norm": spike(1.0, 15.0)}),
        ("sft", NO, {"grad_norm": spike(1.0, 8.0)}),
    ),
    "optim.update_ratio_high": (
        ("sft", NO, {"update_ratio": const(0.2)}),
        ("sft", NO, {"update_ratio": const(0.05)}),
    ),
    "metric.non_finite": (
        ("sft", NO, {"loss": [1.0, 0.9, math.nan, 0.8], "grad_norm": [1.0, math.inf, 1.0, 1.0]}),
        ("sft", NO, {"loss": [1.0, 0.9, 0.85, 0.8], "grad_norm": [1.0, 1e30, 1.0, 1.0]}),
    ),
    "val.falling": (
        # A fall beyond its own noise (1.0, 0.69, 0.53, 0.72 falls by 1.5 of its own
        # jumps, which a held-out score over a few samples makes: session 12, noise_z).
        ("grpo", NO, {"val/accuracy": every(10, [1.0, 0.84, 0.71, 0.62, 0.5])}),
        ("grpo", NO, {"val/accuracy": every(10, [0.6, 0.62, 0.58, 0.61, 0.6, 0.59])}),
    ),
    "loss.implausible": (
        # An SFT run at learning rate 100 of a 47-token model: a uniform guess is 3.85 nats.
        ("sft", {"vocab_size": 47.0}, {"loss": [47768.0, 514506.0, 146162.0]}),
        # A loss above ln(vocab_size) at the start of a run from random weights, falling.
        ("sft", {"vocab_size": 47.0}, {"loss": [4.3, 4.0, 3.6, 3.2, 2.9]}),
    ),
    "val.collapsed": (
        # A GRPO run at 100x its learning rate: held-out accuracy 0.825, then 0 and 0.
        ("grpo", NO, {"val/accuracy": every(4, [0.825, 0.0, 0.0])}),
        # A noisy score swinging by a third, never half its best twice in a row.
        ("grpo", NO, {"val/accuracy": every(4, [0.6, 0.4, 0.6, 0.35, 0.55, 0.3, 0.6])}),
    ),
    "val.plateau": (
        ("grpo", NO, {"val/accuracy": every(10, [0.6 + 0.001 * (k % 2) for k in range(10)])}),
        ("grpo", NO, {"val/accuracy": every(10, ramp(0.3, 0.05, 10))}),
    ),
    "loss.spike": (
        ("sft", NO, {"loss": [*ramp(3.0, -0.02, 20), 3.1, *ramp(2.58, -0.02, 5)]}),
        # The same jump in a loss that moves that much every step anyway.
        ("sft", NO, {"loss": [2.0 + 0.3 * (-1) ** i for i in range(20)] + [2.6, 2.0, 2.3]}),
    ),
    "loss.above_max": (
        # A batch-of-one DPO run: 5 logs near ln 2, then a batch at 1.6.
        ("dpo", NO, {"loss": [0.693, 0.71, 0.66, 0.69, 0.64, 1.6, 0.6]}),
        # A falling loss whose one bad batch comes back to 1.8× its start, not twice.
        ("sft", NO, {"loss": [2.0, 1.7, 1.5, 1.4, 3.6, 1.3, 1.25]}),
    ),
    "loss.spike_isolated": (
        # A diffusion LM's per-epoch loss: 17.8 between 4.5 and 5.0, 4.7x the median of
        # the five epochs before it (other_diffusion_lm_sigmoid05_loss_spikes).
        ("sft", NO, {"loss": [7.89, 13.2, 16.09, 24.61, 4.8, 26.22, 3.42, 3.84, 3.83, 4.48,
                              17.77, 5.02, 5.61, 4.92, 3.43]}),
        # The same jump, but the point after it stays up: not a spike that came back.
        ("sft", NO, {"loss": [7.89, 13.2, 16.09, 24.61, 4.8, 26.22, 3.42, 3.84, 3.83, 4.48,
                              17.77, 6.2, 5.61, 4.92, 3.43]}),
    ),
    "loss.upturn": (
        # A per-epoch loss that settles, then turns up 1.5% over its last 16 epochs with
        # the small wobble of an LSTM's epoch means.
        ("sft", NO, {"loss": settled() + [1.0 + 0.001 * i + 0.0004 * (-1) ** i
                                          for i in range(1, 17)]}),
        # The same settled loss wandering about its low with no trend.
        ("sft", NO, {"loss": settled() + [1.0 + 0.0004 * (-1) ** i + 0.0001 * (i % 3)
                                          for i in range(1, 17)]}),
    ),
    "loss.rising": (
        ("sft", NO, {"loss": ramp(1.0, -0.03, 30) + ramp(0.1, 0.01, 30)}),
        ("sft", NO, {"loss": ramp(1.0, -0.03, 30) + ramp(0.1, 0.001, 30)}),
    ),
    "dpo.over_optimisation": (
        # TRL's β-scaled margin (runwatch's own `mean_margin` is in nats: its limit is 10/β,
        # test_dpo_margin_units.py)
        ("dpo", NO, {"rewards/margins": ramp(0.0, 0.5, 50)}),
        ("dpo", NO, {"rewards/margins": ramp(0.0, 0.08, 50)}),
    ),
    "rl.no_progress": (
        ("grpo", NO, {"reward_mean": [0.5 + 0.1 * math.sin(1.3 * i) for i in range(40)]}),
        # The same wobble, started where it rises: the early points gain too.
        ("grpo", NO, {"reward_mean": [0.3 + 0.02 * i + 0.1 * math.sin(1.3 * i + 4)
                                      for i in range(40)]}),
    ),
    "grpo.truncation_extreme": (
        ("grpo", NO, {"truncated_ratio": [0.91]}),
        ("grpo", NO, {"truncated_ratio": const(0.75, 5)}),
    ),
    "grpo.no_signal": (
        # No group with a spread on every other step (a TRL log's frac_reward_zero_std of
        # 1.0 between steps of 0.5 and 0): those steps learn nothing.
        ("grpo", NO, {"zero_variance_skip_ratio": [0.5, 1.0, 0.0, 1.0, 0.5, 1.0, 0.0, 1.0]}),
        # Three such steps in every ten, and 0.9 (some groups left) in between.
        ("grpo", NO, {"zero_variance_skip_ratio": mostly(1.0, 0.9, 3, 20)}),
    ),
    "dpo.loss_collapsed": (
        ("dpo", NO, {"loss": [0.69, 0.2, 0.0, 0.0], "preference_accuracy": [0.5, 0.9, 1.0, 1.0]}),
        ("dpo", NO, {"loss": [0.69, 0.2, 0.005, 0.004],
                     "preference_accuracy": [0.5, 0.9, 0.97, 0.98]}),
    ),
    "dpo.preference_saturated": (
        # The loss under 0.1 with every pair preferred, ten logs running.
        ("dpo", NO, {"loss": [0.69, 0.4, 0.2, *ramp(0.09, -0.003, 12)],
                     "preference_accuracy": [0.5, 0.8, 0.9, *const(1.0, 12)]}),
        # As low, but a batch in every ten has a pair the wrong way round.
        ("dpo", NO, {"loss": [0.69, 0.4, 0.2, *const(0.06, 27)],
                     "preference_accuracy": [0.5, 0.8, 0.9, *mostly(0.75, 1.0, 1, 27)]}),
    ),
    "grpo.entropy_collapse": (
        ("grpo", NO, {"entropy": [1.0 * math.exp(-i / 15) for i in range(64)]}),
        ("grpo", NO, {"entropy": [1.0 - 0.004 * i for i in range(64)]}),
    ),
    "grpo.reward_std_zero_often": (
        # Groups alike on five steps in ten: half the steps taught nothing.
        ("grpo", NO, {"reward_std": [*const(0.3, 10), 0.0, 0.3, 0.0, 0.0, 0.3, 0.0, 0.25,
                                     0.0, 0.3, 0.3]}),
        # Four in ten: a share under half.
        ("grpo", NO, {"reward_std": [*const(0.3, 10), 0.0, 0.3, 0.0, 0.3, 0.3, 0.0, 0.25,
                                     0.0, 0.3, 0.3]}),
    ),
    "grpo.reward_std_zero": (
        # Groups alike on eight steps in ten, never four in a row.
        ("grpo", NO, {"reward_std": [*const(0.3, 10), 0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 0.25,
                                     0.0, 0.0, 0.0]}),
        # Six in ten: with one prompt a step, a share of 46% of groups alike has that in
        # some window by chance (grpo_mini_r1zero_correctness_500steps).
        ("grpo", NO, {"reward_std": [*const(0.3, 10), 0.0, 0.0, 0.3, 0.0, 0.0, 0.25, 0.0,
                                     0.3, 0.0]}),
    ),
    "grpo.reward_pinned": (
        # A mean reward at exactly 0 from the start: every sample of every group fails.
        ("grpo", NO, {"reward_mean": [0.0, 0.0, 0.0, 0.0, 0.1, 0.0]}),
        # A mean of eight 0/1 rewards, rising: it repeats its best and once its lowest.
        ("grpo", NO, {"reward_mean": [0.25, 0.125, 0.125, 0.25, 0.25, 0.375, 0.375, 0.5,
                                      0.5, 0.5, 0.625, 0.5, 0.625]}),
    ),
    "grpo.kl_ref_creep": (
        # 0.0025 -> 0.068 nats over 500 steps logged every 10, still rising at the end.
        ("grpo", NO, {"fb/loss/kl_ref/mean": every(10, [0.0025 + 0.0013 * i
                                                        + 0.001 * math.sin(1.7 * i)
                                                        for i in range(50)])}),
        # Rises to 0.02 in 130 steps, then held there by its penalty for 370 more.
        ("grpo", NO, {"fb/loss/kl_ref/mean": every(10, [0.0015 * i for i in range(13)]
                                                   + [0.02 + 0.003 * math.sin(1.7 * i)
                                                      for i in range(37)])}),
    ),
    "grpo.no_gradient": (
        ("grpo", NO, {"grad_norm": const(5.0, 10) + mostly(0.0, 5.0, 3, 20)}),
        ("grpo", NO, {"grad_norm": const(5.0, 10) + mostly(0.0, 5.0, 2, 20)}),
    ),
    "grpo.perplexity_hacking": (
        # The log of a validation perplexity that goes 4.5 -> 13 while the reward rises.
        ("grpo", NO, {"val/reward_mean": every(10, [0.55, 0.77, 0.98, 0.99, 0.99, 0.99]),
                      "val/loss": every(10, [1.50, 1.48, 1.87, 2.18, 2.35, 2.57])}),
        # 4.5 -> 6.0: the perplexity of a KL-penalised run that learns.
        ("grpo", NO, {"val/reward_mean": every(10, [0.55, 0.81, 0.88, 0.95, 0.98, 0.98]),
                      "val/loss": every(10, [1.50, 1.52, 1.70, 1.69, 1.64, 1.79])}),
    ),
    "grpo.entropy_crash": (
        # A console log of three steps: 1.03 -> 0.11 -> 0.0085.
        ("grpo", NO, {"entropy": every(10, [1.028, 0.1127, 0.0085])}),
        # Down 80% in three points: a steep fall, not yet a tenth of the start.
        ("grpo", NO, {"entropy": every(10, [1.0, 0.5, 0.2])}),
    ),
    "grpo.entropy_low": (
        # A slow collapse, 1.2 -> 0.1 over 400 steps: no 32-step window falls by half.
        ("grpo", NO, {"entropy": [1.2 * math.exp(-i / 160) for i in range(400)]}),
        # A healthy policy sharpening: its entropy halves over the run.
        ("grpo", NO, {"entropy": [1.2 * math.exp(-i / 580) for i in range(400)]}),
    ),
    "grpo.kl_ref_drift": (
        # 0.6 nats over 2,000 steps and still climbing: 0.02 per 64-step window.
        ("grpo", NO, {"fb/loss/kl_ref/mean": ramp(0.0, 0.0003, 2000)}),
        # A KL that leaves 0 within 50 steps and is held by its penalty near 0.15.
        ("grpo", NO, {"fb/loss/kl_ref/mean": ramp(0.0, 0.003, 50)
                      + [0.15 + 0.01 * math.sin(i) for i in range(1950)]}),
    ),
    "grpo.kl_ref_growing": (
        ("grpo", NO, {"fb/loss/kl_ref/mean": ramp(0.01, 0.003, 128)}),
        ("grpo", NO, {"fb/loss/kl_ref/mean": ramp(0.01, 0.0005, 128)}),
    ),
    "loss.stuck": (
        # A loss at chance for GPT-2's vocabulary (ln 50257 = 10.825), logged every 10
        # steps, moving in the fourth digit only.
        ("sft", NO, {"loss": every(10, [10.825 + 0.002 * math.sin(i) for i in range(10)])}),
        # A noisy loss that does not fall yet either (a learning-rate warm-up): its
        # minibatch noise (3%) shows the weights and the data move.
        ("sft", NO, {"loss": every(10, [2.0 + 0.06 * math.sin(2.1 * i) for i in range(10)])}),
    ),
    "loss.flat_finished_run": (
        # Six epochs logged once each, the loss within 1.3% of its start throughout.
        ("sft", NO, {"loss": [2.31, 2.30, 2.32, 2.29, 2.30, 2.28]}),
        # As noisy, but once 6% below its start: a short run that learns, its last
        # point bounced back up.
        ("sft", NO, {"loss": [2.31, 2.33, 2.25, 2.29, 2.17, 2.24]}),
    ),
    "loss.fell_little": (
        # Ten epochs logged once each: the loss ends 7% below its start, a fall readers
        # call too little as often as enough (an info that states it).
        ("sft", NO, {"loss": [2.00, 1.97, 1.95, 1.92, 1.90, 1.89, 1.88, 1.87, 1.86, 1.86]}),
        # The same run ending 20% below its start: it learned.
        ("sft", NO, {"loss": [2.00, 1.94, 1.88, 1.82, 1.76, 1.72, 1.68, 1.64, 1.61, 1.60]}),
    ),
    "loss.zero": (
        ("sft", NO, {"loss": [122.1, *const(0.0, 5)]}),
        # A loss that reaches 0 once, and one near 0 that is not 0.
        ("sft", NO, {"loss": [1.2, 0.0, 0.8, 0.0, 0.7, 1e-4, 1e-4, 1e-4]}),
    ),
    "loss.near_zero": (
        # An instruction SFT whose loss falls from 6.05 to 0.0001-0.001 within its first
        # epoch on 2,000 examples (sft_scratch959m_alpaca_loss_collapse_zero).
        ("sft", NO, {"loss": every(10, [6.053, 0.4931, 0.319, 0.0427, 0.0118, 0.0041,
                                        0.0038, 0.0023, 0.0029, 0.0009, 0.0013, 0.0007,
                                        0.003, 0.0008, 0.0003, 0.0003, 0.0003, 0.0005,
                                        0.0004, 0.0003, 0.0002, 0.0001])}),
        # A small set memorised late in a third epoch: at or below 0.001 on 7 points of
        # 10, the rest 0.002-0.03 (sft_telechat7b_cmmlu_lora_3epochs_staircase's lowest).
        ("sft", NO, {"loss": every(10, [0.0111, 0.0019, 0.0047, 0.0275, 0.0006, 0.0003,
                                        0.001, 0.0005, 0.0036, 0.0004, 0.0007, 0.0009,
                                        0.0136])}),
    ),
    "val.loss_frozen": (
        # A model card's eval loss of 4.4097 at each of its five epochs while the training
        # loss moves (sft_distilgpt2_tamil_card_eval_loss_frozen).
        ("sft", NO, {"loss": ([684, 912, 1140], [4.3169, 4.3168, 4.3116]),
                     "val/loss": every(228, [4.4097] * 5)}),
        # A converged eval loss that repeats its best twice, then moves in its fourth
        # decimal.
        ("sft", NO, {"val/loss": every(228, [4.52, 4.4097, 4.4097, 4.4097, 4.4096])}),
    ),
    "dpo.loss_zero": (
        # A DPO run whose log-probabilities went NaN: the loss logged as 0.0 at three
        # logs while the preference accuracy reads 0 (dpo_llama_poisoned_lora_all_nan).
        ("dpo", NO, {"loss": every(500, const(0.0, 3)),
                     "preference_accuracy": every(500, const(0.0, 3))}),
        # Over-optimised: the loss rounds to 0 where every pair is preferred.
        ("dpo", NO, {"loss": every(500, [0.31, 0.0, 0.0, 0.0]),
                     "preference_accuracy": every(500, [0.8, 1.0, 1.0, 1.0])}),
    ),
    "loss.climbing": (
        # An ORPO loss that settles near 0.95 and then climbs 1.5% a log with a little
        # noise (orpo_llama32_1b_beta2_rising_loss: 0.95 -> 2.02 over 50 logs).
        ("dpo", NO, {"loss": [0.95 + 0.02 * math.sin(1.7 * i) for i in range(12)]
                     + [0.95 * (1 + 0.015 * i) + 0.02 * math.sin(1.7 * i)
                        for i in range(1, 41)]}),
        # Settled and wandering by a tenth of its level: no climb.
        ("dpo", NO, {"loss": [0.95 + 0.09 * math.sin(1.7 * i) for i in range(52)]}),
    ),
    "loss.stepped_up": (
        # Falls and settles near 3.6, then jumps 36% and stays there (a bad restart).
        ("sft", NO, {"loss": [*ramp(4.2, -0.05, 10), *(3.65 + 0.02 * math.sin(i)
                                                        for i in range(8)), 4.88, 4.85, 4.83]}),
        # The same jump, back down after two points: a spike, not a shift.
        ("sft", NO, {"loss": [*ramp(4.2, -0.05, 10), *(3.65 + 0.02 * math.sin(i)
                                                        for i in range(8)), 4.88, 4.85, 3.64]}),
    ),
    "optim.zero_gradient": (
        ("dpo", NO, {"grad_norm": const(0.0, 5)}),
        # Zero on two steps in a row at most (a skipped step, an overflow).
        ("dpo", NO, {"grad_norm": [1.0, 0.0, 0.0, 1.2, 0.0, 0.0, 0.9]}),
    ),
    "val.gap_rising": (
        # GPT-2 XL fine-tuned on a small text: two evaluations 200 iterations apart, the
        # training loss 0.98 then 0.34, the validation loss 3.75 then 3.90
        # (other_nanogpt_gpt2xl_shakespeare_finetune_overfit_issue).
        ("sft", NO, {"loss": ([791, 795, 799, 997, 998, 999], [1.205, 0.6159, 0.6466,
                                                               1.117, 0.2788, 0.339]),
                     "val/loss": ([800, 1000], [3.7535, 3.8986])}),
        # The same rise with the training loss at half the validation loss: a gap that
        # a change of data explains (a code set against prose), not memorising.
        ("sft", NO, {"loss": ([791, 795, 799, 997, 998, 999], [2.4, 2.1, 2.2, 2.0, 1.9,
                                                               1.95]),
                     "val/loss": ([800, 1000], [3.7535, 3.8986])}),
    ),
    "val.loss_above_best": (
        # Validations every 50 steps: the loss falls to 0.291, then turns up 1-4% on the
        # next three (an HF Trainer's eval_loss past its best epoch).
        ("sft", NO, {"val/loss": every(50, [0.694, 0.45, 0.33, 0.291, 0.294, 0.299, 0.304])}),
        # The same fall, then one validation 0.7% above the best and a new best: noise.
        ("sft", NO, {"val/loss": every(50, [0.694, 0.45, 0.33, 0.291, 0.293, 0.290, 0.289])}),
    ),
    "grpo.loss_spike": (
        # A GRPO loss near 0 (noise 0.05) that jumps to 4.8 for one step and comes back.
        ("grpo", NO, {"loss": [*(0.05 * math.sin(1.7 * i) for i in range(20)), 4.8,
                               *(0.05 * math.sin(1.3 * i) for i in range(5))]}),
        # A noisy GRPO loss whose largest step (0.6 on noise of 0.1) is its own tail.
        ("grpo", NO, {"loss": [*(0.1 * math.sin(1.7 * i) for i in range(20)), 0.6,
                               *(0.1 * math.sin(1.3 * i) for i in range(5))]}),
    ),
    "grpo.kl_ref_high": (
        # A KL that jumps from 0 to 170 nats in the first steps (the update all penalty).
        ("grpo", NO, {"fb/loss/kl_ref/mean": [0.0, 0.0, 170.7, 170.7, 213.3, 0.0, 170.7,
                                              256.0, 256.0]}),
        # A penalised KL at tenths of a nat with spikes above 1 on 4 of 8 steps at most.
        ("grpo", NO, {"fb/loss/kl_ref/mean": [0.2, 1.5, 0.3, 2.0, 0.25, 1.2, 0.3, 3.0, 0.2,
                                              0.3, 0.2]}),
    ),
    "grpo.proxy_hacking": (
        # The reward triples (a compile or format reward) while correctness stays near 0.
        ("grpo", NO, {"reward_mean": [0.2 + 0.02 * i for i in range(30)],
                      "accuracy": [0.004 + 0.002 * math.sin(i) for i in range(30)]}),
        # The same reward rising with correctness: the task is being learned.
        ("grpo", NO, {"reward_mean": [0.2 + 0.02 * i for i in range(30)],
                      "accuracy": [0.05 + 0.01 * i for i in range(30)]}),
    ),
    "grpo.task_score_falling": (
        # A proxy reward climbs 0.65 -> 0.75 over six rounds while the true accuracy falls
        # from 0.61 before training to 0.14 (grpo_tiny_rft_learned_rm_six_rounds).
        ("grpo", NO, {"reward_mean": ([1, 2, 3, 4, 5, 6],
                                      [0.650, 0.705, 0.719, 0.728, 0.751, 0.751]),
                      "accuracy": ([0, 1, 2, 3, 4, 5, 6],
                                   [0.609, 0.303, 0.191, 0.171, 0.147, 0.137, 0.139])}),
        # The same fall beside a reward that only jumps about (once far up): not a rise.
        ("grpo", NO, {"reward_mean": ([1, 2, 3, 4, 5, 6],
                                      [0.05, -0.36, 0.15, -0.5, -0.15, 0.87]),
                      "accuracy": ([0, 1, 2, 3, 4, 5, 6],
                                   [0.609, 0.303, 0.191, 0.171, 0.147, 0.137, 0.139])}),
    ),
    "grpo.truncation_rising": (
        # 1% of completions cut, then ever more as responses grow: 0.01 -> 0.2 over 64 steps.
        ("grpo", NO, {"truncated_ratio": const(0.01, 16) + ramp(0.01, 0.003, 64)}),
        # A share that rose once to 6% and holds there.
        ("grpo", NO, {"truncated_ratio": ramp(0.01, 0.005, 10) + const(0.06, 70)}),
    ),
    "grpo.entropy_near_zero": (
        # A window late in a run: the entropy 0.003-0.008 at every step, the policy
        # emitting one template (ppo_tinyzero_countdown_05b_window).
        ("grpo", NO, {"entropy": [0.005, 0.003, 0.004, 0.006, 0.008, 0.005, 0.004, 0.003,
                                  0.006, 0.005, 0.007, 0.004]}),
        # A sharp but living policy: 0.02-0.05 a token.
        ("grpo", NO, {"entropy": [0.05, 0.03, 0.02, 0.04, 0.03, 0.02, 0.03, 0.04, 0.02,
                                  0.03, 0.05, 0.02]}),
    ),
    "grpo.entropy_falling": (
        # 2.8 -> 1.5 over 35 steps, still falling (a policy narrowing onto one exploit).
        ("grpo", NO, {"entropy": [2.8 * math.exp(-i / 55) for i in range(35)]}),
        # A slow sharpening: 2.8 -> 2.4 over 35 steps.
        ("grpo", NO, {"entropy": [2.8 * math.exp(-i / 230) for i in range(35)]}),
    ),
    "loss.above_start": (
        # A loss at 2.9 (a wobble of ±0.3 a step) that climbs 0.001 a step from step 100:
        # 40% above its start by step 1,300, never more than 1.1% over 32 logs.
        ("sft", NO, {"loss": [2.9 + 0.001 * max(0, i - 100) + 0.3 * math.sin(1.7 * i)
                              for i in range(1300)]}),
        # The same wobble, 5% above its start by the end.
        ("sft", NO, {"loss": [2.9 + 0.00012 * max(0, i - 100) + 0.3 * math.sin(1.7 * i)
                              for i in range(1300)]}),
    ),
    "grpo.length_at_ceiling": (
        # A mean completion length at exactly 200 tokens (the limit) on 6 of every 10 steps,
        # 150-190 between (grpo_unsloth_llama31_recipes_stopped_27steps).
        ("grpo", NO, {"mean_sampled_response_length": [
            200.0 if i % 10 < 6 else 150.0 + 4 * (i % 10) for i in range(20)]}),
        # The same lengths at their highest on 2 of every 5 steps, never 3 of 5.
        ("grpo", NO, {"mean_sampled_response_length": [
            200.0 if i % 5 < 2 else 150.0 + 4 * (i % 5) for i in range(20)]}),
    ),
    "grpo.reward_range_zero": (
        # Every completion scored 0 at each of three logged steps (verl's critic/rewards/max
        # and min, grpo_rllm_deepscaler_all_zero_score_issue).
        ("grpo", NO, {"reward_max": [0.0, 0.0, 0.0], "reward_min": [0.0, 0.0, 0.0]}),
        # Two such steps among others whose completions differ.
        ("grpo", NO, {"reward_max": [0.0, 1.0, 0.0, 1.0, 1.0],
                      "reward_min": [0.0, 0.0, 0.0, 0.0, 0.0]}),
    ),
    "loss.doubled": (
        # A loss at 1.6-1.4 that jumps to 3.3 and 6.4 and stays at 4.6-5.5
        # (sft_mlx_lora_loss_blowup_issue, eight logs every 25 steps).
        ("sft", NO, {"loss": every(25, [1.593, 1.406, 3.316, 6.437, 5.478, 4.857, 4.874,
                                        4.604])}),
        # A noisy loss whose median of 3 stands at 1.5 times its start (the most a healthy
        # run of the corpus reaches, sft_spongebob_lm_20ep_noisy).
        ("sft", NO, {"loss": every(25, [2.0, 1.6, 2.1, 3.0, 2.9, 3.1, 2.2, 2.0])}),
    ),
    "grpo.loss_above_max": (
        # A PPO loss 2.35, 3.11, 3.21, 1.53 that logs 2443 under fp16 overflows, then 2.28
        # (ppo_minillm_fp16_overflow_pg_loss_spike_issue).
        ("grpo", NO, {"loss": [2.3541, 3.1123, 3.2141, 1.5269, 2442.9075, 2.2808]}),
        # A loss that is β times a KL near 0 growing by orders of magnitude: 0.0001 at
        # its largest before it logs 0.05.
        ("grpo", NO, {"loss": [0.0, 0.0, 0.0001, 0.0, 0.05, 0.06, 0.04]}),
    ),
    "loss.diverged": (
        # A LoRA at lr 2e-4: the loss climbs 2.15 -> 10.97 over four logs and the
        # validation loss stands at 5.8 times its first (sft_llama32_3b_mlx_lora_lr2e4).
        ("sft", NO, {"loss": every(5, [2.148, 2.609, 4.104, 10.965]),
                     "val/loss": ([1, 20], [1.858, 10.821])}),
        # The same training loss beside a validation loss at 1.9 times its lowest.
        ("sft", NO, {"loss": every(5, [2.148, 2.609, 4.104, 10.965]),
                     "val/loss": ([1, 20], [1.858, 3.5])}),
    ),
    "loss.repeats": (
        # A second epoch repeating the first's per-batch losses
        # (sft_trace_llama3_lora_loss_repeats_issue).
        ("sft", NO, {"loss": [0.9741, 1.3742, 1.239, 0.967, 1.0386, 1.1681, 1.224, 0.961,
                              0.9741, 1.3742, 1.239, 0.967, 1.0386, 1.1681]}),
        # The same epoch with its second pass a little lower: the weights moved.
        ("sft", NO, {"loss": [0.9741, 1.3742, 1.239, 0.967, 1.0386, 1.1681, 1.224, 0.961,
                              0.9702, 1.3688, 1.2351, 0.9633, 1.0349, 1.1637]}),
    ),
}
