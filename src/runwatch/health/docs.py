"""Writes docs/health.md from the rule catalogue: `python -m runwatch.health.docs [PATH]`.

The catalogue is the source of truth; a test fails when the page misses a rule.
"""

from __future__ import annotations

import sys

from runwatch.health.docs_engine import DETECTOR_DOCS, ENGINE
from runwatch.health.docs_score import SCORE
from runwatch.health.history import history
from runwatch.health.rules import CATALOGUE, Rule
from runwatch.health.rules.base import ALL_METHODS, LEARNING_PARAMS
from runwatch.health.scoring import RULE_CLASSES
from runwatch.metrics.docs import write_generated


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


def render() -> str:
    table = ["| detector | fires when |", "|---|---|"]
    table += [f"| `{name}` | {text} |" for name, text in DETECTOR_DOCS]
    classes = ["| rule | class |", "|---|---|"]
    classes += [f"| `{rule}` | `{cls}` |" for rule, cls in RULE_CLASSES.items()]
    out = [ENGINE.replace("{detectors}", "\n".join(table)),
           SCORE.replace("{classes}", "\n".join(classes)), history() + "## Rules\n"]
    for rule in CATALOGUE:
        metrics = "any metric" if rule.metrics == ("*",) else ", ".join(
            f"`{m}`" for m in rule.metrics)
        condition = rule.condition.format(**{k: v for k, v in rule.params.items()})
        out.append(f"### `{rule.id}` — {rule.title}\n")
        out.append(f"- **Methods:** {_methods(rule)}")
        out.append(f"- **Reads:** {metrics}")
        out.append(f"- **Detector:** `{rule.detector}`; parameters: {_params(rule)}"
                   + (f"; budget: `{rule.budget}`" if rule.budget else ""))
        out.append(f"- **Condition:** {condition}")
        out.append(f"- **Severity:** {rule.severity}" + _learning(rule))
        out.append(f"- **Advice:** {rule.advice}\n")
    out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    return write_generated(render, "docs/health.md", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
