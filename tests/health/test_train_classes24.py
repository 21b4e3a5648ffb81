"""Session 24: what round 9's runs, spent to the train split, showed.

- A KL estimated as the mean log-ratio of one group's samples goes negative as often as
  it spikes: its "spikes" of 10 times the median are its own noise
  (grpo_gemma2_2b_math_word_problems_lora_acc_rising, healthy). `grpo.kl_ref_spike`
  asks a spike to stand 6 robust standard deviations of the window above the median too.
- A policy loss of 0.02-0.05 that logs 0.288 once, at its fifth point, and is back at
  0.025 at the next (grpo_tsc_extend_decision_docker): 9.7 times its largest before.
  `grpo.loss_above_max` finds a jump of 8 times (it asked for 50); no healthy RL run of
  the train split logs one of more than 3.9.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runwatch.health.engine import Engine
from runwatch.health.findings import Finding
from runwatch.health.jumps import Spike
from runwatch.ingest.importers import read_source

from .helpers import evaluate, to_batch

REAL = Path(__file__).resolve().parents[1] / "data" / "real"


def _series(run: str, key: str) -> list[float]:
    """A corpus run's logged values of one key, read by the importer `runwatch import` uses."""
    (path,) = [p for p in (REAL / run).iterdir() if p.name != "source.json"]
    rows = sorted(read_source(path).records, key=lambda r: r["step"])
    return [float(r[key]) for r in rows if isinstance(r.get(key), (int, float))]


def _live(method: str, name: str, values: list[float]) -> list[Finding]:
    """Fed one logged step at a time, as a live run sends them."""
    engine = Engine(method)
    found: list[Finding] = []
    for i, v in enumerate(values):
        found += engine.feed(to_batch({name: ([i + 1], [v])}))
    return found


def _of(found: list[Finding], rule_id: str) -> list[Finding]:
    return [f for f in found if f.rule_id == rule_id]


def test_a_signed_kl_estimate_wandering_around_its_median_is_no_spike() -> None:
    kl = _series("grpo_gemma2_2b_math_word_problems_lora_acc_rising", "kl")
    assert min(kl) < -0.4 and max(kl) > 0.55  # it goes negative: an estimate, noisy
    found = _of(_live("grpo", "fb/loss/kl_ref/mean", kl), "grpo.kl_ref_spike")
    assert found == []


def test_a_spike_far_out_of_a_noisy_kl_is_still_found() -> None:
    # Near miss: the same noisy series with two logs of 3 nats, far out of its spread.
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


def test_a_policy_loss_four_times_its_largest_is_no_jump() -> None:
    # Near miss: the most a healthy RL run of the train split reaches (3.9 times).
    found = evaluate("grpo", {}, {"loss": [0.03, 0.05, 0.04, 0.2, 0.05, 0.04]})
    assert _of(found, "grpo.loss_above_max") == []
