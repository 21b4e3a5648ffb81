"""A run whose method is not given, or not known, is judged by the rules of the family
its name or its metrics tell.

Found in a trial (session 36): a run logging a GRPO entropy collapse with no `method`, or
with `method="Dr. GRPO"` or `"my_rl"`, got no finding at all, where `method="grpo"` got
`grpo.entropy_collapse`: an unknown name passed through unchanged, and only the rules of
every method applied, so a user who leaves the optional method out was not watched.
"""

from __future__ import annotations

import random

import pytest

from runwatch.health.engine import normalize_method, told_method

from .helpers import evaluate, of_rule, rule_ids
from .test_engine import split_feed


def _collapse(seed: int = 1) -> dict[str, list[float]]:
    """An entropy that falls from 0.6 to 0.06 after step 40 beside a flat loss, with the
    reward of a GRPO run."""
    rng = random.Random(seed)
    n = 100
    entropy = [(0.6 if i < 40 else 0.6 - 0.54 * (i - 40) / 60) + rng.gauss(0, 0.01)
               for i in range(n)]
    return {"entropy": entropy, "loss": [2.0 + rng.gauss(0, 0.01) for _ in range(n)]}


@pytest.mark.parametrize(("given", "family"), [
    ("grpo", "grpo"), ("Dr. GRPO", "grpo"), ("DR-GRPO", "grpo"), ("my_rl", "grpo"),
    ("PPO", "grpo"), ("dpo_v2", "dpo"), ("SFT", "sft"), ("", ""), (None, ""),
    ("weird", "weird"), ("sft_then_dpo", "sft_then_dpo")])  # two families: not known
def test_a_method_name_is_read_in_any_case_and_punctuation(given: str | None,
                                                            family: str) -> None:
    assert normalize_method(given) == family


@pytest.mark.parametrize("method", ["Dr. GRPO", "my_rl"])
def test_a_grpo_run_under_another_name_gets_the_grpo_rules(method: str) -> None:
    # on the engine before: no finding at all (the name passed through unknown)
    assert of_rule(evaluate(method, {}, _collapse()), "grpo.entropy_collapse")
    assert of_rule(evaluate("grpo", {}, _collapse()), "grpo.entropy_collapse")


@pytest.mark.parametrize("method", [None, "weird"])
def test_a_run_of_no_known_method_is_judged_by_what_its_metrics_tell(
        method: str | None) -> None:
    rng = random.Random(3)
    # a reward (GRPO's own metric) beside the collapse: GRPO's rules
    grpo = {**_collapse(), "reward_mean": [0.5 + rng.gauss(0, 0.02) for _ in range(100)]}
    assert of_rule(evaluate(method or "", {}, grpo), "grpo.entropy_collapse")
    # a DPO log whose loss collapses to 0 with accuracy 1: DPO's rules (before: none)
    dpo = {"loss": [max(0.005, 0.69 * 0.9 ** i) for i in range(60)],
           "rewards/accuracies": [1.0] * 60, "rewards/margins": [2.0 + 0.4 * i
                                                                  for i in range(60)]}
    assert any(r.startswith("dpo.") for r in rule_ids(evaluate(method or "", {}, dpo)))
    # a loss alone is supervised: the flat loss is SFT's "not falling", and the entropy
    # (which supervised trainers log too) is judged by no GRPO rule
    sft = rule_ids(evaluate(method or "", {}, _collapse()))
    assert "sft.loss_not_falling" in sft
    assert not any(r.startswith("grpo.") for r in sft)


def test_the_family_told_is_kept_across_batches() -> None:
    # fed a few steps at a time with the state saved between: told once, kept (a batch
    # holding only the entropy would not tell it again)
    series = {**_collapse(), "reward_mean": [0.5] * 100}
    found = split_feed("", {}, series, random.Random(5))
    assert of_rule(found, "grpo.entropy_collapse")


def test_metrics_that_tell_nothing_yet_leave_the_family_open() -> None:
    assert told_method({"learning_rate", "grad_norm"}) is None
    assert told_method({"loss", "grad_norm"}) == "sft"
    assert told_method({"loss", "mean_margin", "reward_mean"}) == "dpo"
    assert told_method({"loss", "fb/loss/kl_ref/mean"}) == "grpo"
