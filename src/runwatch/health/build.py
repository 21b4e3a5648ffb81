"""A rule's detector, built from its resolved parameters and the run's settings."""

from __future__ import annotations

import math
from collections.abc import Mapping
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

# The names other trainers give a budget setting, looked for when the run's config lacks
# runwatch's own: the completion's token limit is TRL's max_completion_length, verl's
# data.max_response_length, OpenRLHF's generate_max_len, a generation config's
# max_new_tokens (settings are read by their last name, at any depth).
BUDGET_NAMES: dict[str, tuple[str, ...]] = {
    "max_sample_tokens": ("max_completion_length", "max_response_length",
                          "generate_max_len", "max_new_tokens"),
}


def budget_value(
    rule: Rule, params: Mapping[str, Param], settings: Mapping[str, float]
) -> float | None:
    """The run setting a budget rule compares against (by runwatch's name, else by the
    first of its other names, `BUDGET_NAMES`), or None when it is unknown."""
    if "budget" in params:
        return float(params["budget"])
    assert rule.budget is not None
    total = 1.0
    for name in rule.budget.split("*"):
        names = (name.strip(), *BUDGET_NAMES.get(name.strip(), ()))
        value = next((settings[n] for n in names if n in settings), None)
        if value is None:
            return None
        total *= float(value)
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
        if isinstance(known, str) and known in settings:
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
