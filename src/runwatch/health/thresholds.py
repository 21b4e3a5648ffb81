"""Per-project overrides of the rules' thresholds; the spec's values are the defaults.

A project's overrides are one mapping, written as YAML or sent through the API:

    rules:
      grpo.clip_high: {above: 0.15}      # any of the rule's params
      optim.grad_norm_spike: {factor: 20}
      val.plateau: {enabled: false}
      grpo.truncation: {severity: info}
    settings:                             # budgets a run's config does not give
      max_sample_tokens: 1024
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runwatch.health.rules import BY_ID, SEVERITIES, Rule
from runwatch.health.rules.base import Param


class ThresholdError(ValueError):
    """An override names an unknown rule or parameter, or has a value of the wrong type."""


@dataclass(frozen=True)
class Overrides:
    """Validated overrides: per-rule params (plus enabled/severity) and run settings."""

    rules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    settings: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"rules": {k: dict(v) for k, v in self.rules.items()},
                "settings": dict(self.settings)}

    def enabled(self, rule: Rule) -> bool:
        return bool(self.rules.get(rule.id, {}).get("enabled", True))

    def severity(self, rule: Rule) -> str:
        return str(self.rules.get(rule.id, {}).get("severity", rule.severity))

    def severity_set(self, rule: Rule) -> bool:
        """Whether the project names this rule's severity: then it is the severity the
        rule reports, never raised by the rule's own `repeat` or `warn_after`."""
        return "severity" in self.rules.get(rule.id, {})

    def params(self, rule: Rule) -> dict[str, Param]:
        """The rule's params with this project's overrides applied."""
        merged = dict(rule.params)
        for name, value in self.rules.get(rule.id, {}).items():
            if name not in ("enabled", "severity"):
                merged[name] = value
        return merged


NONE = Overrides()
_EXTRA = {"enabled", "severity", "budget"}


def parse(data: Any) -> Overrides:
    """Validate a mapping (from YAML or JSON) into Overrides; raises ThresholdError."""
    if data is None:
        return NONE
    if not isinstance(data, Mapping):
        raise ThresholdError("health thresholds must be a mapping with 'rules' and 'settings'")
    unknown = set(data) - {"rules", "settings"}
    if unknown:
        raise ThresholdError(f"unknown section {sorted(unknown)[0]!r}: use 'rules' or 'settings'")
    rules: dict[str, dict[str, Any]] = {}
    for rule_id, params in (data.get("rules") or {}).items():
        rule = BY_ID.get(rule_id)
        if rule is None:
            raise ThresholdError(f"unknown health rule {rule_id!r}: see docs/health.md for ids")
        if not isinstance(params, Mapping):
            raise ThresholdError(f"overrides of {rule_id} must be a mapping of parameters")
        rules[rule_id] = {n: _check(rule, n, v) for n, v in params.items()}
    settings: dict[str, float] = {}
    for name, value in (data.get("settings") or {}).items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ThresholdError(f"setting {name!r} must be a number, not {value!r}")
        settings[str(name)] = float(value)
    return Overrides(rules, settings)


def _check(rule: Rule, name: str, value: Any) -> Any:
    if name == "enabled":
        if not isinstance(value, bool):
            raise ThresholdError(f"{rule.id}.enabled must be true or false")
        return value
    if name == "severity":
        if value not in SEVERITIES:
            raise ThresholdError(f"{rule.id}.severity must be one of {', '.join(SEVERITIES)}")
        return value
    if name not in rule.params and name not in _EXTRA:
        known = ", ".join(sorted(rule.params)) or "none"
        raise ThresholdError(f"{rule.id} has no parameter {name!r} (parameters: {known})")
    default = rule.params.get(name)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ThresholdError(f"{rule.id}.{name} must be text like {default!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ThresholdError(f"{rule.id}.{name} must be a number, not {value!r}")
    return value


def load_yaml(path: Path) -> Overrides:
    """Read and validate a thresholds YAML file."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ThresholdError(f"cannot read thresholds file {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ThresholdError(f"thresholds file {path} is not valid YAML: {exc}") from exc
    return parse(data)
