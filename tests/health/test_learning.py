"""What makes a healthy run look sick (round 8's two false alarms, by class) and what the
rules now read (round 8's misses, by class): a trigger series and a near miss each.

- A run that learns: a finding about its signal (groups without spread, a DPO loss not
  yet 5% down) is info while the reward rises, or the DPO margin stands above 0, beyond
  the series' own noise.
- One prompt a step: a step's reward spread is one group's, so "most groups" is most steps.
- One spike of the gradient norm or of the KL that is gone at the next step is info; a
  second within the finding's hold is the warning.
- A DPO loss pinned at ln 2 with no batch noise: the policy never left the reference.
- Names: a DPO loop's `margin`, the HF Trainer's notebook table (`Validation Loss`), a
  share of completions cut at the limit named by its words.
"""

from __future__ import annotations

import math
import random
from typing import Any

from runwatch.health.engine import Engine
from runwatch.health.improvement import Learning
from runwatch.health.rules.base import LEARNING_PARAMS
from runwatch.metrics.aliases import health_name

from .cases import every
from .helpers import evaluate, to_batch
from .helpers import of_rule as _of


def _one_group_a_step(n: int, rising: bool, seed: int = 3) -> dict[str, list[float]]:
    """A GRPO run of one prompt of 6 samples a step (a 0/2.5 reward): on a step where the
    group scores alike its spread is 0. Groups alike on 8 steps of every 10 (all wrong
    early, all right late); the reward flat at 0.6, or rising 0.6 -> 2.0 with noise."""
    rng = random.Random(seed)
    std = [0.0 if i % 10 not in (0, 5) else 1.1 + 0.2 * rng.random() for i in range(n)]
    base = [0.6 + (1.4 * i / n if rising else 0.0) for i in range(n)]
    reward = [b + 0.5 * (rng.random() - 0.5) for b in base]
    return {"reward_std": std, "reward_mean": reward}


def test_groups_alike_on_most_steps_warn_while_the_reward_is_flat() -> None:
    (f, *_) = _of(evaluate("grpo", {}, _one_group_a_step(120, rising=False)),
                  "grpo.reward_std_zero")
    assert f.severity == "warning" and "the run learns" not in f.message


def test_groups_alike_on_most_steps_are_info_while_the_reward_rises() -> None:
    found = _of(evaluate("grpo", {}, _one_group_a_step(120, rising=True)),
                "grpo.reward_std_zero")
    assert found and {f.severity for f in found} == {"info"}
    assert "reward_mean has risen beyond its noise since the start" in found[-1].message
    # named as the run logs it: TRL's `reward` read "reward_mean has risen"
    trl = {("reward" if k == "reward_mean" else k): v
           for k, v in _one_group_a_step(120, rising=True).items()}
    named = _of(evaluate("grpo", {}, trl), "grpo.reward_std_zero")
    assert named and "reward has risen beyond its noise since the start" in named[-1].message


def test_groups_alike_on_four_steps_in_ten_are_no_finding() -> None:
    # One group a step, 40% of them alike: not "most groups" (the near miss of 8 of 10).
    std = [0.0 if i % 10 < 4 else 0.8 for i in range(60)]
    assert _of(evaluate("grpo", {}, {"reward_std": std}), "grpo.reward_std_zero") == []


def _gate(level: float | None) -> Learning:
    """The gate as the engine makes it (evaluators.learning_gate)."""
    return Learning(z=LEARNING_PARAMS["z"], min_points=int(LEARNING_PARAMS["min_points"]),
                    head=int(LEARNING_PARAMS["head"]), level=level)


def _grpo_run_of_groups(n: int, late: int) -> dict[str, Any]:
    """A GRPO run whose reward rises 0.2 -> 1.6 over its first `late` steps and then
    holds there (noise 0.1 a step), and whose groups are alike on 9 steps of 10 from step
    `late` on, as TRL's std and verl's share of groups without spread log it."""
    rng = random.Random(11)
    reward = [0.2 + 1.4 * min(i, late) / late + 0.2 * (rng.random() - 0.5) for i in range(n)]
    tail = range(late, n)
    return {"reward_mean": reward,
            "reward_std": (list(tail), [0.0 if i % 10 else 0.5 for i in tail]),
            "zero_variance_skip_ratio": (list(tail), [0.99 if i % 10 else 0.3 for i in tail])}


