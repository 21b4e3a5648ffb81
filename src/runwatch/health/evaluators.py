"""One rule evaluated on one metric variant: detector, alignment and finding tracker.

The engine owns one `Evaluator` per (rule, variant) the run's metrics allow, feeds it
the new points of its metrics, and turns its records into `Finding`s.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Mapping
from itertools import pairwise
from typing import Any

import orjson

from runwatch.health import detectors as d
from runwatch.health import finished as fin
from runwatch.health import jumps as j
from runwatch.health import progress as pg
from runwatch.health import trends as t
from runwatch.health.findings import (
    Finding,
    Record,
    Tracker,
    change_words,
    finite_or_text,
    higher_words,
    render,
)
from runwatch.health.rules.base import LEARNING_PARAMS, SEVERITY_RANK, Param, Rule
from runwatch.health.trendstats import lazy_numpy

# The steps and values of one metric's PointColumns, after its alias transform.
StepValues = tuple[list[int], list[float]]
ALIGN_CAP = 512  # steps waiting for a partner metric; older ones are dropped
# Detectors that judge a second series against a first (a variant's reference, then the
# judged series): the finding is about the second.
PAIRED = ("divergence", "flat_since", "diverged", "gap_rising")
# Paired detectors that start with whichever of their two series the run logs first.
EITHER_FIRST = ("diverged", "gap_rising")
LR = "learning_rate"  # read beside a reward judged for no improvement, for its warm-up
# What a loss-flat finding on a log cut from a longer run says of it (`mid_run`).
MID_RUN = "starts mid-run (not at the run's start)"


def budget_value(
    rule: Rule, params: Mapping[str, Param], settings: Mapping[str, float]
) -> float | None:
    """The run setting a budget rule compares against, or None when it is unknown."""
    if "budget" in params:
        return float(params["budget"])
    assert rule.budget is not None
    total = 1.0
    for name in rule.budget.split("*"):
        value = settings.get(name.strip())
        if value is None:
            return None
        total *= float(value)
    return total


def _num(params: Mapping[str, Param], name: str, default: float) -> float:
    value = params.get(name, default)
    return float(value) if not isinstance(value, str) else default


def build_detector(rule: Rule, p: Mapping[str, Param], settings: Mapping[str, float],
                   state: dict[str, Any] | None) -> Any:
    """The detector for `rule` with resolved params `p`; None when a budget is unknown, or
    when a pinned rule's `unless_setting` is known (the limit it infers from the log)."""
    kind = rule.detector
    if kind == "threshold":
        above = p.get("above")
        below = p.get("below")
        if rule.budget is not None:
            budget = budget_value(rule, p, settings)
            if budget is None:
                return None
            limit = _num(p, "fraction", 1.0) * budget
            above, below = (limit, None) if p.get("side", "above") == "above" else (None, limit)
        return d.Threshold(
            above=None if above is None else float(above),
            below=None if below is None else float(below),
            k=int(_num(p, "k", 1)), n=int(_num(p, "n", 1)),
            min_points=int(_num(p, "min_points", 0)),
            k_binary=int(p["k_binary"]) if "k_binary" in p else None, state=state,
        )
    if kind == "pinned":
        known = p.get("unless_setting")
        if isinstance(known, str) and known in settings:
            return None  # a rule that reads the setting itself judges the run
        return d.Pinned(k=int(_num(p, "k", 1)), n=int(_num(p, "n", 1)),
                        min_points=int(_num(p, "min_points", 0)), state=state)
    if kind == "spike":
        factor = _num(p, "factor", 0.0)
        drop = _num(p, "drop", 0.0)
        return j.Spike(
            factor=factor or None, drop=drop or None, window=int(_num(p, "window", 200)),
            min_history=int(_num(p, "min_history", 10)), floor=_num(p, "floor", 0.0),
            min_median=_num(p, "min_median", 0.0), hold=int(_num(p, "hold", 5)),
            noise_k=_num(p, "noise_k", 0.0), state=state,
        )
    if kind == "trend":
        return t.Trend(
            direction=str(p["direction"]), window=int(_num(p, "window", 64)),
            min_effect=_num(p, "min_effect", 0.1), relative=bool(_num(p, "relative", 1)),
            min_buckets=int(_num(p, "min_buckets", 4)), recent_z=_num(p, "recent_z", 0.0),
            noise_z=_num(p, "noise_z", 0.0), undone=int(_num(p, "undone", 0)), state=state,
        )
    if kind == "no_progress":
        return pg.NoProgress(
            direction=str(p.get("direction", "down")), min_change=_num(p, "min_change", 0.05),
            warmup=int(_num(p, "warmup", 30)), bucket=int(_num(p, "bucket", 5)),
            warmup_steps=int(_num(p, "warmup_steps", 0)),
            min_points=int(_num(p, "min_points", 0)), moved=bool(_num(p, "moved", 0)),
            max_spread=_num(p, "max_spread", 0.0), noise_z=_num(p, "noise_z", 0.0),
            window_info=bool(_num(p, "window_info", 0)), state=state,
        )
    if kind == "divergence":
        return t.Divergence(
            a_dir=str(p["a_dir"]), b_dir=str(p["b_dir"]), window=int(_num(p, "window", 6)),
            a_effect=_num(p, "a_effect", 0.05), b_effect=_num(p, "b_effect", 0.05),
            a_bucket=int(_num(p, "a_bucket", 5)), relative=bool(_num(p, "relative", 0)),
            noise_z=_num(p, "noise_z", 0.0), a_noise_z=_num(p, "a_noise_z", 0.0),
            state=state,
        )
    if kind == "jump":
        return j.Jump(
            z=_num(p, "z", 6.0), min_rel=_num(p, "min_rel", 0.05),
            window=int(_num(p, "window", 20)), min_history=int(_num(p, "min_history", 10)),
            hold=int(_num(p, "hold", 10)), both=bool(_num(p, "both", 0)), state=state,
        )
    if kind == "above_max":
        return j.AboveMax(factor=_num(p, "factor", 2.0),
                          min_history=int(_num(p, "min_history", 3)),
                          hold=int(_num(p, "hold", 5)),
                          magnitude=bool(_num(p, "magnitude", 0)),
                          floor=_num(p, "floor", 0.0), state=state)
    if kind == "diverged":
        return j.Diverged(factor=_num(p, "factor", 2.0),
                          min_history=int(_num(p, "min_history", 2)),
                          hold=int(_num(p, "hold", 3)), state=state)
    if kind == "gap_rising":
        return j.GapRising(ratio=_num(p, "ratio", 3.0), min_rel=_num(p, "min_rel", 0.01),
                           hold=int(_num(p, "hold", 3)), state=state)
    if kind == "shift":
        return j.Shift(
            z=_num(p, "z", 6.0), min_rel=_num(p, "min_rel", 0.2),
            window=int(_num(p, "window", 10)), stay=int(_num(p, "stay", 3)), state=state,
        )
    if kind == "excursion":
        return j.Excursion(
            min_rel=_num(p, "min_rel", 0.5), z=_num(p, "z", 3.0),
            window=int(_num(p, "window", 20)), stay=int(_num(p, "stay", 5)),
            back=_num(p, "back", 0.2), hold=int(_num(p, "hold", 5)), state=state,
        )
    if kind == "isolated":
        return j.Isolated(factor=_num(p, "factor", 3.0), window=int(_num(p, "window", 5)),
                          min_history=int(_num(p, "min_history", 3)),
                          back=_num(p, "back", 1.5), hold=int(_num(p, "hold", 5)),
                          state=state)
    if kind == "upturn":
        return j.Upturn(min_rel=_num(p, "min_rel", 0.005),
                        min_points=int(_num(p, "min_points", 8)), z=_num(p, "z", 5.0),
                        window=int(_num(p, "window", 40)), state=state)
    if kind == "above_best":
        return j.AboveBest(
            min_rel=_num(p, "min_rel", 0.01), k=int(_num(p, "k", 2)),
            single=_num(p, "single", 0.05), min_points=int(_num(p, "min_points", 3)),
            state=state,
        )
    if kind == "no_improvement":
        return pg.NoImprovement(
            direction=str(p.get("direction", "up")), z=_num(p, "z", 1.0),
            min_points=int(_num(p, "min_points", 10)), head=int(_num(p, "head", 25)),
            early_points=int(_num(p, "early_points", 0)),
            mean_z=_num(p, "mean_z", math.inf), state=state,
        )
    if kind == "flat_since":
        return t.FlatSince(min_change=_num(p, "min_change", 0.04),
                           min_points=int(_num(p, "min_points", 3)),
                           noise_z=_num(p, "noise_z", 0.0), state=state)
    if kind == "whole_window":
        return fin.WholeWindow(state=state)
    if kind == "nonfinite":
        return d.NonFinite()
    if kind == "repeats":
        return d.Repeats(length=int(_num(p, "length", 4)), chance=_num(p, "chance", 1e-3),
                         state=state)
    raise ValueError(f"rule {rule.id} has detector {kind!r}, which the engine cannot build")


