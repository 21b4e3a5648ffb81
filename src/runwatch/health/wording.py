"""The words a finding's message states its numbers in ("fell only 2.4%", "rose
731-fold", "35 jumps from step 62"), by the rule's detector, and the names its advice
gives settings and metrics, as the run's trainer and log name them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from runwatch.health.build import SETTINGS, number, setting_words
from runwatch.health.findings import change_words, higher_words, level_words, range_words
from runwatch.health.rules.base import Param, Rule
from runwatch.health.trendstats import median_gap_error
from runwatch.store.values import finite as _num

# What a loss-flat finding on a log cut from a longer run says of it (`mid_run`).
MID_RUN = "starts mid-run (not at the run's start)"

# A setting or metric advice names, written in backticks by runwatch's name (the docs show
# it so): a finding's advice names it as the run's trainer and log do (`advice_words`).
NAMED = re.compile(r"`([^`]+)`")
# What advice calls each metric it names where the run does not log it.
METRIC_IDEAS: dict[str, str] = {
    "fb/loss/ratio/mean": "the mean importance ratio",
    "identical_nonzero_reward_skip_ratio": "the share of groups whose samples all succeeded",
    "val/mean_response_length": "the held-out completions' mean length",
    "zero_variance_skip_ratio": "the share of groups whose samples all scored alike",
    "update_ratio": "the size of each update relative to the weights",
    "trained_tokens": "the tokens the loss is computed on",
    "val/loss": "the validation loss",
    "grad_norm": "the gradient norm",
}


def advice_words(advice: str, settings: Mapping[str, float],
                 logged: Callable[[str], str | None]) -> str:
    """A rule's advice as a run reads it: each name in backticks, a setting (`SETTINGS`)
    as the run's trainer names it (`setting_words`), a metric (`METRIC_IDEAS`) as the run
    logs it (`logged`, None where it does not), else in words. The text around them is
    the rule's: only words change, never what the rule found."""
    def named(match: re.Match[str]) -> str:
        name = match[1]
        if name in SETTINGS:
            return setting_words(name, settings)
        return logged(name) or METRIC_IDEAS.get(name, name)

    return NAMED.sub(named, advice)


def message_words(rule: Rule, params: Mapping[str, Param], evidence: Mapping[str, Any],
                  first_step: int) -> dict[str, str]:
    """The fields a message template takes in plain words, by the rule's detector: a
    change ("fell only 2.4%"), repeated jumps, a rise as a multiple, a step up's stay."""
    kind = rule.detector
    if kind == "trend":
        relative = bool(number(params, "relative", 1))
        # the change is the trend's over its window when it last held, not since the
        # finding opened (a KL rising for 300 steps "rose 0.56" over a 64-step window)
        a, b = evidence.get("window_from"), evidence.get("window_to")
        span = (f"from step {a:.0f} to {b:.0f}" if isinstance(a, int | float)
                and isinstance(b, int | float) else f"by step {first_step}")
        flat = params.get("direction") == "flat"
        return {"change": _change(evidence, "effect", "levels", relative, flat),
                "span": span, "between": range_words(evidence.get("levels")) if flat else ""}
    if kind in ("jump", "spike", "above_max"):
        words = {"repeats": _repeats(rule, params, evidence, first_step)}
        ratio, median = evidence.get("ratio"), evidence.get("median")
        if isinstance(median, int | float):
            # a median of 0 (a norm logged as 0 on most steps) has no multiple
            words["against"] = (f"{ratio:.1f}× its median of {median:.3g}"
                                if isinstance(ratio, int | float) and median
                                else f"against a median of {median:.3g}")
        return words
    if kind == "upturn":
        return {"higher": higher_words(evidence.get("rise"), "the low")}
    if kind == "shift":
        # the finding opens at the `stay`-th point above the old level, and counts from it
        count, stay = evidence.get("count"), params.get("stay", 3)
        return {"stayed": f"{int(count) + int(stay) - 1}"
                if isinstance(count, int) and isinstance(stay, int | float) else "?"}
    if kind == "no_improvement":
        return _not_risen(params, evidence)
    if kind == "whole_window":
        fell = change_words(evidence.get("effect"), True)
        size = fell.removeprefix("fell ") if fell.startswith("fell") else None
        log = f"a log that {MID_RUN}" if evidence.get("mid_run") else "its whole log"
        falls = evidence.get("still_falling")
        # the verdict stands, and what lowers it to an info is said after it
        words = {"log": log, "falling": f" It is still falling: it fell at each of its "
                 f"latest {falls:.0f} points." if falls else ""}
        if evidence.get("by_end"):  # its lowest point went further: where it ended
            return {**words, "change": f"ended only {size} below where it started"
                    if size else "ended no lower than where it started"}
        return {**words, "change": f"never fell more than {size} below where it started"
                if size else "never fell below where it started"}
    if kind == "no_progress":
        # "fell only 4%" of a loss that should fall; a fall that is the finding
        # (an entropy down to a fraction of its start) reads "fell 80%".
        wanted = None if number(params, "moved", 0) else str(
            params.get("direction", "down"))
        change = change_words(evidence.get("effect"), True, wanted)
        if evidence.get("mid_run"):
            change += f" in a log that {MID_RUN}"
        return {"change": change}
    if kind == "flat_since":
        verdict = (f"the log {MID_RUN}, so the model may have learned before it."
                   if evidence.get("mid_run") else "the model is not learning.")
        return {"val_change": change_words(evidence.get("val_effect"), True, "down"),
                "train_change": change_words(evidence.get("train_effect"), True, "down"),
                "verdict": verdict}
    if kind == "divergence":
        relative = bool(number(params, "relative", 0))
        words = {}
        for side, levels in (("a", "reference_levels"), ("b", "levels")):
            # a side judged flat (or not rising) says how far it moved in its window
            flat = params.get(f"{side}_dir") in ("flat", "not_up")
            change = _change(evidence, f"{side}_effect_seen", levels, relative, flat)
            words[f"{side}_change"] = change + (range_words(evidence.get(levels))
                                                if flat else _steps_of(evidence.get(levels))
                                                if side == "b" else "")
        return words
    return {}


