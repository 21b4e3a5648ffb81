"""What a finding's evidence keeps of its detector at the moment it is stamped: the
median a spike stood against, a trend's effect, the level a loss jumped from, …"""

from __future__ import annotations

from typing import Any

from runwatch.health import against as ag
from runwatch.health import detectors as d
from runwatch.health import excursions as ex
from runwatch.health import finished as fin
from runwatch.health import improvement as im
from runwatch.health import jumps as j
from runwatch.health import progress as pg
from runwatch.health import trends as t
from runwatch.health.findings import Record, finite_or_text

# Detectors whose context a resolved record is stamped with (`detector_context`) changes
# with every point. A threshold's count in its window is kept per finding as it is fed
# (`_note_window`); a non-finite value and a judgement of the whole log need nothing.
STAMP_READS_DETECTOR = (j.Spike, j.Jump, j.AboveMax, j.Shift, ex.Excursion, ex.Isolated,
                        ex.Upturn, ag.AboveBest, ag.Diverged, ag.GapRising, im.NoImprovement,
                        pg.NoProgress, t.Trend, t.FlatSince, t.Divergence, d.Repeats)


def detector_context(det: Any, rec: Record, *, reference: str, budget: float | None,
                     start: float | None) -> dict[str, Any]:
    """Detector `det`'s context for record `rec` at this moment (median, effect, …):
    `reference` is the variant's first metric, `budget` the run setting a budget rule
    compares with, `start` where a trend's fall is measured from (`of_start`)."""
    extra: dict[str, Any] = {}
    if isinstance(det, d.Threshold):
        # The most hits its window held while the finding was open: a message says
        # "3 of the last 5", not the one hit of the point that opened it.
        seen = rec.get("w")
        extra["in_window"] = max(det.in_window() if seen is None else int(seen),
                                 rec.get("x", {}).get("in_window", 0))
        if det.above is not None:
            extra["above"] = det.above
        if det.below is not None:
            extra["below"] = det.below
        if budget is not None:
            extra["budget"] = budget
    elif isinstance(det, j.Spike):
        ref = det.reference()
        extra["median"] = ref
        if ref and isinstance(rec.get("max"), int | float):
            extra["ratio"] = rec["max"] / ref
        extra["in_a_row"] = det.row
    elif isinstance(det, j.Jump):
        if det.jump:
            start, end, noise = det.jump
            extra["from"], extra["to"] = start, end
            # A series that moves by the same amount every step has no noise at all;
            # floating-point dust is not worth a number.
            extra["noise"] = noise if noise > 1e-9 * abs(start) else 0.0
            extra["rise"] = (end - start) / max(abs(start), 1e-12)
    elif isinstance(det, j.AboveMax):
        if det.jump:
            extra["top"], extra["to"] = det.jump
            extra["ratio"] = det.jump[1] / det.jump[0]
    elif isinstance(det, j.Shift):
        if det.shift:
            extra["from"], extra["to"] = det.shift
            extra["rise"] = (det.shift[1] - det.shift[0]) / max(abs(det.shift[0]), 1e-12)
    elif isinstance(det, ex.Excursion):
        if det.excursion:
            level, peak, since, points = det.excursion
            extra.update({"level": level, "peak": peak, "since": since, "points": points,
                          "ratio": peak / level if level > 0 else None})
    elif isinstance(det, ex.Isolated):
        if det.spike:
            at, peak, med, after = det.spike
            extra.update({"at": at, "to": peak, "median": med, "after": after,
                          "ratio": peak / med})
    elif isinstance(det, ag.AboveBest):
        if det.rise:
            extra["best"], extra["to"] = det.rise
            extra["rise"] = (det.rise[1] - det.rise[0]) / max(abs(det.rise[0]), 1e-12)
            extra["fall"] = -extra["rise"]
    elif isinstance(det, im.NoImprovement):
        extra.update(det.held)
    elif isinstance(det, t.Trend):
        extra["effect"] = det.held_effect
        if det.held_span is not None:
            extra["window_from"], extra["window_to"] = det.held_span
        if start is not None:
            extra["start"] = start
    elif isinstance(det, pg.NoProgress):
        extra.update(det.held or {"effect": det.last_effect})
    elif isinstance(det, ag.Diverged | ag.GapRising | ex.Upturn | t.FlatSince
                    | fin.WholeWindow):
        extra.update(det.held)
    elif isinstance(det, t.Divergence):
        extra["a_effect_seen"], extra["b_effect_seen"] = det.held
        extra["reference"] = reference
    elif isinstance(det, d.Repeats):
        extra.update(det.held)
    elif isinstance(det, d.NonFinite):
        extra["value"] = finite_or_text(rec.get("first"))
    return extra