class Evaluator:
    """Evaluates one rule on one variant (tuple of canonical metric names)."""

    def __init__(self, rule: Rule, variant: tuple[str, ...], params: Mapping[str, Param],
                 severity: str, detector: Any, settings: Mapping[str, float],
                 state: dict[str, Any] | None = None,
                 learning: pg.Learning | None = None, fixed: bool = False,
                 remake: Callable[[dict[str, Any] | None], Any] | None = None,
                 shown: Callable[[str], str] | None = None) -> None:
        self.rule, self.variant, self.params, self.severity = rule, variant, params, severity
        # the name a message gives a canonical metric: the key the run logged it as
        self.shown = shown or str
        # a severity the project set is the one reported (thresholds: severity_set)
        self.fixed = fixed
        self.settings = settings
        self.detector = detector
        # The detector again from a saved state (the engine's builder): a batch is fed
        # again in parts from its start when findings closed inside it (`feed`).
        self.remake = remake
        self.restamps = remake is not None and isinstance(detector, STAMP_READS_DETECTOR)
        self.metric = variant[-1] if rule.detector in PAIRED else variant[0]
        # Whether the run learns (Rule.learning): the engine's gate on that metric, one
        # per run that every rule naming it reads (`learning_gate`).
        self.learning = learning
        self._load(state or {})

    def _load(self, st: dict[str, Any]) -> None:
        """Take the state `state()` saved (all but the detector, which is built apart)."""
        self.tracker = Tracker(st.get("open"))
        # Steps still waiting for a partner metric (derived rules only): step -> values.
        self.pending: dict[int, list[float | None]] = {
            int(s): v for s, v in st.get("align", [])
        }
        # A trend's fall that must also be one from the series' start (`of_start`).
        self.below_start = (
            pg.BelowStart(_num(self.params, "of_start", 1.0), state=st.get("g"))
            if "of_start" in self.params else None)
        # The first step of the window the trend last judged: the gate may open between
        # two judgements, in a later batch, and the finding still starts where it did.
        self.window_from: int | None = st.get("wf")

    @property
    def reads(self) -> tuple[str, ...]:
        """The metrics this evaluator is fed."""
        return self.variant

    def learns(self, rec: Record | None = None) -> bool:
        """The run's learning metric has risen beyond its noise (Rule.learning): by the
        step where `rec` resolved, if it resolved inside its batch, else now."""
        if rec is not None and "learns" in rec:
            return bool(rec["learns"])
        return self.learning is not None and self.learning.rising

    def feed(self, cols: Mapping[str, StepValues]) -> tuple[list[Record], bool]:
        """Feed the new points of the metrics this evaluator reads; returns the records
        that resolved and whether one is open and was extended.

        A resolved record is stamped with the detector's context (`_stamp`: the median a
        spike stood against, the change a flat window held) as it stands when the record
        closes, as a live run that logs one point at a time sees it. When records close
        inside a batch of several steps (an imported file read whole), the batch is fed
        again from the state before it, cut after each step where one closed (after each
        point, for a rule of one metric whose steps repeat or go back), so each record
        gets its own numbers and not those of the batch's end."""
        again = self.restamps and _several_steps(cols, self.reads)
        # the state as it is saved between batches
        saved = orjson.loads(orjson.dumps(self.state())) if again else None
        # a batch that judges nothing (a paired rule's `a` alone) resolves nothing
        self.tracker.ends, self.tracker.ends_at = [], []
        closed, touched = self._feed(cols)
        ends = self.tracker.ends
        if saved is None or not ends:
            return closed, touched
        if _rising(cols, self.reads):
            if ends == [_last_step(cols, self.reads)]:
                return closed, touched  # none closed before the batch's end
            parts = _cut(cols, self.reads, ends)
        elif self._one_series():
            # steps that repeat or go back (epochs numbered as steps, a resumed run): cut
            # at the points where findings resolved
            at = self.tracker.ends_at
            if at == [len(cols[self.metric][0]) - 1]:
                return closed, touched
            parts = _cut_at(cols, self.metric, at)
        else:
            return closed, touched  # metrics at steps that repeat cannot be lined up
        assert self.remake is not None
        self.detector = self.remake(saved["det"])
        self._load(saved)
        closed = []
        for part in parts:
            if any(m in part for m in self.reads):
                got, touched = self._feed(part)
                closed += got
        return closed, touched

    def _one_series(self) -> bool:
        """Whether the detector judges the points of one metric as they come, so the
        tracker's points are that metric's points."""
        return (len(self.reads) == 1 and self.rule.derive is None
                and self.rule.detector not in PAIRED
                and not _num(self.params, "zero_unmeasured", 0))

    def _feed(self, cols: Mapping[str, StepValues]) -> tuple[list[Record], bool]:
        rule = self.rule
        if isinstance(self.detector, fin.WholeWindow):
            # judged only at the run's end (`finish`): its finding stays as the end left it
            self.detector.feed(*cols[self.metric])
            return [], False
        if rule.detector in PAIRED:
            a, b = self.variant
            if a in cols:
                self.detector.feed_a(*cols[a])
            if b not in cols:
                return [], False
            steps, values = cols[b]
            verdicts = self.detector.feed(steps, values)
        elif rule.derive is not None:
            steps, values = self._align(cols)
            verdicts = self.detector.feed(values, steps)
        else:
            steps, values = cols[self.metric]
            if _num(self.params, "zero_unmeasured", 0):
                steps, values = _measured(steps, values)
            if rule.detector == "pinned" and self.params.get("side") == "top":
                # pinned at its ceiling: the floor of the series turned over
                verdicts = self.detector.feed([-v for v in values], steps)
            elif rule.detector in ("threshold", "pinned"):
                verdicts = self.detector.feed(values, steps)
            elif rule.detector in ("trend", "no_progress", "no_improvement"):
                if isinstance(self.detector, pg.NoImprovement) and LR in cols:
                    # its warm-up is no part of the span a reward is judged flat over
                    self.detector.feed_lr(*cols[LR])
                if isinstance(self.detector, t.Trend) and self.detector.keeps:
                    verdicts = self._trend_across_gaps(steps, values)
                else:
                    verdicts = self.detector.feed(steps, values)
                if self.below_start is not None:
                    verdicts = [v and low for v, low in
                                zip(verdicts, self.below_start.feed(values), strict=True)]
            elif isinstance(self.detector,
                            j.Shift | j.Excursion | j.Isolated | j.Upturn | d.Repeats):
                verdicts = self.detector.feed(values, steps)
            else:  # spike, jump, above_best, above_max
                verdicts = self.detector.feed(values)
        hits = getattr(self.detector, "hits", None)
        onset = getattr(self.detector, "onset", None)
        if self.below_start is not None and onset is not None:
            onset = self._window_onset(onset)
        before = getattr(self.detector, "hits_before", None)
        closed, touched = self.tracker.update(steps, verdicts, values, hits, onset, before)
        marks = getattr(self.detector, "marks", None)
        if self.below_start is not None and marks:
            self.window_from = int(marks[-1][1])
        if isinstance(self.detector, d.Threshold) and True in verdicts:
            self._note_window(verdicts, closed)
        for rec, end in zip(closed, self.tracker.ends, strict=True):
            self._stamp(rec)
            if self.learning is not None:
                rec["learns"] = self.learning.rising_at(end)
        return closed, touched

    def _trend_across_gaps(self, steps: list[int], values: list[float]) -> list[bool]:
        """Feed a trend, starting it afresh after a gap in the log longer than the steps
        its window (at least half full) spans: the points before such a gap (a window of
        a longer run copied after another, a run resumed far later) are another stretch
        of the run, and a trend through the gap reads the change across it as one within
        its window. The values a sawtooth check looks back on (`Trend.past`) are kept: a
        many-epoch loss that steps down at an epoch boundary inside the gap and climbs
        after it is in its cycle, as it would be in a log with no gap."""
        det = self.detector
        out: list[bool] = []
        marks: list[tuple[int, float]] = []  # each stretch's, counted from the batch's start
        cut = 0
        i = _first_gap([p[0] for p in det.points][-det.size:], steps, 0, det.size)
        while i is not None:
            if i > cut:
                out += det.feed(steps[cut:i], values[cut:i])
                marks += [(at + cut, first) for at, first in det.marks]
            past, held = det.past, det.held_effect
            det = self.detector = build_detector(
                self.rule, {**self.params, "window": det.size}, self.settings, None)
            det.past = past
            # a finding open at the gap resolves after it: it says what held before
            det.held_effect = held
            cut = i
            i = _first_gap([float(steps[i])], steps, i + 1, det.size)
        out += det.feed(steps[cut:], values[cut:])
        # a finding that opened before a gap starts where its own stretch's window did
        det.marks = marks + [(at + cut, first) for at, first in det.marks]
        return out

    def _window_onset(self, onset: Any) -> Any:
        """`onset`, falling back on the window of the last batch's last judgement."""
        earlier = self.window_from

        def at(i: int) -> int | None:
            start = onset(i)
            return earlier if start is None else start
        return at

    def finish(self, judged_before: bool) -> Finding | None:
        """Judge a `whole_window` rule on the run's whole log, now that it has succeeded:
        the finding that opened, changed or resolved, or None. `judged_before`: a rule
        that judges the same metric's fall after its warm-up has judged it, so this one
        has nothing to add."""
        det = self.detector
        assert isinstance(det, fin.WholeWindow)
        p = self.params
        held = None if judged_before else det.judge(
            _num(p, "min_change", 0.05), int(_num(p, "min_points", 4)),
            _num(p, "min_level", 0.0), _num(p, "end_change", -math.inf))
        rec = self.tracker.open
        if held is None:
            if rec is None:
                return None
            self.tracker.open = None
            return self.finding(rec, "resolved")
        if rec is not None and rec.get("count") == held["points"]:
            return None  # judged on these points already (the end read twice)
        assert det.first_step is not None and det.last_step is not None
        rec = rec or {"id": None}
        rec.update(first_step=det.first_step, last_step=det.last_step, first=held["start"],
                   last=held["last"], min=held["lowest"], max=None, count=held["points"])
        self.tracker.open = rec
        return self.finding(rec, "open")

    def _note_window(self, verdicts: list[bool], closed: list[Record]) -> None:
        """Keep with each finding the most hits its window held while it was open in this
        batch (`w`): a batch read whole may end long after the finding resolved, when the
        window holds few hits or none."""
        counts = self.detector.window_counts()
        if len(counts) != len(verdicts):
            return
        spans, pos, m = [], 0, len(verdicts)
        while pos < m:
            try:
                start = verdicts.index(True, pos)
            except ValueError:
                break
            try:
                end = verdicts.index(False, start)
            except ValueError:
                end = m
            spans.append(max(counts[start:end]))
            pos = end
        records = closed + ([self.tracker.open] if self.tracker.open is not None
                            and verdicts[-1] else [])
        for rec, most in zip(records, spans, strict=False):
            rec["w"] = max(int(rec.get("w", 0)), most)

    def _align(self, cols: Mapping[str, StepValues]) -> StepValues:
        """Values of the variant's metrics at the same step, combined by the rule's derive."""
        derive = self.rule.derive
        assert derive is not None
        p = self.params
        present = [cols.get(m) for m in self.variant]
        if not self.pending and all(c is not None for c in present):
            first = present[0]
            assert first is not None
            if all(c is not None and c[0] == first[0] for c in present):
                return first[0], derive([c[1] for c in present if c is not None], p)
        n = len(self.variant)
        pending = self.pending
        for i, c in enumerate(present):
            if c is None:
                continue
            for step, value in zip(c[0], c[1], strict=True):
                slot = pending.get(step)
                if slot is None:
                    slot = pending[step] = [None] * n
                slot[i] = value
        steps = [st for st in sorted(pending) if None not in pending[st]]
        rows = [pending.pop(st) for st in steps]
        while len(pending) > ALIGN_CAP:
            del pending[min(pending)]
        columns = [[float(r[i] or 0.0) for r in rows] for i in range(n)]
        return steps, derive(columns, p) if steps else []

    def _stamp(self, rec: Record) -> None:
        """Detector context at this moment (median, effect, …), kept with the record."""
        det = self.detector
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
            if self.rule.budget is not None:
                extra["budget"] = budget_value(self.rule, self.params, self.settings)
        elif isinstance(det, j.Spike):
            ref = det.reference()
            extra["median"] = ref
            if ref and isinstance(rec.get("max"), int | float):
                extra["ratio"] = rec["max"] / ref
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
        elif isinstance(det, j.Excursion):
            if det.excursion:
                level, peak, since, points = det.excursion
                extra.update({"level": level, "peak": peak, "since": since, "points": points,
                              "ratio": peak / level if level > 0 else None})
        elif isinstance(det, j.Isolated):
            if det.spike:
                at, peak, med, after = det.spike
                extra.update({"at": at, "to": peak, "median": med, "after": after,
                              "ratio": peak / med})
        elif isinstance(det, j.AboveBest):
            if det.rise:
                extra["best"], extra["to"] = det.rise
                extra["rise"] = (det.rise[1] - det.rise[0]) / max(abs(det.rise[0]), 1e-12)
        elif isinstance(det, pg.NoImprovement):
            extra.update(det.held)
        elif isinstance(det, t.Trend):
            extra["effect"] = det.held_effect
            if self.below_start is not None:
                extra["start"] = self.below_start.start()
        elif isinstance(det, pg.NoProgress):
            extra.update(det.held or {"effect": det.last_effect})
        elif isinstance(det, j.Diverged | j.GapRising | j.Upturn | t.FlatSince
                        | fin.WholeWindow):
            extra.update(det.held)
        elif isinstance(det, t.Divergence):
            extra["a_effect_seen"], extra["b_effect_seen"] = det.held
            extra["reference"] = self.variant[0]
        elif isinstance(det, d.Repeats):
            extra.update(det.held)
        elif isinstance(det, d.NonFinite):
            extra["value"] = finite_or_text(rec.get("first"))
        rec["x"] = extra

    def finding(self, rec: Record, status: str) -> Finding:
        if status == "open" or "x" not in rec:
            self._stamp(rec)
        evidence: dict[str, Any] = {"metric": self.metric}
        if len(self.variant) > 1:
            evidence["metrics"] = list(self.variant)
        for name in ("first", "last", "min", "max", "count"):
            evidence[name] = finite_or_text(rec.get(name))
        for name, value in rec.get("x", {}).items():
            evidence[name] = finite_or_text(value) if isinstance(value, float) else value
        first_step = int(rec["first_step"])
        last_step = int(rec.get("last_step", first_step))
        fields = {**self.params, **evidence, "first_step": first_step, "last_step": last_step,
                  **self._words(evidence, first_step), "metric": self.shown(self.metric)}
        return Finding(
            rule_id=self.rule.id, title=self.rule.title, severity=self._severity(rec, evidence),
            status=status,
            metric=self.metric, first_step=first_step, last_step=last_step, evidence=evidence,
            message=render(self.rule.message, fields) + self._learning_words(rec),
            advice=self.rule.advice,
            id=rec.get("id"), record=rec,
        )

    def _learning_words(self, rec: Record) -> str:
        """Why a finding of a run that learns is info (Rule.learning)."""
        rule = self.rule
        if not self.learns(rec):
            return ""
        learning = self.shown(rule.learning or "")
        if rule.learning_level is None:
            return f" {learning} has risen beyond its noise since the start: the run learns."
        return (f" {learning} stands above {rule.learning_level:g} beyond its noise: "
                "the run learns.")

    def _severity(self, rec: Record, evidence: Mapping[str, Any]) -> str:
        """The rule's severity, raised to warning when the evidence grows strong: the
        finding holds `repeat` hits (a loss spike is worth knowing; spikes that repeat
        cost the run), or it was judged on `warn_after` points or more (a reward flat
        over 10 points may yet move; over 30 it is not learning). A severity the project's
        thresholds set is never raised: `{severity: info}` keeps the rule at info."""
        if self.learns(rec):
            return "info"
        if evidence.get("mid_run"):
            return "info"  # a window cut from a run: its start is not the run's
        if evidence.get("still_falling"):
            return "info"  # a loss that fell at each of its latest points is learning
        if self.fixed or SEVERITY_RANK[self.severity] >= SEVERITY_RANK["warning"]:
            return self.severity
        repeat, warn_after = self.params.get("repeat"), self.params.get("warn_after")
        # the points a verdict stands on, where its detector counts fewer than it read
        points = evidence.get("judged", evidence.get("points"))
        if ((isinstance(repeat, int | float) and int(rec.get("count") or 0) >= repeat)
                or (isinstance(warn_after, int | float) and isinstance(points, int | float)
                    and points >= warn_after)):
            return "warning"
        return self.severity

    def _words(self, evidence: Mapping[str, Any], first_step: int) -> dict[str, str]:
        """The changes a trend's message states, in plain words ("fell only 2.4%")."""
        kind = self.rule.detector
        if kind == "trend":
            relative = bool(_num(self.params, "relative", 1))
            return {"change": change_words(evidence.get("effect"), relative)}
        if kind in ("jump", "spike", "above_max"):
            words = {"repeats": self._repeats(evidence, first_step)}
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
            count, stay = evidence.get("count"), self.params.get("stay", 3)
            return {"stayed": f"{int(count) + int(stay) - 1}"
                    if isinstance(count, int) and isinstance(stay, int | float) else "?"}
        if kind == "no_improvement":
            return {"change": change_words(evidence.get("effect"), False,
                                           str(self.params.get("direction", "up")))}
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
            wanted = None if _num(self.params, "moved", 0) else str(
                self.params.get("direction", "down"))
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
            relative = bool(_num(self.params, "relative", 0))
            return {"a_change": change_words(evidence.get("a_effect_seen"), relative),
                    "b_change": change_words(evidence.get("b_effect_seen"), relative)}
        return {}

    def _repeats(self, evidence: Mapping[str, Any], first_step: int) -> str:
        """What a spike's message adds when it repeated: how many, since when, and the
        highest where the message quotes another (a loss that explodes jumps again and
        again; its latest jump alone understates it)."""
        count, kind = evidence.get("count"), self.rule.detector
        if not isinstance(count, int) or count < 2:
            return ""
        noun = "spike" if kind == "spike" else "jump"
        words = (f"; {count} {noun}s from step {first_step}, each within "
                 f"{self.params.get('hold')} points of the one before")
        top, latest = evidence.get("max"), evidence.get("to")
        if kind != "spike" and isinstance(top, int | float) and top != latest:
            words += f", the highest to {top:.4g}"
        return words

    def state(self) -> dict[str, Any]:
        st: dict[str, Any] = {"det": self.detector.state(), "open": self.tracker.open}
        if self.pending:
            st["align"] = [[s, v] for s, v in self.pending.items()]
        if self.below_start is not None:
            st["g"] = self.below_start.state()
            st["wf"] = self.window_from
        return st


