"""A finding's advice names settings and metrics as the run's trainer and log name them.

A TRL GRPO run was told to "raise max_sample_tokens, or set overlong_penalty_factor", to
check `zero_variance_skip_ratio` and change `group_size`: runwatch's recipe names, where
its config holds max_completion_length and num_generations, it logs frac_reward_zero_std,
and TRL has no overlong penalty setting. Advice writes runwatch's names in backticks (the
docs show them so) and the engine names each as the run does, or by its idea.
"""

from __future__ import annotations

import math
import re

import pytest

from runwatch.health.build import BUDGET_NAMES, SETTINGS, setting_words
from runwatch.health.engine import Engine
from runwatch.health.findings import Finding
from runwatch.health.rules import CATALOGUE
from runwatch.health.wording import METRIC_IDEAS, NAMED, advice_words

from .helpers import evaluate, of_rule, to_batch

# What TRL 1.16's GRPOConfig writes (a run's settings are its config's numeric leaves).
TRL = {"num_generations": 4.0, "max_completion_length": 8.0, "epsilon": 0.2,
       "learning_rate": 1e-4, "steps_per_generation": 1.0, "num_train_epochs": 3.0,
       "beta": 0.04, "temperature": 1.0, "max_grad_norm": 1.0}
# What runwatch's GRPO recipe writes.
RECIPE = {"group_size": 8.0, "max_sample_tokens": 8.0, "overlong_penalty_factor": 0.0,
          "clip_low_threshold": 0.8, "clip_high_threshold": 1.28, "learning_rate": 1e-4,
          "num_minibatches": 1.0, "beta": 0.0, "temperature": 0.5, "max_grad_norm": 1.0}
WOBBLE = [0.5 + 0.1 * math.sin(1.3 * i) for i in range(40)]
PINNED = [0.0, 0.0, 0.0, 0.0, 0.1, 0.0]
LOSS = [2.0 - 0.005 * i for i in range(200)]
VAL_RISING = ([20 * (k + 1) for k in range(9)], [1.5 + 0.05 * k for k in range(9)])


def _advice(found: list[Finding], rule_id: str) -> str:
    (finding,) = of_rule(found, rule_id)
    return finding.advice


def test_a_trl_run_is_told_its_own_settings_and_metrics() -> None:
    truncation = _advice(evaluate("grpo", TRL, {"completions/clipped_ratio": [0.91]}),
                         "grpo.truncation_extreme")
    assert truncation == ("The budget is too tight or the output runs away: raise "
                          "max_completion_length, or set a penalty on overlong completions "
                          "in the reward (runwatch's recipe setting overlong_penalty_factor).")
    stuck = _advice(evaluate("grpo", TRL, {"reward": WOBBLE, "frac_reward_zero_std": [0.1] * 40}),
                    "rl.no_progress")
    assert "within groups (frac_reward_zero_std), raise learning_rate," in stuck
    pinned = _advice(evaluate("grpo", TRL, {"reward": PINNED}), "grpo.reward_pinned")
    assert pinned.endswith("the reward (partial credit), num_generations or temperature.")


def test_a_recipe_run_is_told_runwatchs_names() -> None:
    # the near miss: the same findings in runwatch's names keep runwatch's words
    truncation = _advice(evaluate("grpo", RECIPE, {"truncated_ratio": [0.91]}),
                         "grpo.truncation_extreme")
    assert truncation == ("The budget is too tight or the output runs away: raise "
                          "max_sample_tokens, or set overlong_penalty_factor.")
    stuck = _advice(evaluate("grpo", RECIPE, {"reward_mean": WOBBLE,
                                              "zero_variance_skip_ratio": [0.1] * 40}),
                    "rl.no_progress")
    assert "within groups (zero_variance_skip_ratio), raise learning_rate," in stuck
    pinned = _advice(evaluate("grpo", RECIPE, {"reward_mean": PINNED}), "grpo.reward_pinned")
    assert pinned.endswith("the reward (partial credit), group_size or temperature.")


def test_only_the_words_differ_between_the_two_runs() -> None:
    def judged(settings: dict[str, float], series: dict[str, list[float]]) -> set[tuple]:
        return {(f.rule_id, f.severity, f.status, f.first_step, f.last_step)
                for f in evaluate("grpo", settings, series)}

    for trl, ours in ((({"completions/clipped_ratio": [0.91]}), {"truncated_ratio": [0.91]}),
                      ({"reward": WOBBLE}, {"reward_mean": WOBBLE}),
                      ({"reward": PINNED}, {"reward_mean": PINNED})):
        assert judged(TRL, trl) == judged(RECIPE, ours)


