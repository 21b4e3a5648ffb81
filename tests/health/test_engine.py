"""The engine is incremental: any split into batches, with the state saved and loaded as
JSON between them, gives the findings one batch gives."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runwatch.health.detectors import KOfN
from runwatch.health.engine import Engine
from runwatch.health.improvement import NoImprovement
from runwatch.health.thresholds import ThresholdError, load_yaml, parse
from runwatch.health.trendstats import pair_slopes, theil_sen, theil_sen_apart
from runwatch.metrics.aliases import canonical
from runwatch.store.points import PointColumns

from .cases import CASES, every, ramp
from .helpers import corpus_records, rule_ids, to_batch


def summary(findings: list[Any]) -> dict[tuple[str, str, int], tuple[str, str, int, str]]:
    """Final status, severity, last step and message of each finding, keyed by rule,
    metric, first step. A stall is left out: it reads the wall time between batches."""
    out = {}
    for f in findings:
        if f.rule_id != "run.stalled":
            out[(f.rule_id, f.metric, f.first_step)] = (f.status, f.severity, f.last_step,
                                                        f.message)
    return out


class OneStep(random.Random):
    """Batches of one step each, as a live run that is indexed after every line."""

    def randint(self, a: int, b: int) -> int:
        return 1


def split_feed(method: str, settings_: dict[str, float], series: dict[str, Any],
               rng: random.Random) -> list[Any]:
    """Feed the series a few steps at a time, round-tripping the state through JSON."""
    batch = to_batch(series)
    steps = sorted({s for cols in batch.values() for s in cols.steps})
    state: dict[str, Any] | None = None
    findings: dict[tuple[str, str, int], Any] = {}
    i = 0
    while i < len(steps):
        j = min(len(steps), i + rng.randint(1, 7))
        lo, hi = steps[i], steps[j - 1]
        part = {}
        for name, col in batch.items():
            idx = [k for k, s in enumerate(col.steps) if lo <= s <= hi]
            if idx:
                part[name] = PointColumns._make([c[k] for k in idx] for c in col)
        engine = Engine(method, settings_, state=state)
        for f in engine.feed(part):
            findings[(f.rule_id, f.metric, f.first_step)] = f
        state = orjson.loads(orjson.dumps(engine.state()))
        i = j
    return list(findings.values())


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_batches_match_one_batch(rule_id: str) -> None:
    for case in CASES[rule_id]:
        method, settings_, series = case
        whole = summary(Engine(method, settings_).feed(to_batch(series)))
        parts = summary(split_feed(method, settings_, series, random.Random(rule_id)))
        assert parts == whole


@pytest.mark.parametrize(("run", "method", "rule_id"), [
    ("dpo_gemma2_2b_fifty_epochs_console", "dpo", "dpo.loss_not_falling"),
    ("grpo_unsloth_gsm8k_250steps", "grpo", "optim.grad_norm_spike"),
])
def test_a_log_read_whole_gives_each_finding_its_own_numbers(
        run: str, method: str, rule_id: str) -> None:
    """An imported file is read in one batch. Findings that resolved long before its end
    read as they do live, line by line: each flat stretch with its own fall, each spike
    against the median before it, not the numbers at the end of the file."""
    whole, live = _whole_and_live(run, method)
    messages = {v[3] for k, v in whole.items() if k[0] == rule_id and v[0] == "resolved"}
    assert len(messages) >= 2  # several findings of the rule resolved inside the file
    assert whole == live


@pytest.mark.parametrize(("run", "method", "finding", "severity"), [
    ("grpo_tikz_simple_shapes_overnight", "grpo",
     ("grpo.no_signal", "zero_variance_skip_ratio", 67), "warning"),
    ("dpo_orpo_gemma2_2b_isaerft_2ep", "dpo", ("dpo.loss_not_falling", "loss", 85), "info"),
])
def test_a_log_read_whole_gives_each_finding_the_severity_it_had_live(
        run: str, method: str, finding: tuple[str, str, int], severity: str) -> None:
    """A rule that says info once the run learns asks where the run stood when its
    finding resolved, not at the end of the 1,024 steps a file read whole feeds at once:
    the reward had not risen yet when zero_variance_skip_ratio stood at 1 (warning), and
    the ORPO margin had when its loss stayed flat (info). Read whole, both were the other
    way on the engine before."""
    whole, live = _whole_and_live(run, method)
    assert whole[finding][:2] == ("resolved", severity)
    assert whole == live


def _whole_and_live(run: str, method: str) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """A corpus run's findings read whole (one batch) and a step at a time."""
    records = corpus_records(run)
    keys = {k for r in records for k, v in r.items()
            if k not in ("step", "ts") and isinstance(v, int | float)}
    series = {k: ([int(r["step"]) for r in records if isinstance(r.get(k), int | float)],
                  [float(r[k]) for r in records if isinstance(r.get(k), int | float)])
              for k in keys}
    whole = summary(Engine(method, {}).feed(to_batch(series)))
    return whole, summary(split_feed(method, {}, series, OneStep()))


