"""Findings and their life: a finding opens when a rule's condition starts to hold,
updates while it holds, and resolves when it stops.

A `Tracker` follows one rule on one metric. It scans a batch's per-point verdicts with
`list.index` (a C-level scan), so a batch costs a few Python operations per change of
verdict, not per point.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Record = dict[str, Any]


@dataclass
class Finding:
    """A finding as the store keeps it; the API, CLI and web app show `to_dict()` with the
    fields `runwatch.health.store.finding_json` adds."""

    rule_id: str
    title: str
    severity: str
    status: str  # "open" | "resolved"
    metric: str
    first_step: int
    last_step: int
    evidence: dict[str, Any]
    message: str
    advice: str
    id: int | None = None
    # The tracker's record, so the store can write the new row's id back into the state.
    record: Record | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "rule_id": self.rule_id,
            "title": self.title,
            "severity": self.severity,
            "status": self.status,
            "metric": self.metric,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "evidence": self.evidence,
            "message": self.message,
            "advice": self.advice,
        }


def finite_or_text(value: Any) -> Any:
    """JSON has no NaN or Infinity: keep those as the text the run file uses."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    return value


class Tracker:
    """The open finding (if any) of one rule on one metric, as a JSON-able record."""

    def __init__(self, record: Record | None = None) -> None:
        self.open: Record | None = record
        # the step at which each record the last update resolved was resolved, and its
        # place among the update's points
        self.ends: list[int] = []
        self.ends_at: list[int] = []

    def update(
        self, steps: list[int], verdicts: list[bool], values: list[float],
        hits: list[int] | None = None, onset: Callable[[int], int | None] | None = None,
        before: Callable[[int], int] | None = None,
    ) -> tuple[list[Record], bool]:
        """Apply a batch; returns the records it resolved and whether one is open and touched.

        `hits` marks the points that crossed the rule's limit themselves (a k-of-n
        verdict also holds on the points between them); only those are evidence. `onset`
        gives the step where the hits that opened a finding began, and `before` how many
        hits there were from that step until the point that opened it (the finding's
        count holds them: "0 on 3 steps in a row", not "on 1")."""
        closed: list[Record] = []
        self.ends, self.ends_at = [], []
        touched = False
        pos, m = 0, len(verdicts)
        while pos < m:
            if self.open is None:
                try:
                    pos = verdicts.index(True, pos)
                except ValueError:
                    break
                start = onset(pos) if onset is not None else None
                self.open = {"id": None, "first_step": steps[pos] if start is None else start,
                             "first": None, "min": None, "max": None, "last": None,
                             "count": before(pos) if before is not None else 0}
            try:
                end = verdicts.index(False, pos)
            except ValueError:
                end = m
            if end > pos:
                self._extend(steps, values, pos, end, hits)
                touched = True
            if end < m:
                closed.append(self.open)
                self.ends.append(steps[end])
                self.ends_at.append(end)
                self.open = None
                touched = False
            pos = end
        return closed, touched and self.open is not None

    def _extend(self, steps: list[int], values: list[float], i: int, j: int,
                hits: list[int] | None) -> None:
        rec = self.open
        assert rec is not None
        chunk = values[i:j]
        if hits is not None:
            chunk = [v for v, h in zip(chunk, hits[i:j], strict=True) if h]
        rec["last_step"] = steps[j - 1]
        if not chunk:
            return
        fin = [v for v in chunk if v is not None and v - v == 0]
        if fin:
            lo, hi = min(fin), max(fin)
            rec["min"] = lo if _num(rec["min"]) is None else min(rec["min"], lo)
            rec["max"] = hi if _num(rec["max"]) is None else max(rec["max"], hi)
        if rec["first"] is None:
            rec["first"] = chunk[0]
        rec["last"] = chunk[-1]
        rec["count"] += len(chunk)


def _num(v: Any) -> float | None:
    return v if isinstance(v, int | float) and v - v == 0 else None


class _Fmt(string.Formatter):
    """Formats a message template; a missing or non-numeric field prints as '?' or as is."""

    def get_value(self, key: Any, args: Any, kwargs: Any) -> Any:
        return kwargs.get(key, "?")

    def format_field(self, value: Any, format_spec: str) -> str:
        try:
            return super().format_field(value, format_spec)
        except (ValueError, TypeError):
            return str(value)


_FMT = _Fmt()
# From this many times its reference, a rise reads as a multiple ("rose 731-fold").
FOLD = 10.0


def change_words(effect: Any, relative: bool, wanted: str | None = None) -> str:
    """A change in plain words: "fell 2.4%", "rose 0.12", "did not change". With `wanted`
    (the direction a healthy series moves: "up" or "down"), a change that way that was
    too small reads "fell only 2.4%", so a message never says a number that fell did not."""
    if not isinstance(effect, int | float) or effect - effect != 0:
        return "changed by an unknown amount"
    if relative and effect >= FOLD - 1:
        return f"rose {1 + effect:,.0f}-fold"  # a loss that exploded: not "rose 73010.6%"
    size = f"{abs(effect):.1%}" if relative else f"{abs(effect):.3g}"
    if size.strip("0.%") == "":
        return "did not change"
    way = "rose" if effect > 0 else "fell"
    only = " only" if wanted is not None and (wanted == "up") == (effect > 0) else ""
    return f"{way}{only} {size}"


def level_words(levels: Any, relative: bool) -> str | None:
    """The change between a window's first and last level (`trendstats.window_levels`) in
    plain words: with `relative`, as a share of the first where both are positive (a
    positive quantity falls 100% at most: "fell 90.3%" of an entropy from 0.6 to 0.058),
    else as the difference, which a level at or below 0 leaves a share no sense ("rose
    0.31" of a reward from -0.01 to 0.3). None where the levels are not known."""
    if not isinstance(levels, dict):
        return None
    start, end = _num(levels.get("from")), _num(levels.get("to"))
    if start is None or end is None:
        return None
    if relative and start > 0 and end >= 0:
        return change_words((end - start) / start, True)
    return change_words(end - start, False)


def range_words(levels: Any) -> str:
    """", moving between 0.862 and 0.958" where a window's lowest or highest level lies
    beyond its first and last (as printed): a series whose trend is flat over a window
    may have fallen and come back (a V) or jumped at its end. Else nothing."""
    if not isinstance(levels, dict):
        return ""
    start, end = _num(levels.get("from")), _num(levels.get("to"))
    low, high = _num(levels.get("low")), _num(levels.get("high"))
    if start is None or end is None or low is None or high is None:
        return ""
    if (f"{low:.3g}", f"{high:.3g}") == (f"{min(start, end):.3g}", f"{max(start, end):.3g}"):
        return ""
    return f", moving between {low:.3g} and {high:.3g}"


def higher_words(rise: Any, than: str) -> str:
    """A rise relative to a reference in plain words: "12.5% higher", or "749 times
    {than}" once it is `FOLD` times or more."""
    if not isinstance(rise, int | float) or rise - rise != 0:
        return "higher by an unknown amount"
    if rise >= FOLD - 1:
        return f"{1 + rise:,.0f} times {than}"
    return f"{rise:.1%} higher"


def render(template: str, fields: dict[str, Any]) -> str:
    return _FMT.format(template, **fields)