def test_the_grpo_rules_share_one_learning_gate_from_the_runs_first_point() -> None:
    # The three rules about groups without a spread read one gate on reward_mean, fed
    # once per batch and saved once in the state.
    engine = Engine("grpo")
    found = engine.feed(to_batch(_grpo_run_of_groups(100, late=60)))
    gated = [ev for ev in engine.evals.values() if ev.rule.learning == "reward_mean"]
    assert {ev.rule.id for ev in gated} == {"grpo.zero_variance", "grpo.no_signal",
                                             "grpo.reward_std_zero"}
    assert len({id(ev.learning) for ev in gated}) == 1
    assert list(engine.state()["learning"]) == ["reward_mean"]
    hits = [f for f in found if f.rule_id in {ev.rule.id for ev in gated}]
    assert {f.rule_id for f in hits} == {ev.rule.id for ev in gated}
    assert {f.severity for f in hits} == {"info"}
    # Near miss: the same groups in a run whose reward never rose warn.
    flat = _grpo_run_of_groups(100, late=60)
    flat["reward_mean"] = [0.2 + 0.2 * (random.Random(i).random() - 0.5) for i in range(100)]
    assert {f.severity for f in Engine("grpo").feed(to_batch(flat))
            if f.rule_id in {ev.rule.id for ev in gated}} == {"warning"}


def test_the_learning_gate_survives_the_saved_state() -> None:
    # Live, the groups' metrics first appear in a later batch, after the reward rose and
    # levelled off: the gate judges the reward since the run's first point, as when the
    # run is read at once (a gate started with the rules would see a flat reward and warn).
    series = _grpo_run_of_groups(100, late=60)
    whole = {(f.rule_id, f.severity) for f in Engine("grpo").feed(to_batch(series))}
    first = Engine("grpo")
    first.feed(to_batch({"reward_mean": series["reward_mean"][:60]}))
    rest = {k: v if isinstance(v, tuple) else (list(range(60, 100)), v[60:])
            for k, v in series.items()}
    later = Engine("grpo", state=first.state())
    assert {(f.rule_id, f.severity) for f in later.feed(to_batch(rest))} == whole


def test_learning_is_judged_against_the_noise_and_a_known_level() -> None:
    rng = random.Random(1)
    flat = [0.05 * (rng.random() - 0.5) for _ in range(30)]
    above = [0.06 + v * 4 for v in flat]  # a margin of 0.06 under noise of 0.2 a point
    gate = _gate(level=0.0)
    gate.feed(flat)
    assert not gate.rising
    gate = _gate(level=0.0)
    gate.feed(above)
    assert gate.rising
    assert not _gate(level=None).rising  # no points, no verdict


def test_the_gate_at_a_step_of_a_batch_is_the_gate_a_line_at_a_time() -> None:
    # A file read whole feeds the gate a whole batch; a finding that resolved inside it
    # asks where the gate stood at its step, in any order and as often as rules ask.
    values = [0.02 * i + 0.1 * ((i * 7) % 5 - 2) for i in range(60)]
    live = []
    gate = _gate(level=None)
    for v in values:
        gate.feed([v])
        live.append(gate.rising)
    assert True in live and False in live
    whole = _gate(level=None)
    whole.feed(values, list(range(60)))
    rng = random.Random(3)
    asked = [rng.randrange(60) for _ in range(200)]
    assert [whole.rising_at(i) for i in asked] == [live[i] for i in asked]


def _dpo_loop(margin: float, n: int = 40, seed: int = 5) -> dict[str, object]:
    """A DPO loop of 8 pairs a batch logged every 8 steps: its loss sits near ln 2 with
    noise of 0.035 a log (falling only 1.5% by step 240), its margin noisy around
    `margin` (as `margin`, a hand-written loop's name)."""
    rng = random.Random(seed)
    loss = [0.693 - 0.0004 * i + 0.035 * (rng.random() - 0.5) * 2 for i in range(n)]
    marg = [margin + 0.07 * (rng.random() - 0.5) * 2 for _ in range(n)]
    return {"loss": every(8, loss), "margin": every(8, marg)}


def test_a_dpo_loss_not_falling_with_no_margin_warns() -> None:
    (f, *_) = _of(evaluate("dpo", {}, _dpo_loop(0.0)), "dpo.loss_not_falling")
    assert f.severity == "warning"


def test_a_dpo_loss_not_yet_falling_while_the_margin_stands_above_0_is_info() -> None:
    (f, *_) = _of(evaluate("dpo", {}, _dpo_loop(0.06)), "dpo.loss_not_falling")
    # named as the loop logs it (`margin`), not by its canonical name (`mean_margin`)
    assert f.severity == "info" and " margin stands above 0 beyond its noise" in f.message