def test_state_is_plain_json() -> None:
    engine = Engine("grpo", {"max_sample_tokens": 512})
    (_, _, series), _ = CASES["grpo.reward_hacking"]
    engine.feed(to_batch(series))
    json.dumps(engine.state(), allow_nan=False)


def test_resolves_when_condition_stops() -> None:
    series = {"truncated_ratio": [0.5] * 20 + [0.1] * 20}
    (f,) = [f for f in Engine("grpo").feed(to_batch(series)) if f.rule_id == "grpo.truncation"]
    assert f.status == "resolved"
    assert f.evidence["max"] == 0.5
    # The finding starts at the first of the hits that made the condition hold.
    assert f.first_step == 0 and 19 <= f.last_step < 30


def test_open_finding_updates_across_batches() -> None:
    engine = Engine("grpo")
    first = engine.feed(to_batch({"truncated_ratio": [0.5] * 20}))
    (opened,) = [f for f in first if f.rule_id == "grpo.truncation"]
    assert opened.record is not None
    opened.record["id"] = 41  # what the store does after inserting the row
    later = {"truncated_ratio": PointColumns(list(range(20, 25)), list(range(20, 25)),
                                             [2e6 + s for s in range(20, 25)], [0.6] * 5)}
    (updated,) = [f for f in engine.feed(later) if f.rule_id == "grpo.truncation"]
    assert updated.id == 41 and updated.status == "open"
    assert updated.first_step == opened.first_step and updated.last_step == 24
    assert updated.evidence["max"] == 0.6


def test_aliases_let_rules_read_other_frameworks() -> None:
    series = {"frac_reward_zero_std": [0.7] * 30, "clip_ratio/high_mean": [0.2] * 30,
              "actor/pg_clipfrac": [0.0] * 30}
    found = rule_ids(Engine("grpo").feed(to_batch(series)))
    assert {"grpo.zero_variance", "grpo.clip_high"} <= found


@pytest.mark.parametrize("key", ["policy/entropy_avg", "ppo/policy/entropy", "actor/entropy_loss",
                                 "policy/entropy"])
def test_other_trainers_entropy_names_feed_the_collapse_rule(key: str) -> None:
    # TRL PPO/RLOO (0.12 and later and before), verl before 0.4, hand-written loops'
    # generic name: the same entropy.
    falling = {key: [1.0 * math.exp(-i / 15) for i in range(64)]}
    assert "grpo.entropy_collapse" in rule_ids(Engine("ppo").feed(to_batch(falling)))
    steady = {key: [1.0 - 0.004 * i for i in range(64)]}
    assert "grpo.entropy_collapse" not in rule_ids(Engine("ppo").feed(to_batch(steady)))


def test_a_policy_loss_spike_down_is_a_spike() -> None:
    # tinker's summed policy loss swings +-10^4 and once drops to -5.7e9.
    base = [8000.0 * math.sin(1.7 * i) for i in range(20)]
    down = {"loss": [*base, -5.7e9, *base[:5]]}
    assert "grpo.loss_spike" in rule_ids(Engine("grpo").feed(to_batch(down)))
    # An SFT loss that drops is learning, not a spike.
    fall = {"loss": [*(2.0 + 0.01 * math.sin(i) for i in range(20)), 0.5, 0.5, 0.5]}
    assert "loss.spike" not in rule_ids(Engine("sft").feed(to_batch(fall)))


@pytest.mark.parametrize("sign", [-1.0, 1.0])
def test_an_entropy_logged_as_a_loss_is_read_by_its_size(sign: float) -> None:
    # Stable-Baselines3's train/entropy_loss is minus the entropy; OpenRLHF's W&B history
    # logs the entropy itself under the same name.
    falling = {"train/entropy_loss": [sign * 0.69 * math.exp(-i / 15) for i in range(64)]}
    assert "grpo.entropy_collapse" in rule_ids(Engine("ppo").feed(to_batch(falling)))
    steady = {"train/entropy_loss": [sign * (0.69 - 0.002 * i) for i in range(64)]}
    assert "grpo.entropy_collapse" not in rule_ids(Engine("ppo").feed(to_batch(steady)))


@pytest.mark.parametrize("key", ["objective/kl", "critic/kl"])
def test_other_trainers_kl_names_feed_the_growth_rule(key: str) -> None:
    growing = {key: [0.01 + 0.003 * i for i in range(128)]}
    assert "grpo.kl_ref_growing" in rule_ids(Engine("rloo").feed(to_batch(growing)))
    slow = {key: [0.01 + 0.0005 * i for i in range(128)]}
    assert "grpo.kl_ref_growing" not in rule_ids(Engine("rloo").feed(to_batch(slow)))


