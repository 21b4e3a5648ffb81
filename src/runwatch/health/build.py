"""A rule's detector, built from its resolved parameters and the run's settings."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runwatch.health import against as ag
from runwatch.health import detectors as d
from runwatch.health import excursions as ex
from runwatch.health import finished as fin
from runwatch.health import improvement as im
from runwatch.health import jumps as j
from runwatch.health import progress as pg
from runwatch.health import trends as t
from runwatch.health.rules.base import Param, Rule


@dataclass(frozen=True)
class Named:
    """Another trainer's name for a setting: `key` in the run's settings (a config's last
    name, at any depth) shows the run's trainer has it, and advice calls it `shown` (else
    `key`): TRL writes epsilon_high as null until it is set, but always writes epsilon."""

    key: str
    shown: str = ""


@dataclass(frozen=True)
class SettingWords:
    """How advice names a setting (`Rule.advice` writes runwatch's name in backticks).

    A run whose config holds the setting under runwatch's name or one of `names` is told
    that name. One of runwatch's recipes' own settings (`recipe`) is otherwise told as
    `idea` followed by "(runwatch's recipe setting NAME)"; a setting most trainers name
    alike (learning_rate) by runwatch's name where the run has no config to tell its
    trainer by, and as `idea` where its config has no such setting."""

    idea: str
    names: tuple[Named, ...] = ()
    recipe: bool = True


N = Named
# Every setting health advice names, by runwatch's name, with other trainers' names for it
# (TRL 1.16's GRPOConfig, RLOOConfig, DPOConfig and SFTConfig, which extend the Hugging
# Face TrainingArguments; verl's and OpenRLHF's configs), in the order they are looked for.
# A setting no other trainer has (overlong_penalty_factor: TRL's soft overlong punishment
# is a reward function) is named by its idea there, never as a setting to set.
SETTINGS: dict[str, SettingWords] = {
    # OpenRLHF, verl (actor_rollout_ref.actor.optim.lr)
    "learning_rate": SettingWords("the learning rate", (N("actor_learning_rate"), N("lr")),
                                  recipe=False),
    # verl, OpenRLHF
    "max_grad_norm": SettingWords("the gradient clipping norm", (N("grad_clip"), N("max_norm")),
                                  recipe=False),
    # verl
    "max_steps": SettingWords("the training steps", (N("total_training_steps"),),
                              recipe=False),
    # TRL and the Hugging Face Trainer, verl, OpenRLHF: runwatch's recipes count max_steps
    "num_epochs": SettingWords("the number of epochs", (
        N("num_train_epochs"), N("total_epochs"), N("max_epochs")), recipe=False),
    "temperature": SettingWords("the sampling temperature", recipe=False),
    # GRPO's KL coefficient: verl's, OpenRLHF's (DPO's beta is beta in every trainer)
    "beta": SettingWords("the KL coefficient", (N("kl_loss_coef"), N("init_kl_coef")),
                         recipe=False),
    # TRL, verl, OpenRLHF, a generation config; also the budget its rules compare against
    # (`BUDGET_NAMES`), in this order
    "max_sample_tokens": SettingWords("the completion token limit", (
        N("max_completion_length"), N("max_response_length"), N("response_length"),
        N("generate_max_len"), N("max_new_tokens"))),
    # TRL, OpenRLHF, verl
    "group_size": SettingWords("the number of completions per prompt", (
        N("num_generations"), N("n_samples_per_prompt"), N("n", "rollout.n"))),
    "overlong_penalty_factor": SettingWords("a penalty on overlong completions in the reward"),
    # TRL, verl: widened by a higher threshold and by a higher epsilon alike
    "clip_high_threshold": SettingWords("the upper clip bound of the importance ratio", (
        N("epsilon_high"), N("epsilon", "epsilon_high"), N("clip_ratio_high"),
        N("clip_ratio", "clip_ratio_high"))),
    # TRL, verl: widened by a lower threshold but by a higher epsilon (advice says "widen")
    "clip_low_threshold": SettingWords("the lower clip bound of the importance ratio", (
        N("epsilon"), N("clip_ratio_low"), N("clip_ratio", "clip_ratio_low"))),
    # TRL: the optimizer steps each generated batch is split into
    "num_minibatches": SettingWords("the optimizer steps per sampled batch", (
        N("steps_per_generation"),)),
    # TRL (with vLLM)
    "max_model_length": SettingWords("the context length", (N("vllm_max_model_length"),)),
    "max_steps_off_policy": SettingWords("the steps a rollout may lag the policy"),
    "max_sampling_attempts": SettingWords("the batches a step may draw"),
    "groups_in_flight": SettingWords("the groups collected ahead of the trainer"),
    "max_turns": SettingWords("the turn limit"),
    "weights_sync_interval": SettingWords("the steps between weight syncs"),
}

# The names other trainers give a budget setting, looked for when the run's config lacks
# runwatch's own (settings are read by their last name, at any depth).
BUDGET_NAMES: dict[str, tuple[str, ...]] = {
    "max_sample_tokens": tuple(n.key for n in SETTINGS["max_sample_tokens"].names),
}


def setting_words(name: str, settings: Mapping[str, float]) -> str:
    """What advice calls setting `name` (`SETTINGS`) in a run of these settings: its name
    in the run's config, else in words (`SettingWords`)."""
    words = SETTINGS[name]
    if name in settings:
        return name
    found = next((n for n in words.names if n.key in settings), None)
    if found is not None:
        return found.shown or found.key
    if words.recipe:
        return f"{words.idea} (runwatch's recipe setting {name})"
    return words.idea if settings else name


def setting_value(name: str, settings: Mapping[str, float]) -> float | None:
    """Setting `name` in a run's settings: by runwatch's name, else by the first of other
    trainers' names for it (`BUDGET_NAMES`, from `SETTINGS`) the run's config holds (a TRL
    run's max_completion_length is its max_sample_tokens); None where it holds none."""
    return next((settings[n] for n in (name, *BUDGET_NAMES.get(name, ())) if n in settings),
                None)


def budget_value(
    rule: Rule, params: Mapping[str, Param], settings: Mapping[str, float]
) -> float | None:
    """The run setting a budget rule compares against (by runwatch's name, else by the
    first of its other names, `BUDGET_NAMES`), or None when it is unknown."""
    if "budget" in params:
        return float(params["budget"])
    assert rule.budget is not None
    total = 1.0
    for part in rule.budget.split("*"):
        name = part.strip()
        log = name.startswith("ln(") and name.endswith(")")  # the setting's natural log
        if log:
            name = name[3:-1]
        value = setting_value(name, settings)
        if value is None or (log and not float(value) > 1):
            return None
        total *= math.log(float(value)) if log else float(value)
    return total


def number(params: Mapping[str, Param], name: str, default: float) -> float:
    """Param `name` as a number (`default` when it is missing or text)."""
    value = params.get(name, default)
    return float(value) if not isinstance(value, str) else default


def build_detector(rule: Rule, p: Mapping[str, Param], settings: Mapping[str, float],
                   state: dict[str, Any] | None) -> Any:
    """The detector for `rule` with resolved params `p`; None when a budget is unknown, or
    when a pinned rule's `unless_setting` is known (the limit it infers from the log)."""
    kind = rule.detector
    if kind == "threshold":
        above = p.get("above")
        below = p.get("below")
        if rule.budget is not None:
            budget = budget_value(rule, p, settings)
            if budget is None:
                return None
            limit = number(p, "fraction", 1.0) * budget
            above, below = (limit, None) if p.get("side", "above") == "above" else (None, limit)
        return d.Threshold(
            above=None if above is None else float(above),
            below=None if below is None else float(below),
            k=int(number(p, "k", 1)), n=int(number(p, "n", 1)),
            min_points=int(number(p, "min_points", 0)),
            k_binary=int(p["k_binary"]) if "k_binary" in p else None, state=state,
        )
    if kind == "pinned":
        known = p.get("unless_setting")
        if isinstance(known, str) and setting_value(known, settings) is not None:
            return None  # a rule that reads the setting itself judges the run
        return d.Pinned(k=int(number(p, "k", 1)), n=int(number(p, "n", 1)),
                        min_points=int(number(p, "min_points", 0)), state=state)
    if kind == "spike":
        factor = number(p, "factor", 0.0)
        drop = number(p, "drop", 0.0)
        return j.Spike(
            factor=factor or None, drop=drop or None, window=int(number(p, "window", 200)),
            min_history=int(number(p, "min_history", 10)), floor=number(p, "floor", 0.0),
            min_median=number(p, "min_median", 0.0), hold=int(number(p, "hold", 5)),
            noise_k=number(p, "noise_k", 0.0), state=state,
        )
    if kind == "trend":
        return t.Trend(
            direction=str(p["direction"]), window=int(number(p, "window", 64)),
            min_effect=number(p, "min_effect", 0.1), relative=bool(number(p, "relative", 1)),
            min_buckets=int(number(p, "min_buckets", 4)), recent_z=number(p, "recent_z", 0.0),
            noise_z=number(p, "noise_z", 0.0), undone=int(number(p, "undone", 0)), state=state,
        )
    if kind == "no_progress":
        return pg.NoProgress(
            direction=str(p.get("direction", "down")), min_change=number(p, "min_change", 0.05),
            warmup=int(number(p, "warmup", 30)), bucket=int(number(p, "bucket", 5)),
            warmup_steps=int(number(p, "warmup_steps", 0)),
            min_points=int(number(p, "min_points", 0)), moved=bool(number(p, "moved", 0)),
            max_spread=number(p, "max_spread", 0.0), noise_z=number(p, "noise_z", 0.0),
            window_info=bool(number(p, "window_info", 0)),
            latest=int(number(p, "latest", 0)), fell_once=number(p, "fell_once", 0.0),
            rise_limit=number(p, "rise_limit", 0.0), state=state,
        )
    if kind == "divergence":
        return t.Divergence(
            a_dir=str(p["a_dir"]), b_dir=str(p["b_dir"]), window=int(number(p, "window", 6)),
            a_effect=number(p, "a_effect", 0.05), b_effect=number(p, "b_effect", 0.05),
            a_bucket=int(number(p, "a_bucket", 5)), relative=bool(number(p, "relative", 0)),
            noise_z=number(p, "noise_z", 0.0), a_noise_z=number(p, "a_noise_z", 0.0),
            state=state,
        )
    if kind == "jump":
        return j.Jump(
            z=number(p, "z", 6.0), min_rel=number(p, "min_rel", 0.05),
            window=int(number(p, "window", 20)), min_history=int(number(p, "min_history", 10)),
            hold=int(number(p, "hold", 10)), both=bool(number(p, "both", 0)), state=state,
        )
    if kind == "above_max":
        return j.AboveMax(factor=number(p, "factor", 2.0),
                          min_history=int(number(p, "min_history", 3)),
                          hold=int(number(p, "hold", 5)),
                          magnitude=bool(number(p, "magnitude", 0)),
                          floor=number(p, "floor", 0.0), state=state)
    if kind == "diverged":
        return ag.Diverged(factor=number(p, "factor", 2.0),
                          min_history=int(number(p, "min_history", 2)),
                          hold=int(number(p, "hold", 3)), state=state)
    if kind == "gap_rising":
        return ag.GapRising(ratio=number(p, "ratio", 3.0), min_rel=number(p, "min_rel", 0.01),
                           hold=int(number(p, "hold", 3)), state=state)
    if kind == "shift":
        return j.Shift(
            z=number(p, "z", 6.0), min_rel=number(p, "min_rel", 0.2),
            window=int(number(p, "window", 10)), stay=int(number(p, "stay", 3)), state=state,
        )
    if kind == "excursion":
        return ex.Excursion(
            min_rel=number(p, "min_rel", 0.5), z=number(p, "z", 3.0),
            window=int(number(p, "window", 20)), stay=int(number(p, "stay", 5)),
            back=number(p, "back", 0.2), hold=int(number(p, "hold", 5)), state=state,
        )
    if kind == "isolated":
        return ex.Isolated(factor=number(p, "factor", 3.0), window=int(number(p, "window", 5)),
                          min_history=int(number(p, "min_history", 3)),
                          back=number(p, "back", 1.5), hold=int(number(p, "hold", 5)),
                          state=state)
    if kind == "upturn":
        return ex.Upturn(min_rel=number(p, "min_rel", 0.005),
                        min_points=int(number(p, "min_points", 8)), z=number(p, "z", 5.0),
                        window=int(number(p, "window", 40)), state=state)
    if kind == "above_best":
        return ag.AboveBest(
            min_rel=number(p, "min_rel", 0.01), k=int(number(p, "k", 2)),
            single=number(p, "single", 0.05), min_points=int(number(p, "min_points", 3)),
            direction=str(p.get("direction", "up")), min_drop=number(p, "min_drop", 0.0),
            back_k=int(number(p, "back_k", 1)),
            state=state,
        )
    if kind == "no_improvement":
        return im.NoImprovement(
            direction=str(p.get("direction", "up")), z=number(p, "z", 1.0),
            min_points=int(number(p, "min_points", 10)), head=int(number(p, "head", 25)),
            early_points=int(number(p, "early_points", 0)),
            mean_z=number(p, "mean_z", math.inf), state=state,
        )
    if kind == "flat_since":
        return t.FlatSince(min_change=number(p, "min_change", 0.04),
                           min_points=int(number(p, "min_points", 3)),
                           noise_z=number(p, "noise_z", 0.0), state=state)
    if kind == "whole_window":
        return fin.WholeWindow(state=state)
    if kind == "nonfinite":
        return d.NonFinite()
    if kind == "repeats":
        return d.Repeats(length=int(number(p, "length", 4)), chance=number(p, "chance", 1e-3),
                         state=state)
    raise ValueError(f"rule {rule.id} has detector {kind!r}, which the engine cannot build")
