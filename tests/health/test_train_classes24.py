"""Session 24: what round 9's runs and their siblings, spent to the train split, showed.

- A KL estimated as the mean log-ratio of one group's samples is negative on 37 of its
  100 steps: its "spikes" of 10 times the median are its own noise
  (grpo_gemma2_2b_math_word_problems_lora_acc_rising, healthy, a round-23 sibling of
  round 9's runs). `grpo.kl_ref_spike` asks a spike to stand 6 robust standard
  deviations of the window (by its median absolute deviation, which the window's earlier
  spikes barely move) above the median too.
- A policy loss of 0.02-0.05 that logs 0.288 once, at its fifth point, and is back at
  0.025 at the next (grpo_tsc_extend_decision_docker): 9.7 times its largest before.
  `grpo.loss_above_max` finds a jump of 8 times (it asked for 50); no healthy RL run of
  the train split logs one of more than 3.9.
"""

from __future__ import annotations

import json
from typing import Any

from runwatch.health.engine import Engine
from runwatch.health.findings import Finding
from runwatch.health.jumps import Spike

from .helpers import corpus_columns, corpus_records, evaluate, to_batch
from .helpers import of_rule as _of


def _series(run: str, key: str) -> list[float]:
    """A corpus run's logged values of one key, in step order."""
    return corpus_columns(run, key)[1]


def _live(method: str, name: str, values: list[float],
          steps: list[int] | None = None) -> list[Finding]:
    """Fed one logged step at a time, as a live run sends them (steps 1.. unless given)."""
    engine = Engine(method)
    found: list[Finding] = []
    for i, v in enumerate(values):
        found += engine.feed(to_batch({name: ([steps[i] if steps else i + 1], [v])}))
    return found


def test_a_signed_kl_estimate_wandering_around_its_median_is_no_spike() -> None:
    kl = _series("grpo_gemma2_2b_math_word_problems_lora_acc_rising", "kl")
    assert min(kl) < -0.4 and max(kl) > 0.55  # it goes negative: an estimate, noisy
    found = _of(_live("grpo", "fb/loss/kl_ref/mean", kl), "grpo.kl_ref_spike")
    assert found == []


def test_a_spike_far_out_of_a_noisy_kl_is_still_found() -> None:
    # The same noisy series with two logs of 3 nats, far out of its spread.
    kl = _series("grpo_gemma2_2b_math_word_problems_lora_acc_rising", "kl")
    kl[60], kl[62] = 3.0, 3.2
    steps = list(range(1, len(kl) + 1))
    found = _of(evaluate("grpo", {}, {"fb/loss/kl_ref/mean": (steps, kl)}), "grpo.kl_ref_spike")
    assert [(f.first_step, f.severity) for f in found] == [(61, "warning")]


def test_the_spread_a_spike_must_clear_survives_a_state_round_trip() -> None:
    values: list[Any] = [0.1 * ((-1) ** i) * (1 + i % 3) for i in range(40)] + [1.0, 0.05]
    whole = Spike(factor=10.0, min_history=10, min_median=0.05, noise_k=6.0)
    at_once = whole.feed(values)
    first = Spike(factor=10.0, min_history=10, min_median=0.05, noise_k=6.0)
    split = first.feed(values[:35])
    again = Spike(factor=10.0, min_history=10, min_median=0.05, noise_k=6.0,
                  state=json.loads(json.dumps(first.state())))
    assert split + again.feed(values[35:]) == at_once
    # 1.0 is 10 times the floor of the median but within 6 robust sds of the window
    assert not any(at_once)
    assert not any(Spike(factor=10.0, min_history=10, min_median=0.05).feed(values)[:40])
    assert any(Spike(factor=10.0, min_history=10, min_median=0.05).feed(values))


def test_a_policy_loss_nine_times_its_largest_at_its_fifth_point_is_a_jump() -> None:
    loss = _series("grpo_tsc_extend_decision_docker", "loss")
    assert len(loss) == 10
    found = _of(evaluate("grpo", {}, {"loss": ([5 * (i + 1) for i in range(10)], loss)}),
                "grpo.loss_above_max")
    assert [(f.first_step, f.severity) for f in found] == [(25, "info")]


def test_a_policy_loss_seven_times_its_largest_is_no_jump() -> None:
    # Near miss: 7 times the largest before (the most a healthy RL run of the train split
    # reaches is 3.9 times).
    found = evaluate("grpo", {}, {"loss": [0.03, 0.05, 0.04, 0.35, 0.05, 0.04]})
    assert _of(found, "grpo.loss_above_max") == []


def _band(n: int, centre: float, half: float) -> list[float]:
    """`n` values cycling through five evenly spaced points of centre ± half: a median of
    `centre` and a median absolute deviation of half/2."""
    return [centre + half * (k / 2 - 1) for k in (0, 1, 2, 3, 4)] * (n // 5)


def test_a_spike_just_past_six_robust_sds_of_a_wide_band_is_found() -> None:
    # A band of 0.1 ± 0.5 (median 0.1, MAD 0.25: a robust sd of 0.37), then one log at
    # 2.5: past 10× the median (1.0) and past 6 robust sds above it (2.32).
    kl = [*_band(60, 0.1, 0.5), 2.5, 0.1]
    found = _of(evaluate("grpo", {}, {"fb/loss/kl_ref/mean": kl}), "grpo.kl_ref_spike")
    assert [f.first_step for f in found] == [60]


def test_a_log_within_six_robust_sds_of_a_wide_band_is_no_spike() -> None:
    # Near miss: the same band and a log of 2.1, ten times the median but within 6 sds.
    kl = [*_band(60, 0.1, 0.5), 2.1, 0.1]
    found = _of(evaluate("grpo", {}, {"fb/loss/kl_ref/mean": kl}), "grpo.kl_ref_spike")
    assert found == []


def test_the_spread_is_refreshed_with_the_median() -> None:
    # 200 logs of a wide band, then 250 of a narrow one (its robust sd 0.015): a log of
    # 1.5 is far out of the window the narrow band fills, and would hide within the wide
    # band's spread were it never refreshed.
    kl = [*_band(200, 0.1, 0.5), *_band(250, 0.1, 0.02), 1.5, 0.1]
    found = _of(evaluate("grpo", {}, {"fb/loss/kl_ref/mean": kl}), "grpo.kl_ref_spike")
    assert [f.first_step for f in found] == [450]


def test_earlier_spikes_do_not_raise_the_bar_for_later_ones() -> None:
    # A GRPO run whose KL (median about 0.3-0.5) spikes to 6.1 at step 96 and 13.0 at step
    # 295, among others (grpo_yuxuan_arrays_csv, labelled kl_growth): a spread taken from
    # the mean absolute deviation let the earlier spikes lift the bar past both.
    rows = corpus_records("grpo_yuxuan_arrays_csv")
    steps = [int(r["step"]) for r in rows]
    kl = [float(r["kl_avg"]) for r in rows]
    found = _of(_live("grpo", "fb/loss/kl_ref/mean", kl, steps), "grpo.kl_ref_spike")
    first = {f.first_step for f in found}
    assert {96, 295} <= first
    assert any(f.first_step == 295 and f.severity == "warning" for f in found)
