"""The shape of a health rule, shared by every catalogue module."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from runwatch.metrics import BY_NAME

SEVERITIES = ("info", "warning", "critical")
# How `Rule.learning` is judged (`runwatch.health.progress.Learning`): the mean of the
# latest half of the metric's points (at most `head`) above its first half's, or above
# `Rule.learning_level`, by `z` standard errors of the series' own noise.
LEARNING_PARAMS: dict[str, float] = {"z": 2.0, "min_points": 10, "head": 25}
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}
METHODS = ("sft", "dpo", "grpo")
ALL_METHODS = ("*",)
DETECTORS = (
    "threshold",
    "pinned",
    "spike",
    "trend",
    "no_progress",
    "no_improvement",
    "jump",
    "shift",
    "excursion",
    "above_best",
    "above_max",
    "isolated",
    "upturn",
    "divergence",
    "diverged",
    "gap_rising",
    "flat_since",
    "whole_window",
    "nonfinite",
    "stall",
)

Param = float | int | str
# Combines several metrics' values, aligned by step (one list per metric, in the
# variant's order), into the one series a threshold reads.
Derive = Callable[[Sequence[list[float]], Mapping[str, Param]], list[float]]


@dataclass(frozen=True)
class Rule:
    """One health rule.

    `variants` lists the metric tuples the rule runs on; one evaluator runs per variant
    whose metrics the run logs (a rule that reads `loss` or `val/loss` alike has two).
    For "divergence" a variant is (reference series, judged series); the finding is
    about the second. `budget` names a run setting (`max_sample_tokens`, or a product
    such as `batch_size*max_sampling_attempts`) that the threshold is a fraction of;
    the rule stays silent when the run's config does not give it. Every metric a rule
    reads is a canonical name of the vocabulary (`runwatch.metrics`). An `exclusive` rule
    runs on the first of its variants the run logs, and only that one (a GRPO run logs
    val/accuracy and val/reward_mean alike, and one finding about the fall is enough).
    """

    id: str
    title: str
    methods: tuple[str, ...]
    variants: tuple[tuple[str, ...], ...]
    detector: str
    severity: str
    condition: str
    advice: str
    message: str
    params: Mapping[str, Param] = field(default_factory=dict)
    derive: Derive | None = None
    budget: str | None = None
    exclusive: bool = False
    # Rules that judge one signal at different speeds (an entropy falling, collapsing,
    # fallen to a fraction) share a name here: their findings that overlap in steps are
    # listed as one, an open one leading, as severe as the worst of them.
    signal: str | None = None
    # A metric that rises while the run learns (the reward, a DPO margin): while it has
    # risen beyond its noise since the start (`LEARNING_PARAMS`), the rule's finding is
    # info, whatever its severity: what it reports has not yet stopped the run learning.
    learning: str | None = None
    learning_level: float | None = None  # the learning metric's chance level, if known
    # (setting, default): a rule whose limits are in another trainer's scaled unit (TRL's
    # β-scaled DPO margins) reads a metric the run logs under its own canonical name
    # (runwatch's unit: unscaled log-prob nats) against its limits divided by that
    # setting, or by the default where the run's settings do not give it
    # (`native_limits`), so its messages speak the unit the run logs
    native_scale: tuple[str, float] | None = None
    # Metrics that tell the rule does not apply to the run: it does not start on a run
    # that logs one of them, and one that started stops (its open finding resolved) when
    # one appears (a multi-turn run's truncated_ratio counts episodes cut short by the
    # turn limit or the context, not completions at the token budget)
    not_with: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [m for m in self.reads + self.not_with if m != "*" and m not in BY_NAME]
        if unknown:
            raise ValueError(f"rule {self.id} reads {unknown}, which the metric vocabulary "
                             "(runwatch.metrics.catalogue) does not know: add them there")

    @property
    def reads(self) -> tuple[str, ...]:
        """Every metric the rule reads, with the one that says the run is learning."""
        return self.metrics + ((self.learning,) if self.learning else ())

    @property
    def metrics(self) -> tuple[str, ...]:
        """Every metric the rule can read, in first-seen order."""
        seen: dict[str, None] = {}
        for v in self.variants:
            for m in v:
                seen.setdefault(m, None)
        return tuple(seen)

    def applies_to(self, method: str) -> bool:
        return self.methods == ALL_METHODS or method in self.methods