def test_a_run_with_no_config_is_told_common_names_and_ideas() -> None:
    # no config tells the trainer: a name most trainers share stays, a recipe's own is
    # said in words, and a metric the run does not log is said in words
    stuck = _advice(evaluate("grpo", {}, {"reward_mean": WOBBLE}), "rl.no_progress")
    assert stuck == ("The policy is not learning from this reward: check that rewards vary "
                     "within groups (the share of groups whose samples all scored alike), "
                     "raise learning_rate, and read the rollouts for a reward the model "
                     "cannot earn.")
    pinned = _advice(evaluate("grpo", {}, {"reward_mean": PINNED}), "grpo.reward_pinned")
    assert pinned.endswith("the number of completions per prompt (runwatch's recipe setting "
                           "group_size) or temperature.")


def test_a_config_without_a_common_setting_is_told_the_idea() -> None:
    # runwatch's recipes count steps, not epochs: no num_epochs to lower
    found = evaluate("sft", RECIPE, {"loss": LOSS, "val/loss": VAL_RISING})
    advice = _advice(found, "sft.overfitting")
    assert advice.startswith("The model is overfitting: lower the number of epochs or "
                             "learning_rate,")
    trl = _advice(evaluate("sft", TRL, {"loss": LOSS, "eval_loss": VAL_RISING}),
                  "sft.overfitting")
    assert trl.startswith("The model is overfitting: lower num_train_epochs or learning_rate,")
    assert trl.endswith("keep the checkpoint with the lowest eval_loss.")


def test_other_trainers_names() -> None:
    verl = {"n": 8.0, "max_response_length": 512.0, "clip_ratio": 0.2, "kl_loss_coef": 1e-3,
            "lr": 1e-6, "grad_clip": 1.0}
    pinned = _advice(evaluate("grpo", verl, {"critic/rewards/mean": PINNED}),
                     "grpo.reward_pinned")
    # verl's temperature is rollout.temperature: not in these settings, so in words
    assert pinned.endswith("rollout.n or the sampling temperature.")
    clip = _advice(evaluate("grpo", verl, {"actor/pg_clipfrac": [0.5] * 10}), "grpo.clip_high")
    assert clip.endswith("lower lr, or raise clip_ratio_high to widen the clip band.")
    openrlhf = {"n_samples_per_prompt": 4.0, "generate_max_len": 1024.0,
                "actor_learning_rate": 5e-7, "temperature": 1.0}
    pinned = _advice(evaluate("grpo", openrlhf, {"reward": PINNED}), "grpo.reward_pinned")
    assert "n_samples_per_prompt or temperature." in pinned


def test_a_setting_trl_writes_as_null_is_named_by_trl() -> None:
    # epsilon_high is null until set: TRL's epsilon shows the trainer has it
    assert setting_words("clip_high_threshold", {"epsilon": 0.2}) == "epsilon_high"
    assert setting_words("clip_high_threshold", {"epsilon_high": 0.28}) == "epsilon_high"
    assert setting_words("clip_low_threshold", {"epsilon": 0.2}) == "epsilon"


def test_findings_the_engine_builds_itself_are_named_too() -> None:
    # the non-finite incident and the stall are built by the engine, not by a rule's
    # evaluator: their advice is the run's as well
    engine = Engine("grpo", {"lr": 1e-6, "grad_clip": 1.0})
    found = engine.feed(to_batch({"loss": [0.5, math.nan, 0.4]}))
    (nonfinite,) = of_rule(found, "metric.non_finite")
    assert nonfinite.advice.startswith("Training diverged or divided by zero: lower lr, set "
                                       "grad_clip,")
    (stall,) = engine.check_stall(now=1e12, running=True)
    assert "`" not in stall.advice


def test_every_name_advice_gives_is_one_the_engine_can_name_per_run() -> None:
    # a setting or metric written bare would reach every run in runwatch's name again
    known = set(SETTINGS) | set(METRIC_IDEAS) | {n.key for s in SETTINGS.values()
                                                  for n in s.names}
    for rule in CATALOGUE:
        marked = NAMED.findall(rule.advice)
        assert set(marked) <= set(SETTINGS) | set(METRIC_IDEAS), rule.id
        bare = NAMED.sub("", rule.advice)
        written = {w for w in re.findall(r"[\w/]+", bare) if w in known}
        assert not written, f"{rule.id} names {written} outside backticks"


@pytest.mark.parametrize("settings", [{}, TRL, RECIPE])
def test_rendered_advice_never_tells_a_trl_run_to_set_a_recipe_setting(
        settings: dict[str, float]) -> None:
    recipe_only = {name for name, words in SETTINGS.items() if words.recipe}
    for rule in CATALOGUE:
        text = advice_words(rule.advice, settings, lambda name: None)
        assert "`" not in text
        if settings is TRL:
            said = set(re.findall(r"(?<!recipe setting )\b(\w+)", text)) & recipe_only
            assert not said, f"{rule.id} tells a TRL run to change {said}"


def test_the_budget_names_are_the_settings_table_s() -> None:
    assert BUDGET_NAMES == {"max_sample_tokens": ("max_completion_length",
                                                  "max_response_length", "response_length",
                                                  "generate_max_len",
                                                  "max_new_tokens")}