@pytest.mark.parametrize("key", ["eval_g0_loss", "eval_validation_loss", "eval/g0_loss"])
def test_a_named_eval_sets_loss_is_the_validation_loss(key: str) -> None:
    # The HF Trainer logs `eval_<set>_loss` for each set of a dict eval_dataset.
    rising = {key: every(50, [2.0, 1.5, 1.2, 1.25, 1.3])}
    assert "val.loss_above_best" in rule_ids(Engine("sft").feed(to_batch(rising)))
    # A run logging eval_loss too is judged on eval_loss (here still falling).
    both = {**rising, "eval_loss": every(50, [2.0, 1.5, 1.2, 1.1, 1.0])}
    assert "val.loss_above_best" not in rule_ids(Engine("sft").feed(to_batch(both)))


@pytest.mark.parametrize("key", ["gold_acc", "gold_reward", "train/gold_score"])
def test_a_gold_score_is_the_task_score_a_proxy_reward_should_move(key: str) -> None:
    hacked = {"reward_mean": [0.2 + 0.02 * i for i in range(30)],
              key: [0.45 + 0.002 * math.sin(i) for i in range(30)]}
    assert "grpo.proxy_hacking" in rule_ids(Engine("grpo").feed(to_batch(hacked)))
    learning = {"reward_mean": [0.2 + 0.02 * i for i in range(30)],
                key: [0.05 + 0.01 * i for i in range(30)]}
    assert "grpo.proxy_hacking" not in rule_ids(Engine("grpo").feed(to_batch(learning)))


def kl_rising_from_zero(then: float, seed: int) -> list[float]:
    """A KL to the reference: 0 for 5 steps, up to 0.15 by step 15, then `then` per step
    more (0: held there by its penalty), with noise of 0.02 a step."""
    rng = random.Random(seed)
    base = [0.0] * 5 + [0.015 * i for i in range(1, 11)]
    base += [0.15 + then * i for i in range(1, 61)]
    return [max(0.0, v + (rng.gauss(0, 0.02) if i >= 5 else 0.0)) for i, v in enumerate(base)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_kl_that_rises_once_and_settles_is_not_growth(seed: int) -> None:
    # A KL-penalised GRPO run: the KL leaves 0, settles near 0.15 and stays.
    settled = {"kl": kl_rising_from_zero(0.0, seed)}
    found = rule_ids(Engine("grpo").feed(to_batch(settled)))
    assert not found & {"grpo.kl_ref_growing", "grpo.kl_ref_spike"}
    # The same start, still climbing by 0.01 a step: growth.
    climbing = {"kl": kl_rising_from_zero(0.01, seed)}
    assert "grpo.kl_ref_growing" in rule_ids(Engine("grpo").feed(to_batch(climbing)))


def test_a_settled_kl_is_judged_alike_in_batches_and_whole() -> None:
    series = {"kl": kl_rising_from_zero(0.004, 7)}
    whole = summary(Engine("grpo").feed(to_batch(series)))
    assert summary(split_feed("grpo", {}, series, random.Random(7))) == whole


@pytest.mark.parametrize("key", ["eval_perplexity", "eval/perplexity", "val_perplexity"])
def test_validation_perplexity_is_the_log_of_the_validation_loss(key: str) -> None:
    name, transform = canonical(key)
    assert name == "val/loss" and transform is not None
    assert transform([math.e ** 2, 1.0]) == pytest.approx([2.0, 0.0])
    series = {"eval_reward": every(10, [0.55, 0.77, 0.98, 0.99, 0.99, 0.99]),
              key: every(10, [4.47, 4.41, 6.48, 8.89, 10.4, 15.4])}
    assert "grpo.perplexity_hacking" in rule_ids(Engine("grpo").feed(to_batch(series)))


def test_hand_written_reward_std_feeds_the_zero_variance_rule() -> None:
    series = {"train_reward_std": [0.3] * 10 + [0.0004] * 10}
    assert "grpo.reward_std_zero" in rule_ids(Engine("grpo").feed(to_batch(series)))


def test_flat_reward_group_ratio_reads_as_zero_variance() -> None:
    assert "grpo.zero_variance" in rule_ids(
        Engine("grpo").feed(to_batch({"flat_reward_group_ratio": [0.8] * 30})))
    assert "grpo.zero_variance" not in rule_ids(
        Engine("grpo").feed(to_batch({"flat_reward_group_ratio": [0.2] * 30})))


def test_alias_transform_complements_frac_mixed() -> None:
    # tinker-cookbook: 10% of groups mixed means 90% had no reward variance.
    series = {"env/all/by_group/frac_mixed": [0.1] * 30}
    assert "grpo.zero_variance" in rule_ids(Engine("rl").feed(to_batch(series)))
    series = {"env/all/by_group/frac_mixed": [0.9] * 30}
    assert "grpo.zero_variance" not in rule_ids(Engine("rl").feed(to_batch(series)))


def test_exclusive_rule_reports_once() -> None:
    val = ([10, 20, 30, 40], [1.0, 0.7, 0.5, 0.4])
    found = Engine("grpo").feed(to_batch({"val/accuracy": val, "val/reward_mean": val}))
    falling = [f for f in found if f.rule_id == "val.falling"]
    assert [f.metric for f in falling] == ["val/accuracy"]


def test_null_values_are_nan() -> None:
    found = Engine("sft").feed(to_batch({"loss": [1.0, None, 1.0]}))
    (f,) = [f for f in found if f.rule_id == "metric.non_finite"]
    assert f.first_step == 1 and f.evidence["value"] == "NaN"


def test_overrides_change_thresholds_and_disable_rules() -> None:
    series = {"truncated_ratio": [0.4] * 30}
    loose = parse({"rules": {"grpo.truncation": {"above": 0.5}}})
    assert "grpo.truncation" not in rule_ids(Engine("grpo", overrides=loose).feed(to_batch(series)))
    off = parse({"rules": {"grpo.truncation": {"enabled": False}}})
    assert "grpo.truncation" not in rule_ids(Engine("grpo", overrides=off).feed(to_batch(series)))
    info = parse({"rules": {"grpo.truncation": {"severity": "info"}}})
    (f,) = [f for f in Engine("grpo", overrides=info).feed(to_batch(series))
            if f.rule_id == "grpo.truncation"]
    assert f.severity == "info"


def test_override_settings_supply_budgets() -> None:
    series = {"mean_sampled_response_length": [500.0] * 30}
    ov = parse({"settings": {"max_sample_tokens": 512}})
    assert "grpo.length_at_budget" in rule_ids(Engine("grpo", overrides=ov).feed(to_batch(series)))


def test_changed_overrides_reset_state() -> None:
    engine = Engine("grpo")
    engine.feed(to_batch({"truncated_ratio": [0.5] * 20}))
    ov = parse({"rules": {"grpo.truncation": {"above": 0.6}}})
    assert Engine("grpo", overrides=ov, state=engine.state()).fresh
    assert not Engine("grpo", state=engine.state()).fresh


@pytest.mark.parametrize("bad, words", [
    ({"rules": {"nope.rule": {}}}, "unknown health rule"),
    ({"rules": {"grpo.truncation": {"abvoe": 0.5}}}, "has no parameter"),
    ({"rules": {"grpo.truncation": {"above": "high"}}}, "must be a number"),
    ({"rules": {"grpo.truncation": {"severity": "fatal"}}}, "severity must be one of"),
    ({"limits": {}}, "unknown section"),
    ({"settings": {"max_sample_tokens": "many"}}, "must be a number"),
])
def test_bad_overrides_say_what_is_wrong(bad: dict[str, Any], words: str) -> None:
    with pytest.raises(ThresholdError, match=words):
        parse(bad)


def test_thresholds_yaml(tmp_path: Any) -> None:
    path = tmp_path / "health.yaml"
    path.write_text("rules:\n  optim.grad_norm_spike: {factor: 20}\n", encoding="utf-8")
    assert load_yaml(path).rules["optim.grad_norm_spike"]["factor"] == 20
    path.write_text("rules: [", encoding="utf-8")
    with pytest.raises(ThresholdError, match="not valid YAML"):
        load_yaml(path)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 1), max_size=40), st.integers(1, 5), st.integers(1, 8),
       st.integers(1, 9))
