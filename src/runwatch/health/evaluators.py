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
from runwatch.health import excursions as ex
from runwatch.health import finished as fin
from runwatch.health import improvement as im
from runwatch.health import jumps as j
from runwatch.health import trends as t
from runwatch.health.build import budget_value, build_detector, number
from runwatch.health.context import STAMP_READS_DETECTOR, detector_context
from runwatch.health.findings import Finding, Record, Tracker, finite_or_text, render
from runwatch.health.rules.base import LEARNING_PARAMS, SEVERITY_RANK, Param, Rule
from runwatch.health.trendstats import lazy_numpy, thin, window_levels
from runwatch.health.wording import message_words

# The steps and values of one metric's PointColumns, after its alias transform.
StepValues = tuple[list[int], list[float]]
ALIGN_CAP = 512  # steps waiting for a partner metric; older ones are dropped
# Detectors that judge a second series against a first (a variant's reference, then the
# judged series): the finding is about the second.
PAIRED = ("divergence", "flat_since", "diverged", "gap_rising")
# Paired detectors that start with whichever of their two series the run logs first.
EITHER_FIRST = ("diverged", "gap_rising")
LR = "learning_rate"  # read beside a reward judged for no improvement, for its warm-up


class Evaluator:
    """Evaluates one rule on one variant (tuple of canonical metric names)."""

    def __init__(self, rule: Rule, variant: tuple[str, ...], params: Mapping[str, Param],
                 severity: str, detector: Any, settings: Mapping[str, float],
                 state: dict[str, Any] | None = None,
                 learning: im.Learning | None = None, fixed: bool = False,
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
            im.BelowStart(number(self.params, "of_start", 1.0), state=st.get("g"))
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
        # Not where no record can resolve: a paired rule's batch without the series it
        # judges. The state as it is saved between batches, read back only where one did.
        again = (self.restamps and _several_steps(cols, self.reads)
                 and (self.rule.detector not in PAIRED or self.variant[-1] in cols))
        saved = orjson.dumps(self.state()) if again else None
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
        before = orjson.loads(saved)
        self.detector = self.remake(before["det"])
        self._load(before)
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
                and not number(self.params, "zero_unmeasured", 0))

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
            if number(self.params, "zero_unmeasured", 0):
                steps, values = _measured(steps, values)
            if rule.detector == "pinned" and self.params.get("side") == "top":
                # pinned at its ceiling: the floor of the series turned over
                verdicts = self.detector.feed([-v for v in values], steps)
            elif rule.detector in ("threshold", "pinned"):
                verdicts = self.detector.feed(values, steps)
            elif rule.detector in ("trend", "no_progress", "no_improvement"):
                if isinstance(self.detector, im.NoImprovement) and LR in cols:
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
                            j.Shift | ex.Excursion | ex.Isolated | ex.Upturn | d.Repeats):
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
            past, held, span, levels = det.past, det.held_effect, det.held_span, det.buckets.held
            det = self.detector = build_detector(
                self.rule, {**self.params, "window": det.size}, self.settings, None)
            det.past = past
            # a finding open at the gap resolves after it: it says what held before
            det.held_effect, det.held_span, det.buckets.held = held, span, levels
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
            number(p, "min_change", 0.05), int(number(p, "min_points", 4)),
            number(p, "min_level", 0.0), number(p, "end_change", -math.inf))
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
        rule = self.rule
        rec["x"] = detector_context(
            self.detector, rec, reference=self.variant[0],
            budget=None if rule.budget is None else budget_value(rule, self.params,
                                                                   self.settings),
            start=None if self.below_start is None else self.below_start.start())
        rec["x"].update(self._levels())

    def _levels(self) -> dict[str, Any]:
        """Where a trend's window started and ended when it last held (`window_levels`):
        the levels its message states the change between. Apart from the effect the rule
        decided on, which is the change over the window's median level."""
        det = self.detector
        if isinstance(det, t.Trend) and det.buckets.held is not None:
            return {"levels": det.buckets.held}
        if isinstance(det, t.Divergence) and det.b.held is not None:
            held = det.b.held
            # the reference over the judged series' window, thinned as the rule read it
            ref = window_levels(*thin(*det.a.between(held["from_step"], held["to_step"]),
                                      t.Trend.BUCKETS))
            return {"levels": held, **({"reference_levels": ref} if ref else {})}
        return {}

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
                  **message_words(self.rule, self.params, evidence, first_step),
                  "metric": self.shown(self.metric)}
        if len(self.variant) > 1:
            # the names the run logged them as; the evidence keeps the canonical ones
            fields["reference"] = self.shown(self.variant[0])
            fields["metrics"] = [self.shown(m) for m in self.variant]
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
        if self.fixed or not self.learns(rec):  # a severity the project set is not lowered
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
        thresholds set is the one reported, never raised nor lowered: `{severity: info}`
        keeps the rule at info, `{severity: critical}` at critical while the run learns."""
        if self.fixed:
            return self.severity
        if self.learns(rec):
            return "info"
        if evidence.get("mid_run"):
            return "info"  # a window cut from a run: its start is not the run's
        if evidence.get("still_falling"):
            return "info"  # a loss that fell at each of its latest points is learning
        if SEVERITY_RANK[self.severity] >= SEVERITY_RANK["warning"]:
            return self.severity
        repeat, warn_after = self.params.get("repeat"), self.params.get("warn_after")
        # the points a verdict stands on, where its detector counts fewer than it read
        points = evidence.get("judged", evidence.get("points"))
        if ((isinstance(repeat, int | float) and int(rec.get("count") or 0) >= repeat)
                or (isinstance(warn_after, int | float) and isinstance(points, int | float)
                    and points >= warn_after)):
            return "warning"
        return self.severity

    def state(self) -> dict[str, Any]:
        st: dict[str, Any] = {"det": self.detector.state(), "open": self.tracker.open}
        if self.pending:
            st["align"] = [[s, v] for s, v in self.pending.items()]
        if self.below_start is not None:
            st["g"] = self.below_start.state()
            st["wf"] = self.window_from
        return st


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


def learning_gate(rule: Rule, state: dict[str, Any] | None = None) -> im.Learning:
    """The gate judging whether `rule.learning` shows the run learning (LEARNING_PARAMS)."""
    lp = LEARNING_PARAMS
    return im.Learning(z=lp["z"], min_points=int(lp["min_points"]), head=int(lp["head"]),
                      level=rule.learning_level, state=state)


def _measured(steps: list[int], values: list[float]) -> StepValues:
    """The points of a series that are not exactly 0 (`zero_unmeasured`: a mean over no
    token is logged as 0, which is no measurement)."""
    if 0.0 not in values:  # one C-level pass: a value equal to 0 is one that is 0
        return steps, values
    kept = [i for i, v in enumerate(values) if v != 0]
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