# Detectors whose context a resolved record is stamped with (`Evaluator._stamp`) changes
# with every point. A threshold's count in its window is kept per finding as it is fed
# (`_note_window`); a non-finite value and a judgement of the whole log need nothing.
STAMP_READS_DETECTOR = (j.Spike, j.Jump, j.AboveMax, j.Shift, j.Excursion, j.Isolated,
                        j.Upturn, j.AboveBest, j.Diverged, j.GapRising, pg.NoImprovement,
                        pg.NoProgress, t.Trend, t.FlatSince, t.Divergence, d.Repeats)


def _several_steps(cols: Mapping[str, StepValues], reads: tuple[str, ...]) -> bool:
    """Whether the metrics in `reads` span more than one step in `cols`."""
    first = None
    for m in reads:
        col = cols.get(m)
        if col is not None:
            steps = col[0]
            if steps[-1] != steps[0] or (first is not None and steps[0] != first):
                return True
            first = steps[0]
    return False


def _rising(cols: Mapping[str, StepValues], reads: tuple[str, ...]) -> bool:
    """Whether each metric in `reads` is logged at rising steps in `cols` (a batch that
    can be cut by step)."""
    return all(all(a < b for a, b in pairwise(cols[m][0])) for m in reads if m in cols)


def _last_step(cols: Mapping[str, StepValues], reads: tuple[str, ...]) -> int:
    return max(cols[m][0][-1] for m in reads if m in cols and cols[m][0])