def test_k_of_n_matches_brute_force(hits: list[int], k: int, n: int, cut: int) -> None:
    n = max(n, k)
    w = KOfN(k, n)
    got = w.feed(hits[:cut]) + KOfN(k, n, w.tail, w.holding).feed(hits[cut:])
    want: list[bool] = []
    for i in range(len(hits)):
        count = sum(hits[max(0, i - n + 1): i + 1])
        held = bool(want) and want[-1] and count >= max(1, (k + 1) // 2)
        want.append(count >= k or held)
    assert got == want


def test_theil_sen_ignores_an_outlier() -> None:
    xs = [float(i) for i in range(8)]
    ys = [2.0 * x for x in xs]
    ys[3] = 1000.0
    assert theil_sen(xs, ys) == pytest.approx(2.0)
    assert math.isclose(theil_sen([0.0, 0.0, 1.0], [1.0, 2.0, 3.0]), 1.5)


finite_st = st.one_of(st.sampled_from([0.0, -0.0, 0.5, 1.0]),
                      st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False))


@settings(max_examples=200, deadline=None)
@given(st.lists(finite_st, min_size=1, max_size=30), st.lists(finite_st, min_size=1, max_size=30),
       st.integers(0, 500))
def test_theil_sen_of_a_head_and_a_tail_apart_is_theil_sen(
        head: list[float], tail: list[float], extra: int) -> None:
    # The no-improvement rule judges a series' first points against its latest every 10
    # points of a long run, with the head's own slopes kept: the same slope, exactly.
    gap = len(head) + extra
    xs = [float(i) for i in range(len(head))] + [float(gap + j) for j in range(len(tail))]
    # (a slope of zero may differ in its sign: the slopes are taken in another order, and
    # the rule only compares the rise with a limit)
    assert theil_sen_apart(head, tail, gap, pair_slopes(head)) == theil_sen(xs, head + tail)