def _steps_of(levels: Any) -> str:
    """The steps a judged series' change was measured between (" from step 60 to 110"):
    a finding's steps run from its first judgement, and the change it states is its
    window's, which may start long after (a validation that fell 0.12 over its latest
    50 steps of 110)."""
    if not isinstance(levels, Mapping):
        return ""
    a, b = levels.get("from_step"), levels.get("to_step")
    if not (isinstance(a, int | float) and isinstance(b, int | float)):
        return ""
    return f" from step {a:.0f} to {b:.0f}"


def _not_risen(params: Mapping[str, Param], evidence: Mapping[str, Any]) -> dict[str, str]:
    """A series that has not risen (`NoImprovement`) in words: which way it went, over which
    steps, and the two medians it was judged on, each with its window of points. Its
    medians alone can hide a fall (a reward at 0.6 for its first 4 points and 0 after has
    both at 0, which read "did not change (0 to 0)"): a first point that stands above the
    latest median by more than twice the noise is said too, as a fall."""
    up = params.get("direction", "up") != "down"
    start, now = _num(evidence.get("start")), _num(evidence.get("now"))
    noise, points = _num(evidence.get("noise")) or 0.0, _num(evidence.get("points"))
    k = _num(evidence.get("window"))
    if k is None and points is not None:  # a finding stored before it kept its window
        k = min(points // 2, number(params, "head", 25))
    a, b = _num(evidence.get("from_step")), _num(evidence.get("to_step"))
    steps = f" (steps {a:.0f} to {b:.0f})" if a is not None and b is not None else ""
    if start is None or now is None or k is None:
        return {"change": change_words(evidence.get("effect"), False, "up" if up else "down"),
                "steps": steps, "judged": "its medians are not known"}
    sign, way = (1.0, "rise") if up else (-1.0, "fall")
    lost = "fell" if up else "rose"
    latest = f"the median of its latest {k:.0f} points is {now:.3g}"
    first = _num(evidence.get("first_point"))
    noted = f"{sign * (now - start):.3g}"
    if sign * (now - start) < 0 and noted.strip("-0.") != "":
        # a dip of a flat reward's medians is no fall: its noise is said with it
        within = (", within its noise (sd {noise:.2g} per point)"
                  if abs(now - start) <= number(params, "z", 1.0) * median_gap_error(
                      noise, int(k)) else "")
        return {"change": lost, "steps": steps,
                "judged": f"{latest}, {'down' if up else 'up'} from {start:.3g} for its "
                          f"first {k:.0f}{within.format(noise=noise)}"}
    if first is not None and sign * (first - now) > 2 * noise and f"{first:.3g}" != f"{now:.3g}":
        return {"change": lost, "steps": steps,
                "judged": f"it opened at {first:.3g}, and {latest}, no "
                          f"{'higher' if up else 'lower'} than {start:.3g} for its first "
                          f"{k:.0f}"}
    if noted.strip("-0.") == "":
        return {"change": f"did not {way}", "steps": steps,
                "judged": f"{latest}, as for its first {k:.0f} (noise sd {noise:.2g} per "
                          "point)"}
    return {"change": f"{'rose' if up else 'fell'} only {abs(now - start):.3g}",
            "steps": steps,
            "judged": f"{latest}, against {start:.3g} for its first {k:.0f}, within its "
                      f"noise (sd {noise:.2g} per point)"}


def _change(evidence: Mapping[str, Any], effect: str, levels: str, relative: bool,
            flat: bool) -> str:
    """A trend's change in words. The rule decided on its effect: the Theil-Sen change
    over the window, relative to the window's median level where `relative`. A message
    states a relative change, or one judged flat, between the window's first and last
    levels instead (`level_words`): a share of the median reads "fell 107%" of an
    entropy from 0.6 to 0.058, and a flat slope "did not change" of a loss that fell 10%
    and came back. An absolute trend's change is its effect, as the rule read it."""
    words = level_words(evidence.get(levels), relative) if relative or flat else None
    return words or change_words(evidence.get(effect), relative)


def _repeats(rule: Rule, params: Mapping[str, Param], evidence: Mapping[str, Any],
             first_step: int) -> str:
    """What a spike's message adds when it repeated: how many, since when, and the
    highest where the message quotes another (a loss that explodes jumps again and
    again; its latest jump alone understates it)."""
    count, kind = evidence.get("count"), rule.detector
    if not isinstance(count, int) or count < 2:
        return ""
    noun = "spike" if kind == "spike" else "jump"
    row = evidence.get("in_a_row")
    if kind == "spike" and isinstance(row, int) and row >= count:
        # every point since the first stood past the limit: a step up that stays, which
        # its rolling median has not caught up with yet, not spikes that come back
        return (f"; it stayed that high on {count} logged points in a row from step "
                f"{first_step}: a step up, not a spike that comes back")
    words = (f"; {count} {noun}s from step {first_step}, each within "
             f"{params.get('hold')} points of the one before")
    top, latest = evidence.get("max"), evidence.get("to")
    if kind != "spike" and isinstance(top, int | float) and top != latest:
        words += f", the highest to {top:.4g}"
    return words