def _cut(cols: Mapping[str, StepValues], reads: tuple[str, ...],
         ends: list[int]) -> list[dict[str, StepValues]]:
    """`cols` in parts, each ending at a step of `ends` (the last part takes the rest).
    Only the metrics in `reads` are cut; another a detector reads beside them (a learning
    rate's warm-up) comes whole with the first part, as the whole batch feeds it first."""
    parts: list[dict[str, StepValues]] = [{} for _ in range(len(ends) + 1)]
    for name, (steps, values) in cols.items():
        if name not in reads:
            parts[0][name] = (steps, values)
            continue
        lo = 0
        for i, end in enumerate([*ends, math.inf]):
            hi = len(steps) if end == math.inf else bisect_right(steps, end, lo)
            if hi > lo:
                parts[i][name] = (steps[lo:hi], values[lo:hi])
            lo = hi
    return parts


def _cut_at(cols: Mapping[str, StepValues], metric: str,
            ends_at: list[int]) -> list[dict[str, StepValues]]:
    """`cols` in parts, `metric`'s points cut after each of the places `ends_at` (the
    last part takes the rest); another metric comes whole with the first part."""
    parts: list[dict[str, StepValues]] = [{} for _ in range(len(ends_at) + 1)]
    for name, (steps, values) in cols.items():
        if name != metric:
            parts[0][name] = (steps, values)
            continue
        lo = 0
        for i, hi in enumerate([*(e + 1 for e in ends_at), len(steps)]):
            if hi > lo:
                parts[i][name] = (steps[lo:hi], values[lo:hi])
            lo = hi
    return parts