def test_a_long_runs_flat_check_reads_its_first_and_latest_points_where_they_lie() -> None:
    # rl.no_progress asks, every 10 points of a long run, whether the Theil-Sen trend
    # through its first 25 and latest 25 points rises less than z standard errors. At the
    # noise where that rise is exactly the limit, a hair more noise passes and a hair less
    # does not: the slope must be that of the points where they were logged.
    det = NoImprovement(head=25, min_points=10)
    rng = random.Random(4)
    checked = 0
    for i in range(400):
        det.feed([i], [0.002 * i + rng.gauss(0.0, 0.1)])
        if i < 60 or i % 37:
            continue
        first = det.count - len(det.tail)
        xs = [float(k) for k in range(len(det.head))] + [
            float(first + k) for k in range(len(det.tail))]
        rise = theil_sen(xs, det.head + det.tail) * (xs[-1] - xs[0])
        mean = sum(xs) / len(xs)
        spread = sum((x - mean) ** 2 for x in xs)
        limit = rise * math.sqrt(spread) / (det.z * (xs[-1] - xs[0]))
        assert limit > 0
        assert det._trend_flat(limit * 1.000001) and not det._trend_flat(limit * 0.999999)
        checked += 1
    assert checked >= 8


values_st = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32),
                      st.integers(-5, 5), st.none())


@settings(max_examples=40, deadline=None)
@given(st.lists(values_st, min_size=1, max_size=60), st.sampled_from(["sft", "dpo", "grpo"]),
       st.integers(1, 9))
def test_any_series_evaluates_without_error(values: list[Any], method: str, cut: int) -> None:
    # Every metric a rule reads gets the same odd series, in two batches with the state
    # saved in between: the engine must take NaN, infinities, NULLs and ints in stride.
    from runwatch.health.rules import CATALOGUE

    names = {m for r in CATALOGUE for m in r.metrics if m != "*"}
    series = {name: list(values) for name in names}
    batch = to_batch(series)
    first = {k: PointColumns._make(c[:cut] for c in col) for k, col in batch.items()}
    rest = {k: PointColumns._make(c[cut:] for c in col) for k, col in batch.items()
            if col.steps[cut:]}
    engine = Engine(method, {"max_sample_tokens": 8, "batch_size": 4})
    engine.feed(first)
    state = orjson.loads(orjson.dumps(engine.state()))
    again = Engine(method, {"max_sample_tokens": 8, "batch_size": 4}, state=state)
    for f in again.feed(rest):
        json.dumps(f.to_dict(), allow_nan=False)


# --- session 5: names from verl's, TRL's, OpenRLHF's and tinker-cookbook's sources ---

def noisy(level: float, slope: float, n: int = 40) -> list[float]:
    """A reward-like series: a level, a trend per point and a deterministic wobble."""
    return [level + slope * i + 0.1 * math.sin(1.3 * i + 4) for i in range(n)]


@pytest.mark.parametrize("key", ["critic/score/mean", "env/all/correct"])
def test_no_progress_falls_back_to_the_task_score(key: str) -> None:
    # verl's score and tinker-cookbook's correctness: a run that logs no reward is judged
    # on the score it is trained on.
    assert "rl.no_progress" in rule_ids(Engine("grpo").feed(to_batch({key: noisy(0.5, 0)})))
    rising = {key: noisy(0.3, 0.02)}
    assert "rl.no_progress" not in rule_ids(Engine("grpo").feed(to_batch(rising)))


def test_no_progress_reads_the_reward_before_the_score() -> None:
    # The fallback is only a fallback: a rising reward is not judged by a flat score.
    both = {"reward": noisy(0.3, 0.02), "critic/score/mean": noisy(0.5, 0)}
    found = [f for f in Engine("grpo").feed(to_batch(both)) if f.rule_id == "rl.no_progress"]
    assert found == []
    both = {"reward": noisy(0.5, 0), "critic/score/mean": noisy(0.3, 0.02)}
    found = [f for f in Engine("grpo").feed(to_batch(both)) if f.rule_id == "rl.no_progress"]
    assert [f.metric for f in found] == ["reward_mean"]


@pytest.mark.parametrize("key", ["teacher_kl", "train/reverse_kl", "reverse_kl"])
def test_distillation_kl_is_minus_the_reward(key: str) -> None:
    # On-policy distillation maximises minus the reverse KL to the teacher: a KL that
    # does not fall is a run that is not learning; one that falls is.
    flat = {key: [0.1 + 0.01 * math.sin(1.3 * i) for i in range(40)]}
    assert "rl.no_progress" in rule_ids(Engine("ppo").feed(to_batch(flat)))
    falling = {key: [0.3 - 0.006 * i + 0.01 * math.sin(1.3 * i) for i in range(40)]}
    assert "rl.no_progress" not in rule_ids(Engine("ppo").feed(to_batch(falling)))


