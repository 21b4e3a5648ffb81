"""Writes docs/health.md from the rule catalogue: `python -m runwatch.health.docs [PATH]`.

The catalogue is the source of truth; a test fails when the page misses a rule.
"""

from __future__ import annotations

import sys

from runwatch.health.rules import CATALOGUE, Rule
from runwatch.health.rules.base import ALL_METHODS
from runwatch.metrics.docs import write_generated

INTRO = """# Health rules

runwatch evaluates these rules on every run as its metrics arrive. Each rule reads a
few metrics (by canonical name; other frameworks' names are mapped to it by the aliases
in [metrics.md](metrics.md)), tests a condition, and raises a **finding** with a
severity, the step range and values that triggered it, and advice that names the
setting to change. A finding *opens* when its condition starts to hold, *updates* while
it holds, and *resolves* when it stops; each new episode is a new finding.

Read findings with `runwatch runs health RUN` (`-o json`, `--fail-on warning|critical`
for scripts), in the run page of the web app (markers on the charts), or through the
API. Severities: `info` (worth knowing), `warning` (likely costs you the run's
quality or money), `critical` (the run is broken or the result is not to be trusted).

## Detectors

Rules are built from a few shared detectors, each evaluated incrementally (the cost of
new points does not grow with the run's history). Points arrive in seq order from a run
folder; a batch sent over HTTP after a later one makes the run be evaluated again whole,
so no stored point escapes the rules.

{detectors}

## Overriding thresholds

Every parameter below can be overridden per project; the defaults are the spec's values.
Store a project's overrides with `runwatch thresholds PROJECT FILE` (or through the API;
`--clear` removes them) and its runs are re-evaluated; try a file on one run without
storing anything with `runwatch runs health RUN --thresholds FILE`. Budget rules read
their budget (`max_sample_tokens`, `batch_size`, …) from the run's `config.yaml` at any
depth; `settings` supplies one the config lacks.

```yaml
rules:
  grpo.clip_high: {above: 0.15}
  optim.grad_norm_spike: {factor: 20}
  val.plateau: {enabled: false}
  grpo.truncation: {severity: info}
settings:            # budgets the run's config does not give
  max_sample_tokens: 1024
```

## Findings

A finding carries `rule_id`, `severity`, `status` (`open` or `resolved`), `metric`,
`first_step` (the first point that crossed the limit in the window that opened it; for
a trend, the first step of the window it judged) and `last_step` (the latest step the
condition held at), `evidence` (the values of the
points that crossed the limit: `first`, `last`, `min`, `max`, `count`, plus the
detector's context such as the rolling `median`, a trend's `effect` or the `budget`), a
`message` and the `advice`. Non-finite values appear in
evidence as the text `NaN`, `Infinity` or `-Infinity`. A `run.stalled` finding of a run
still running is computed when findings are read (its `id` is null); once metrics arrive
again the stall is stored as resolved.

## Rules
"""


DETECTOR_DOCS = (
    ("threshold", "a value is above/below a limit on *k* of the last *n* points (optionally "
     "after `min_points`); a budget rule's limit is a fraction of a run setting such as "
     "`max_sample_tokens`"),
    ("spike", "a value exceeds `factor` × the rolling median of the previous `window` points "
     "(or falls below `drop` × it); the finding stays open `hold` points"),
    ("trend", "the Theil–Sen slope over the last `window` points (on 8 bucket medians) moves "
     "the series by at least `min_effect` (`relative`: as a fraction of its level) `up` or "
     "`down`, or by less than it (`flat`); a holding trend is released only when the effect "
     "clearly leaves it"),
    ("no_progress", "after `warmup` points, the latest bucket median has not moved "
     "`min_change` (relative) from the first"),
    ("divergence", "one series trends one way while another trends the other way over the "
     "same steps (e.g. training up, validation down)"),
    ("nonfinite", "any metric is NaN, +Infinity or -Infinity"),
    ("stall", "a running run logs nothing for `factor` × its usual step interval, and at "
     "least `min_seconds`"),
)


def _methods(rule: Rule) -> str:
    return "all" if rule.methods == ALL_METHODS else ", ".join(rule.methods)


def _params(rule: Rule) -> str:
    if not rule.params:
        return "—"
    return ", ".join(f"`{k}={v}`" for k, v in rule.params.items())


def render() -> str:
    table = ["| detector | fires when |", "|---|---|"]
    table += [f"| `{name}` | {text} |" for name, text in DETECTOR_DOCS]
    out = [INTRO.replace("{detectors}", "\n".join(table))]
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
        out.append(f"- **Severity:** {rule.severity}")
        out.append(f"- **Advice:** {rule.advice}\n")
    out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    return write_generated(render, "docs/health.md", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
