"""Writes docs/health.md from the rule catalogue: `python -m runwatch.health.docs [PATH]`.

The catalogue is the source of truth; a test fails when the page misses a rule.
"""

from __future__ import annotations

import re
import sys

from runwatch.health.docs_engine import DETECTOR_DOCS, ENGINE
from runwatch.health.docs_score import SCORE
from runwatch.health.history import history
from runwatch.health.rules import BY_ID, CATALOGUE, Rule
from runwatch.health.rules.base import ALL_METHODS, LEARNING_PARAMS, SEVERITY_RANK
from runwatch.health.scoring import RULE_CLASSES
from runwatch.health.thresholds import setting_names
from runwatch.metrics.docs import write_generated

# `{RULE_ID:PARAM}` (or `{RULE_ID:PARAM%}`) in the engine's text: a rule's default parameter
PARAM = re.compile(r"\{([a-z_]+\.[a-z_.]+):([a-z_]+)(%?)\}")


def _methods(rule: Rule) -> str:
    return "all" if rule.methods == ALL_METHODS else ", ".join(rule.methods)


def _params(rule: Rule) -> str:
    if not rule.params:
        return "—"
    return ", ".join(f"`{k}={v}`" for k, v in rule.params.items())


def _learning(rule: Rule) -> str:
    if rule.learning is None:
        return ""
    than = ("its first points" if rule.learning_level is None
            else f"{rule.learning_level:g}")
    return (f"; info while `{rule.learning}` stands above {than} by "
            f"{LEARNING_PARAMS['z']:g} standard errors (the run is learning)")


def _severity(rule: Rule) -> str:
    """The severity a rule reports and when it differs, as the evaluator decides it
    (`Evaluator._severity`): raised to a warning by its `repeat` or `warn_after`, info
    while the run learns, on a log cut from a longer run or on a loss still falling."""
    p = rule.params
    raised: list[str] = []
    if SEVERITY_RANK[rule.severity] < SEVERITY_RANK["warning"]:
        if "repeat" in p:
            raised.append(f"a warning once {p['repeat']} of its events come within "
                          f"{p['hold']} points of each other")
        if "warn_after" in p:
            raised.append(f"a warning once judged on {p['warn_after']} logged points or more")
    out = "; ".join([rule.severity, *raised]) + _learning(rule)
    if rule.severity == "info" and not raised:
        return out
    if p.get("window_info") or rule.detector == "whole_window":
        out += ("; info on a log that starts mid-run (a window cut from a longer run, whose "
                "start is not the run's)")
    if rule.detector == "whole_window":
        out += "; info on a loss that fell at each of its latest points (still falling)"
    return out


def fill(text: str) -> str:
    """`text` with each `{RULE_ID:PARAM}` replaced by that rule's default parameter (with
    `%`, as a percentage) and `{settings}` by the run settings the rules read."""
    def value(m: re.Match[str]) -> str:
        v = BY_ID[m[1]].params[m[2]]
        if m[3]:
            return f"{100 * float(v):g}%"
        return f"{v:g}" if isinstance(v, float) else str(v)

    settings = ", ".join(f"`{name}`" for name in setting_names())
    return PARAM.sub(value, text).replace("{settings}", settings)


def render() -> str:
    table = ["| detector | fires when |", "|---|---|"]
    table += [f"| `{name}` | {text} |" for name, text in DETECTOR_DOCS]
    classes = ["| rule | class |", "|---|---|"]
    classes += [f"| `{rule}` | `{cls}` |" for rule, cls in RULE_CLASSES.items()]
    out = [fill(ENGINE).replace("{detectors}", "\n".join(table)),
           SCORE.replace("{classes}", "\n".join(classes)), history() + "## Rules\n"]
    for rule in CATALOGUE:
        metrics = "any metric" if rule.metrics == ("*",) else ", ".join(
            f"`{m}`" for m in rule.metrics)
        condition = rule.condition.format(**{k: v for k, v in rule.params.items()})
        out.append(f"### `{rule.id}` — {rule.title}\n")
        out.append(f"- **Methods:** {_methods(rule)}")
        out.append(f"- **Reads:** {metrics}" + (
            "; not on a run that logs " + " or ".join(f"`{m}`" for m in rule.not_with)
            if rule.not_with else ""))
        out.append(f"- **Detector:** `{rule.detector}`; parameters: {_params(rule)}"
                   + (f"; budget: `{rule.budget}`" if rule.budget else ""))
        out.append(f"- **Condition:** {condition}")
        out.append(f"- **Severity:** {_severity(rule)}")
        out.append(f"- **Advice:** {rule.advice}\n")
    out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    return write_generated(render, "docs/health.md", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