@pytest.mark.parametrize("key", ["val-core/gsm8k/reward/mean@4", "val-core/math/acc/mean@16",
                                 "val-core/aime/acc/mean@1"])
def test_verl_core_validation_at_any_sample_count_is_val_accuracy(key: str) -> None:
    falling = {key: ([10, 20, 30, 40, 50, 60], [0.7, 0.65, 0.6, 0.5, 0.45, 0.4])}
    assert "val.falling" in rule_ids(Engine("grpo").feed(to_batch(falling)))
    wobble = {key: ([10, 20, 30, 40, 50, 60], [0.7, 0.68, 0.71, 0.69, 0.7, 0.68])}
    assert "val.falling" not in rule_ids(Engine("grpo").feed(to_batch(wobble)))


def test_verl_auxiliary_validation_is_not_val_accuracy() -> None:
    # val-aux keys (std@N, best@N/mean, maj@N/mean) are not the core score.
    falling = {"val-aux/gsm8k/reward/best@4/mean": ([10, 20, 30, 40, 50, 60],
                                                    [0.9, 0.8, 0.7, 0.6, 0.5, 0.4])}
    assert "val.falling" not in rule_ids(Engine("grpo").feed(to_batch(falling)))


def test_verl_reward_kl_penalty_feeds_the_growth_rule() -> None:
    growing = {"actor/reward_kl_penalty": [0.01 + 0.003 * i for i in range(128)]}
    assert "grpo.kl_ref_growing" in rule_ids(Engine("grpo").feed(to_batch(growing)))
    slow = {"actor/reward_kl_penalty": [0.01 + 0.0005 * i for i in range(128)]}
    assert "grpo.kl_ref_growing" not in rule_ids(Engine("grpo").feed(to_batch(slow)))


def test_openrlhf_response_clip_ratio_is_truncation() -> None:
    assert "grpo.truncation_extreme" in rule_ids(
        Engine("ppo").feed(to_batch({"response_clip_ratio": [0.2, 0.9]})))
    assert "grpo.truncation_extreme" not in rule_ids(
        Engine("ppo").feed(to_batch({"response_clip_ratio": [0.2, 0.7]})))


def test_tinker_dpo_loss_feeds_the_dpo_loss_rules() -> None:
    # tinker-cookbook's preference/train_dpo.py logs its DPO loss as dpo_loss
    flat = {"dpo_loss": [0.69 + 0.01 * math.sin(1.3 * i) for i in range(60)]}
    assert "dpo.loss_not_falling" in rule_ids(Engine("dpo").feed(to_batch(flat)))
    falling = {"dpo_loss": [0.69 - 0.008 * i + 0.01 * math.sin(1.3 * i) for i in range(60)]}
    assert "dpo.loss_not_falling" not in rule_ids(Engine("dpo").feed(to_batch(falling)))


@pytest.mark.parametrize("key", ["gpt_loss", "train_mean_nll"])
def test_other_trainers_sft_loss_names_feed_the_loss_rules(key: str) -> None:
    # OpenRLHF's SFT trainer and tinker-cookbook's supervised loop name the loss so.
    flat = {key: [2.0 + 0.05 * math.sin(1.3 * i) for i in range(40)]}
    assert "sft.loss_not_falling" in rule_ids(Engine("sft").feed(to_batch(flat)))
    falling = {key: [2.0 - 0.03 * i + 0.05 * math.sin(1.3 * i) for i in range(40)]}
    assert "sft.loss_not_falling" not in rule_ids(Engine("sft").feed(to_batch(falling)))


@pytest.mark.parametrize(("key", "name"), [
    ("clip_ratio/region_mean", "fb/loss/clip/clipped_ratio/mean"),
    ("rewards/chosen", "mean_chosen_delta"), ("rewards/rejected", "mean_rejected_delta"),
    ("eval_rewards/chosen", "val/mean_chosen_delta"), ("chosen_reward", "mean_chosen_delta"),
    ("reject_reward", "mean_rejected_delta"), ("test/env/all/correct", "val/accuracy"),
    ("train/rewards/chosen", "mean_chosen_delta"),
])
def test_shown_names_resolve(key: str, name: str) -> None:
    # No rule reads these yet; the displays and the catalogue's docs find them.
    assert canonical(key)[0] == name


def test_a_loop_logging_only_train_and_val_loss_is_judged() -> None:
    # A hand-written loop's per-epoch `train_loss` and `val_loss` are its loss and
    # validation loss when it logs them under no other name.
    shifted = [*(3.9 - 0.03 * i for i in range(10)), 3.62, 3.61, 3.60, 4.88, 4.85, 4.83]
    found = rule_ids(Engine("sft").feed(to_batch({"train_loss": shifted})))
    assert "loss.stepped_up" in found
    val = {"train_loss": ramp(2.0, -0.005, 200),
           "val_loss": ([20 * (k + 1) for k in range(9)], [1.5 + 0.05 * k for k in range(9)])}
    assert "sft.overfitting" in rule_ids(Engine("sft").feed(to_batch(val)))


