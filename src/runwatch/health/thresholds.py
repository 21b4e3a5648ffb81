"""Per-project overrides of the rules' thresholds; the spec's values are the defaults.

A project's overrides are one mapping, written as YAML (`runwatch thresholds PROJECT FILE`
stores it; `runs health RUN --thresholds FILE` tries it):

    rules:
      grpo.clip_high: {above: 0.15}      # any of the rule's params
      optim.grad_norm_spike: {factor: 20}
      val.plateau: {enabled: false}
      grpo.truncation: {severity: info}
    settings:                             # budgets a run's config does not give
      max_sample_tokens: 1024
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runwatch.health.rules import BY_ID, CATALOGUE, SEVERITIES, Rule
from runwatch.health.rules.base import Param


class ThresholdError(ValueError):
    """An override names an unknown rule or parameter, or has a value of the wrong type."""


@dataclass(frozen=True)
class Overrides:
    """Validated overrides: per-rule params (plus enabled/severity) and run settings."""

    rules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # as written: a whole number stays an int (a token budget shows as 1024, not 1024.0)
    settings: Mapping[str, int | float] = field(default_factory=dict)

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


def setting_names(rules: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    """The run settings the rules read, sorted: each budget rule's `budget` (the factors of
    a product such as `batch_size*max_sampling_attempts`) and each `unless_setting`, as
    `rules` (validated overrides) may rename it."""
    names: set[str] = set()
    for rule in CATALOGUE:
        if rule.budget is not None:
            names.update(part.strip() for part in rule.budget.split("*"))
        unless = (rules or {}).get(rule.id, {}).get("unless_setting",
                                                     rule.params.get("unless_setting"))
        if isinstance(unless, str):
            names.add(unless)
    return sorted(names)


def parse(data: Any, stored: bool = False) -> Overrides:
    """Validate a mapping (from YAML or JSON) into Overrides; raises ThresholdError.

    A setting no rule reads is refused, naming the ones they read; with `stored` (a
    project's overrides as the index holds them, which may predate that check) it is left
    out instead: no rule ever read it, and a project's stored overrides must not stop its
    runs being judged."""
    if data is None:
        return NONE
    if not isinstance(data, Mapping):
        raise ThresholdError("health thresholds must be a mapping with 'rules' and 'settings', "
                             f"not {_shape(data)}")
    unknown = set(data) - {"rules", "settings"}
    if unknown:
        raise ThresholdError(f"unknown section {sorted(map(str, unknown))[0]!r}: "
                             "use 'rules' or 'settings'")
    rules: dict[str, dict[str, Any]] = {}
    for rule_id, params in _section(data, "rules", "rule ids to their parameters, such as "
                                    "'grpo.clip_high: {above: 0.15}'").items():
        rule = BY_ID.get(rule_id)
        if rule is None:
            raise ThresholdError(f"unknown health rule {rule_id!r}"
                                 f"{_closest(rule_id, list(BY_ID))}: see docs/health.md for ids")
        if not isinstance(params, Mapping):
            raise ThresholdError(f"rules: {rule_id} must be a mapping of its parameters, such "
                                 f"as '{rule_id}: {{enabled: false}}', not {_shape(params)}")
        rules[rule_id] = {n: _check(rule, n, v) for n, v in params.items()}
    settings: dict[str, int | float] = {}
    known = setting_names(rules)
    for name, value in _section(data, "settings", "setting names to numbers, such as "
                                "'max_sample_tokens: 1024'").items():
        if name not in known:
            if stored:
                continue
            raise ThresholdError(f"unknown setting {name!r}{_closest(name, known)}: the rules "
                                 f"read {', '.join(known)}")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ThresholdError(f"setting {name!r} must be a number, not {value!r}")
        settings[str(name)] = value
    return Overrides(rules, settings)


def _section(data: Mapping[str, Any], name: str, expected: str) -> Mapping[Any, Any]:
    """Section `name` of the overrides (empty when absent); raises ThresholdError when it
    is not a mapping (`expected` says of what)."""
    section = data.get(name)
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise ThresholdError(f"the {name!r} section must be a mapping of {expected}, "
                             f"not {_shape(section)}")
    return section


def _shape(value: Any) -> str:
    """What a wrong value is, in YAML's words."""
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, str):
        return f"the text {value!r}"
    return f"{value!r}"


def _closest(name: Any, known: list[str]) -> str:
    """' (did you mean X?)' where `name` is a likely misspelling of a known name."""
    near = difflib.get_close_matches(str(name), known, n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


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