def learning_key(rule: Rule) -> str | None:
    """The name of the gate `rule` reads (its learning metric and chance level), or None:
    rules naming the same metric and level share one gate per run."""
    if rule.learning is None:
        return None
    return rule.learning if rule.learning_level is None else (
        f"{rule.learning}>{rule.learning_level:g}")


def learning_gate(rule: Rule, state: dict[str, Any] | None = None) -> pg.Learning:
    """The gate judging whether `rule.learning` shows the run learning (LEARNING_PARAMS)."""
    lp = LEARNING_PARAMS
    return pg.Learning(z=lp["z"], min_points=int(lp["min_points"]), head=int(lp["head"]),
                      level=rule.learning_level, state=state)


def _measured(steps: list[int], values: list[float]) -> StepValues:
    """The points of a series that are not exactly 0 (`zero_unmeasured`: a mean over no
    token is logged as 0, which is no measurement)."""
    kept = [i for i, v in enumerate(values) if v != 0]
    if len(kept) == len(values):
        return steps, values
    return [steps[i] for i in kept], [values[i] for i in kept]


def clean(values: list[Any]) -> list[float]:
    """NULL (the store's NaN) as NaN, so detectors only ever see floats."""
    return [math.nan if v is None else v for v in values]


GAP_SCAN_LEAST = 32  # fewer steps than this (a live batch) are scanned without numpy


def _first_gap(window: list[float], steps: list[int], start: int, size: int) -> int | None:
    """The first index i from `start` at which `steps` leaves a gap longer than the steps
    its window (`size` steps, at least half full) spans: the window holds `window` (the
    latest steps before `start`) and then steps[start:i]. None if there is none."""
    if len(steps) - start < GAP_SCAN_LEAST:
        win: deque[float] = deque(window, maxlen=size)
        for i in range(start, len(steps)):
            step = steps[i]
            if (len(win) * 2 >= size and win[-1] > win[0]
                    and step - win[-1] > win[-1] - win[0]):
                return i
            win.append(float(step))
        return None
    np = lazy_numpy()
    window = window[-size:]  # what the deque holds
    w = np.concatenate((np.asarray(window, dtype=np.float64),
                        np.asarray(steps[start:], dtype=np.float64)))
    at = np.arange(len(window), len(w))  # the positions of steps[start:] in w
    first, last = w[np.maximum(0, at - size)], w[at - 1]
    gap = (np.minimum(at, size) * 2 >= size) & (last > first) & (w[at] - last > last - first)
    hits = np.flatnonzero(gap)
    return start + int(hits[0]) if len(hits) else None
