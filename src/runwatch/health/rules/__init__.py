"""The health rule catalogue: what each rule reads, when it fires, and what to change.

Rules are plain data; the engine builds one detector per rule and metric variant from
`detector` and `params` (the spec's values, overridable per project). The catalogue is
split by the part of the spec it covers; `CATALOGUE` is all of it, in documentation order.
"""

from __future__ import annotations

from runwatch.health.rules.base import ALL_METHODS, DETECTORS, SEVERITIES, Derive, Rule
from runwatch.health.rules.exploration import RULES as EXPLORATION
from runwatch.health.rules.general import RULES as GENERAL
from runwatch.health.rules.grpo import RULES as GRPO
from runwatch.health.rules.loss_jumps import RULES as LOSS_JUMPS
from runwatch.health.rules.loss_progress import RULES as LOSS_PROGRESS
from runwatch.health.rules.preference import RULES as PREFERENCE
from runwatch.health.rules.rl_system import RULES as RL_SYSTEM
from runwatch.health.rules.validation import RULES as VALIDATION

CATALOGUE: tuple[Rule, ...] = (GRPO + EXPLORATION + RL_SYSTEM + LOSS_PROGRESS + VALIDATION
                               + LOSS_JUMPS + PREFERENCE + GENERAL)
BY_ID: dict[str, Rule] = {r.id: r for r in CATALOGUE}

__all__ = ["ALL_METHODS", "BY_ID", "CATALOGUE", "DETECTORS", "SEVERITIES", "Derive", "Rule"]