def _spikes(base: float, peak: float, at: list[int], n: int = 60) -> list[float]:
    return [peak if i in at else base * (1 + 0.1 * math.sin(i)) for i in range(n)]


def test_gradient_spikes_are_info_one_or_repeated() -> None:
    # Session 15: repeated spikes of the gradient norm alone are no warning (the norm is
    # logged before clipping; a spike that costs the run shows in its loss).
    (one,) = _of(evaluate("sft", {}, {"grad_norm": _spikes(0.4, 4.8, [30])}),
                 "optim.grad_norm_spike")
    assert one.severity == "info"
    (two,) = _of(evaluate("sft", {}, {"grad_norm": _spikes(0.4, 4.8, [30, 33])}),
                 "optim.grad_norm_spike")
    assert two.severity == "info"
    assert "2 spikes from step 30, each within 5 points of the one before" in two.message
    # Spikes far apart are two findings, each info.
    far = _of(evaluate("sft", {}, {"grad_norm": _spikes(0.4, 4.8, [20, 45])}),
              "optim.grad_norm_spike")
    assert [f.severity for f in far] == ["info", "info"]


def test_one_kl_spike_is_info_and_repeated_ones_a_warning() -> None:
    (one,) = _of(evaluate("grpo", {}, {"fb/loss/kl_ref/mean": _spikes(0.04, 0.9, [40])}),
                 "grpo.kl_ref_spike")
    assert one.severity == "info"
    (two,) = _of(evaluate("grpo", {}, {"fb/loss/kl_ref/mean": _spikes(0.04, 0.9, [40, 42])}),
                 "grpo.kl_ref_spike")
    assert two.severity == "warning"


def test_a_dpo_loss_pinned_at_ln2_is_stuck() -> None:
    # 18 logs every 10 steps moving in the fourth digit: the policy is the reference.
    loss = [0.6931 - 0.0001 * (i % 3) for i in range(18)]
    (f,) = _of(evaluate("dpo", {}, {"loss": every(10, loss)}), "loss.stuck")
    assert f.severity == "warning" and f.first_step <= 80


def test_a_dpo_loss_near_ln2_with_batch_noise_is_not_stuck() -> None:
    # The policy moves: the batch's pairs give the loss noise of 1-2% a log.
    loss = [0.6931 - 0.0005 * i + 0.01 * math.sin(2.1 * i) for i in range(18)]
    assert _of(evaluate("dpo", {}, {"loss": every(10, loss)}), "loss.stuck") == []


def test_names_of_loops_and_of_the_trainer_notebook_table() -> None:
    assert health_name("margin")[0] == "mean_margin"
    assert health_name("Validation Loss")[0] == "val/loss"
    assert health_name("Training Loss")[0] == "loss"
    assert health_name("train/truncated_completions_ratio")[0] == "truncated_ratio"
    assert health_name("truncation_rate")[0] == "truncated_ratio"
    # Near misses: a held-out share and PPO's clip fraction are not the cut share.
    assert health_name("eval/truncation_rate")[0] != "truncated_ratio"
    assert health_name("clip_ratio")[0] != "truncated_ratio"


def test_a_notebook_table_validation_loss_rising_is_overfitting() -> None:
    steps = [700, 800, 900, 1000, 1100, 1200]
    found = evaluate("sft", {}, {"Training Loss": (steps, [2.1, 1.7, 1.3, 0.9, 0.64, 0.5]),
                                 "Validation Loss": (steps, [6.8, 7.0, 7.3, 7.5, 7.7, 7.9])})
    assert _of(found, "val.loss_above_best")
    flat = evaluate("sft", {}, {"Training Loss": (steps, [2.1, 1.7, 1.3, 0.9, 0.64, 0.5]),
                                "Validation Loss": (steps, [6.8, 6.7, 6.6, 6.6, 6.5, 6.5])})
    assert not _of(flat, "val.loss_above_best")


def test_a_loop_share_of_cut_completions_is_read_as_truncation() -> None:
    cut = [1.0 if i % 10 == 3 else 0.1 for i in range(40)]
    found = evaluate("grpo", {}, {"train/truncated_completions_ratio": cut})
    assert _of(found, "grpo.truncation_extreme")
    low = evaluate("grpo", {}, {"train/truncated_completions_ratio": [0.1] * 40})
    assert not [f for f in low if f.rule_id.startswith("grpo.trunc")]