def test_the_hf_trainers_end_of_run_train_loss_does_not_feed_the_loss() -> None:
    # The HF Trainer's last entry holds `train_loss`, the run's mean loss: with `loss`
    # logged, in the same batch or before, it is not read as one more loss point.
    losses = ramp(2.0, -0.01, 30)
    whole = to_batch({"loss": losses, "train_loss": ([29], [4.0])})
    engine = Engine("sft")
    engine.feed(whole)
    assert engine.claims["loss"] == "loss"
    later = Engine("sft")
    later.feed(to_batch({"loss": losses}))
    later.feed(to_batch({"train_loss": ([30], [9.0])}))
    assert later.claims["loss"] == "loss"


@pytest.mark.parametrize(("key", "read"), [
    ("rewards/accuracy_reward/mean", True), ("rewards/correctness_reward_func", True),
    ("rewards/format_reward/mean", False), ("rewards/accuracies", False),
])
def test_a_correctness_reward_function_is_the_task_score(key: str, read: bool) -> None:
    # TRL logs each reward function of a GRPO run; one that scores correctness is the
    # task score the summed reward should move with.
    series = {"reward": [0.2 + 0.02 * i for i in range(30)],
              key: [0.004 + 0.002 * math.sin(i) for i in range(30)]}
    assert ("grpo.proxy_hacking" in rule_ids(Engine("grpo").feed(to_batch(series)))) is read


@pytest.mark.parametrize(("key", "val"), [("reduced_train_loss", "val_loss"),
                                          ("loss", "val_loss")])
def test_nemo_and_keras_loss_names_feed_the_overfitting_rule(key: str, val: str) -> None:
    # NeMo logs reduced_train_loss and val_loss; Keras' history loss and val_loss.
    series = {key: ramp(2.0, -0.005, 200),
              val: ([20 * (k + 1) for k in range(9)], [1.5 + 0.05 * k for k in range(9)])}
    assert "sft.overfitting" in rule_ids(Engine("sft").feed(to_batch(series)))


@pytest.mark.parametrize(("key", "rule_id", "method"), [
    ("reward/mean", "rl.no_progress", "grpo"), ("rewards/mean", "rl.no_progress", "grpo"),
    ("avg_reward", "rl.no_progress", "grpo"), ("train_loss_step", "sft.loss_not_falling", "sft"),
])
def test_hand_written_and_lightning_names_feed_the_rules(key: str, rule_id: str,
                                                         method: str) -> None:
    # Names other tools log for the reward and the loss, read when the run logs the role
    # under no other name; the same series rising (or falling) raises nothing.
    sign = 1 if method == "grpo" else -1
    flat = {key: [0.5 + 0.05 * math.sin(1.3 * i) for i in range(40)]}
    assert rule_id in rule_ids(Engine(method).feed(to_batch(flat)))
    moving = {key: [0.5 + sign * 0.02 * i + 0.05 * math.sin(1.3 * i) for i in range(40)]}
    assert rule_id not in rule_ids(Engine(method).feed(to_batch(moving)))


def _resumed_loss() -> tuple[list[int], list[float]]:
    # A run that crashed at step 400 and resumed from its checkpoint at step 200 logs
    # steps 200.. again, at the loss it had there (1.05), 47% above the 0.72 it had
    # reached: the curve, not a jump.
    def loss(s: int) -> float:
        return (0.5 + 1.5 * math.exp(-s / 200)) * (1 + 0.01 * math.sin(1.7 * s))
    steps = [*range(0, 401, 10), *range(200, 1001, 10)]
    return steps, [loss(s) for s in steps]


@pytest.mark.parametrize("split", [None, 41])
def test_a_run_resumed_from_its_checkpoint_is_no_step_up(split: int | None) -> None:
    steps, values = _resumed_loss()
    eng = Engine("sft")
    if split is None:
        found = eng.feed(to_batch({"loss": (steps, values)}))
    else:  # the second attempt arrives in a later batch, as a live run's does
        first = eng.feed(to_batch({"loss": (steps[:split], values[:split])}))
        found = first + eng.feed(to_batch({"loss": (steps[split:], values[split:])}))
    assert "loss.stepped_up" not in rule_ids(found)


def test_the_same_jump_at_steps_that_go_on_is_a_step_up() -> None:
    # Near miss: the same values logged at steps that keep counting are a loss that
    # jumped 47% and stayed there.
    _, values = _resumed_loss()
    found = Engine("sft").feed(to_batch({"loss": values}))
    assert "loss.stepped_up" in rule_ids(found)


@pytest.mark.parametrize(("key", "rule_id", "method", "series"), [
    # A hand-written loop's names for the roles, read by their words.
    ("kl_div", "grpo.kl_ref_growing", "grpo", ramp(0.01, 0.003, 128)),
    ("loss_kl", "grpo.kl_ref_growing", "grpo", ramp(0.01, 0.003, 128)),
    ("mean_entropy", "grpo.entropy_collapse", "grpo",
     [math.exp(-i / 15) for i in range(64)]),
    ("train_reward", "rl.no_progress", "grpo", [0.5 + 0.05 * math.sin(1.3 * i)
                                                for i in range(40)]),
    ("std_reward", "grpo.reward_std_zero", "grpo", [0.3] * 10 + [0.0] * 8),
    ("mixed_cuts/advantage_collapse_rate", "grpo.zero_variance", "grpo", [0.6] * 12),
    ("zero_std_group_ratio", "grpo.zero_variance", "grpo", [0.6] * 12),
    ("lm_loss", "sft.loss_not_falling", "sft", [2.0 + 0.01 * (i % 3) for i in range(60)]),
])
def test_unknown_names_are_read_by_the_role_their_words_name(
        key: str, rule_id: str, method: str, series: list[float]) -> None:
    assert rule_id in rule_ids(Engine(method).feed(to_batch({key: series})))


@pytest.mark.parametrize(("key", "rule_id", "method", "series"), [
    # Words that make a name something else: a coefficient, a policy KL, a value loss,
    # an epoch mean beside the step series, a reward model's bound.
    ("kl_coef", "grpo.kl_ref_growing", "grpo", ramp(0.01, 0.003, 128)),
    ("train/approx_kl", "grpo.kl_ref_growing", "grpo", ramp(0.01, 0.003, 128)),
    ("entropy_coef", "grpo.entropy_collapse", "grpo", [math.exp(-i / 15) for i in range(64)]),
    ("value_loss", "sft.loss_not_falling", "sft", [2.0 + 0.01 * (i % 3) for i in range(60)]),
    ("train_loss_epoch", "sft.loss_not_falling", "sft",
     [2.0 + 0.01 * (i % 3) for i in range(60)]),
    ("reward_max", "rl.no_progress", "grpo", [0.5 + 0.05 * math.sin(1.3 * i)
                                              for i in range(40)]),
    ("n_degenerate", "grpo.no_signal", "grpo", [4.0] * 5),  # a count, not a share
    # A held-out return of unknown scale: an absolute fall of 0.1 is noise at -500.
    ("eval/mean_reward", "val.falling", "grpo", every(10, [-500.0 + 30 * math.sin(i)
                                                           for i in range(12)])),
])
def test_names_whose_words_say_they_are_something_else_are_not_read(
        key: str, rule_id: str, method: str, series: list[float]) -> None:
    assert rule_id not in rule_ids(Engine(method).feed(to_batch({key: series})))


def test_a_known_name_keeps_its_role_before_one_read_by_its_words() -> None:
    # TRL logs the summed reward and each reward function's mean: the sum (rising) is
    # judged, not a flat part of it that comes first in the batch.
    series = {"rewards/xmlcount_reward_func": [0.5 + 0.05 * math.sin(1.3 * i) for i in range(40)],
              "reward": [0.2 + 0.02 * i for i in range(40)]}
    assert "rl.no_progress" not in rule_ids(Engine("grpo").feed(to_batch(series)))
    alone = {"rewards/xmlcount_reward_func": series["rewards/xmlcount_reward_func"]}
    assert "rl.no_progress" in rule_ids(Engine("grpo").feed(to_batch(alone)))


def test_a_summed_policy_loss_is_read_for_its_spikes() -> None:
    # tinker's `loss:sum` (the loss summed over a batch's tokens): a jump 100 times its
    # noise that comes back at once is a policy loss spike.
    values = [50.0 + 3.0 * math.sin(1.7 * i) for i in range(30)]
    values[20] = -900.0
    assert "grpo.loss_spike" in rule_ids(Engine("grpo").feed(to_batch({"loss:sum": values})))


def test_a_log_whose_steps_repeat_gives_each_spike_its_own_median() -> None:
    # A log that numbers its lines by epoch (three lines a step) read whole: each spike
    # of the gradient norm stands against the median before it, as a line at a time.
    # Steps that repeat cannot be cut by step; they were stamped at the batch's end.
    rng = random.Random(7)
    grad = [1.0 + 0.2 * i / 90 + 0.02 * rng.random() for i in range(90)]
    for i in (30, 55, 80):
        grad[i] = 40.0
    steps = [i // 3 for i in range(90)]
    whole = summary(Engine("sft").feed(to_batch({"grad_norm": (steps, grad)})))
    engine, live = Engine("sft"), {}
    for step, value in zip(steps, grad, strict=True):
        live.update(summary(engine.feed(to_batch({"grad_norm": ([step], [value])}))))
    spikes = {k: v for k, v in whole.items() if k[0] == "optim.grad_norm_spike"}
    assert len({v[3] for v in spikes.values()}) == 3
    assert spikes == {k: v for k, v in live.items() if k[0] == "optim.grad_norm_spike"}
