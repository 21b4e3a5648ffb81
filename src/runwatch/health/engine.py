"""The health engine: evaluates the rule catalogue incrementally as a run's points arrive.

`Engine` is pure (no database): feed it new points per metric and it returns the
findings that opened, changed or resolved; its `state()` is what the store persists
between batches, so the cost of a batch is proportional to the batch. The indexer's
hook (`runwatch.health.store.on_metrics`) loads and saves that state around one batch.
Once the run has succeeded, `finish` judges the rules that wait for its end on its
whole log (`runwatch.health.store.on_events` calls it when the end is read).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import fields
from functools import partial
from typing import Any

from runwatch.health import detectors as d
from runwatch.health import improvement as im
from runwatch.health import progress as pg
from runwatch.health.build import build_detector
from runwatch.health.evaluators import (
    EITHER_FIRST,
    PAIRED,
    Evaluator,
    StepValues,
    clean,
    learning_gate,
    learning_key,
)
from runwatch.health.findings import Finding, Record, finite_or_text, render
from runwatch.health.rules import BY_ID, CATALOGUE
from runwatch.health.rules.base import Param, Rule
from runwatch.health.thresholds import NONE, Overrides
from runwatch.health.wording import advice_words
from runwatch.metrics.aliases import alone_rank, health_name
from runwatch.metrics.catalogue import GROUPS
from runwatch.store.points import PointColumns

STATE_VERSION = 7
EPOCH = "epoch"  # the run's own epoch, where its log starts (`pg.EpochStart`)
STRIDE_PROBE = 3  # distinct logged steps that show a run's stride
CHUNK_STEPS = 1024  # divergence rules need series interleaved by step at this grain
# the non-finite values, in the order a message names them (as the run file writes them)
NONFINITE_KINDS = ("NaN", "Infinity", "-Infinity")
# The rule family each training method is judged by: group-based and other policy-gradient
# RL (on-policy distillation among them: it maximises minus a KL) as GRPO, the preference
# losses as DPO, supervised and off-policy distillation as SFT. Not IPO: its loss is
# (h - 1/(2 tau))^2, so a healthy run's loss near 0 with accuracy 1 is what
# dpo.loss_collapsed reads as over-optimisation.
METHOD_FAMILIES = {"ppo": "grpo", "rl": "grpo", "rloo": "grpo", "dapo": "grpo",
                   "reinforce": "grpo", "grpo": "grpo", "gspo": "grpo", "dr_grpo": "grpo",
                   "opd": "grpo", "sft": "sft", "distillation": "sft", "dpo": "dpo",
                   "orpo": "dpo", "kto": "dpo", "simpo": "dpo", "cpo": "dpo",
                   # IPO's loss, (h - 1/(2 tau))^2, sits near 0 with accuracy 1 on a healthy
                   # run: a family of its own, judged by the rules of every method only
                   "ipo": "ipo"}

# New points by metric key, as the store hands them out; the engine reads their steps,
# wall times and values (a value may also be None for NaN).
Batch = Mapping[str, PointColumns]


def normalize_method(method: str | None) -> str:
    """The family (sft, dpo or grpo) of a method as a run names it, in any case and
    punctuation ("Dr. GRPO" is `dr_grpo`), or of the one known name among its words
    ("my_rl"); a method the engine does not know as it is written, in words joined by `_`
    ("" for none)."""
    text = re.sub(r"[^a-z0-9]+", "_", (method or "").lower()).strip("_")
    if text in METHOD_FAMILIES:
        return METHOD_FAMILIES[text]
    # a name made of a known one ("my_rl", "dpo_v2"): its family, when its words name one
    named = {METHOD_FAMILIES[w] for w in text.split("_") if w in METHOD_FAMILIES}
    return named.pop() if len(named) == 1 else text


FAMILIES = frozenset(METHOD_FAMILIES.values())
# The canonical metrics only one family logs (docs/metrics.md), which tell the family of
# a run whose method is not given or not known. A task score (`accuracy`) and a reward's
# spread are left out: a supervised or preference log may hold a metric read as one.
_TOLD_BY = {family: frozenset(
    m.name for _title, metrics in GROUPS for m in metrics
    if m.recipes == (family,) and m.name not in ("accuracy", "val/accuracy"))
    for family in ("dpo", "grpo")}


def told_method(seen: set[str]) -> str | None:
    """The family a run's canonical metrics `seen` tell: DPO's or GRPO's own metrics
    (DPO's first: its logs may hold a reward), else a training loss alone is supervised;
    None while they tell nothing (no loss yet)."""
    for family in ("dpo", "grpo"):
        if seen & _TOLD_BY[family]:
            return family
    return "sft" if "loss" in seen else None


# The fields of a rule that no stored finding or engine state copies: a listing reads the
# rule's title as it is now, and only the docs show its condition. Every other field (a
# new one too) is in the catalogue's fingerprint (`catalogue_fingerprint`).
READ_LIVE = frozenset({"title", "condition"})


def catalogue_fingerprint(rules: Iterable[Rule]) -> str:
    """The catalogue `rules` as stored findings and engine states depend on it: every field
    of each rule but `READ_LIVE` (advice, message and severity, which a finding copies, as
    well as what shapes its evaluation), so an upgrade that changes any of them changes
    every run's fingerprint and the runs an older catalogue judged are judged again."""
    return json.dumps([STATE_VERSION, [
        {f.name: getattr(rule, f.name) for f in fields(rule) if f.name not in READ_LIVE}
        for rule in rules]], sort_keys=True, default=_fingerprinted)


def _fingerprinted(value: Any) -> Any:
    """What JSON does not hold, in a form that is the same in every process: a mapping
    (a rule's params) as a dict, a function (a `derive`) by its qualified name, never a
    repr that holds its address."""
    if isinstance(value, Mapping):
        return dict(value)
    qualname = getattr(value, "__qualname__", None)
    if callable(value) and qualname is not None:
        return f"{value.__module__}.{qualname}"
    raise TypeError(f"a rule field's value {value!r} has no stable form for the catalogue's "
                    "fingerprint: give it plain data or a module-level function")


# The catalogue's shape, computed once, and its digest: any change to a rule a stored
# finding or state depends on, or a new rule, changes every fingerprint. Every engine
# state begins with the digest (`runwatch.health.store.CATALOGUE_MARK`).
CATALOGUE_FP = catalogue_fingerprint(CATALOGUE)
CATALOGUE_ID = hashlib.sha256(CATALOGUE_FP.encode()).hexdigest()[:16]


def native_limits(rule: Rule, params: Mapping[str, Param],
                  settings: Mapping[str, float]) -> dict[str, Param]:
    """`rule`'s params for metrics logged in runwatch's own unit (`Rule.native_scale`):
    its limits divided by the run's setting, or by the rule's default for it where the
    run does not give a positive one."""
    assert rule.native_scale is not None
    name, default = rule.native_scale
    scale = settings.get(name)
    if not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        scale = default
    out: dict[str, Param] = dict(params)
    for limit in ("above", "below"):
        value = params.get(limit)
        if isinstance(value, (int, float)):
            out[limit] = float(value) / float(scale)
    return out


def fingerprint(method: str, settings: Mapping[str, float], overrides: Overrides) -> str:
    """Changes when anything that shapes evaluation changes; then state is rebuilt."""
    blob = json.dumps([CATALOGUE_ID, method, dict(settings), overrides.to_dict()],
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class Engine:
    """Rule evaluation for one run."""

    def __init__(self, method: str | None, settings: Mapping[str, float] | None = None,
                 overrides: Overrides = NONE, state: dict[str, Any] | None = None,
                 finished: bool = False) -> None:
        self.method = normalize_method(method)
        # A method not given or not known is judged as the family its metrics tell, told
        # once by the first metrics that tell one (`told_method`), and kept in the state.
        self.told: str | None = None
        # The run has succeeded: `feed` also judges the rules that wait for its end.
        self.finished = finished
        self.settings = {**(settings or {}), **overrides.settings}
        self.overrides = overrides
        self.fp = fingerprint(self.method, self.settings, overrides)
        st = state if state and state.get("fp") == self.fp else {}
        self.claims: dict[str, str] = dict(st.get("claims", {}))  # canonical -> raw key
        self.seen: set[str] = set(st.get("seen", []))  # canonical keys seen
        self.gates: dict[str, tuple[str, im.Learning]] = {}
        self._choose_rules(st.get("told"), st.get("learning", {}))
        self.evals: dict[str, Evaluator] = {}
        # Saved evaluators are rebuilt on the first batch, not here: reading a run's
        # stall status needs none of them.
        self._saved: dict[str, Any] = dict(st.get("evals", {}))
        # The open non-finite incident: one for every metric that is NaN or infinite at
        # the same steps, so one bad step reads as one finding that lists its metrics.
        self.nonfinite: Record | None = st.get("nonfinite")
        self.stall = d.Stall(**self._stall_params(), state=st.get("stall"))
        self.fresh = not st
        # The run's logging stride in steps, once three logged steps show it: rules whose
        # window is in steps (`window_in: steps`) start then, their window in points
        # scaled to it. `probe` holds the first distinct steps until then.
        self.stride: float | None = st.get("stride")
        self.probe: list[int] = list(st.get("probe", []))
        # The points logged before the stride was known (a few steps), by canonical name.
        self.early: dict[str, StepValues] = {
            k: (list(v[0]), list(v[1])) for k, v in st.get("early", {}).items()}
        # Where the run's log starts in its epochs, for the rules that need its start.
        self.epochs = pg.EpochStart(st.get("epochs"))
        # What the store remembers about the run's config between batches.
        self.config_cache: dict[str, Any] | None = None

    def _choose_rules(self, told: str | None, saved_gates: Mapping[str, Any]) -> None:
        """The rules of the run's method's family (of `told`, the family its metrics told,
        for a method not given or not known; until they tell one, the rules of every
        method's), and their learning gates."""
        self.told = told if self.method not in FAMILIES else None
        family = self.method if self.method in FAMILIES else (told or self.method)
        self.rules = [r for r in CATALOGUE if r.applies_to(family)
                      and self.overrides.enabled(r)]
        self.rule_ids = {r.id for r in self.rules}
        # Whether the run learns, judged once per learning metric (and chance level) from
        # the run's first point, for every rule that names it (Rule.learning).
        for rule in self.rules:
            key = learning_key(rule)
            if key is not None and rule.learning is not None and key not in self.gates:
                self.gates[key] = (rule.learning, learning_gate(rule, saved_gates.get(key)))

    # --- building evaluators -------------------------------------------------------

    def _stall_params(self) -> dict[str, float]:
        p = self.overrides.params(BY_ID["run.stalled"])
        return {"factor": float(p["factor"]), "min_seconds": float(p["min_seconds"])}

    def _make(self, key: str, state: dict[str, Any] | None) -> Evaluator | None:
        rule_id, _, variant_text = key.partition("|")
        rule = BY_ID.get(rule_id)
        if rule is None or rule.id not in self.rule_ids:
            return None
        variant = tuple(variant_text.split("|"))
        params = self.overrides.params(rule)
        if rule.native_scale is not None and all(self.claims.get(m) == m for m in variant):
            params = native_limits(rule, params, self.settings)
        det = self._detector(rule, params, (state or {}).get("det"))
        if det is None:
            return None
        gate = learning_key(rule)
        return Evaluator(rule, variant, params, self.overrides.severity(rule), det,
                         self.settings, state, self.gates[gate][1] if gate else None,
                         fixed=self.overrides.severity_set(rule),
                         remake=partial(self._detector, rule, params), shown=self.shown)

    def shown(self, name: str) -> str:
        """What a message calls canonical metric `name`: the key the run logs it as (a
        TRL run's `kl`, not `fb/loss/kl_ref/mean`); one read through a transform (a
        perplexity read as a loss) is named with the key it comes from."""
        raw = self.claims.get(name)
        if raw is None or raw == name:
            return name
        return raw if health_name(raw)[1] is None else f"{name} (from {raw})"

    def advice(self, rule: Rule) -> str:
        """`rule`'s advice in this run's names: a setting as the run's trainer names it,
        a metric as the run logs it (`advice_words`; the docs show runwatch's names)."""
        return advice_words(rule.advice, self.settings,
                            lambda name: self.shown(name) if name in self.claims else None)

    def _advised(self, found: Iterable[Finding]) -> list[Finding]:
        """The findings the engine hands out, their advice in this run's names."""
        out = list(found)
        for item in out:
            item.advice = self.advice(BY_ID[item.rule_id])
        return out

    def _detector(self, rule: Rule, params: Mapping[str, Param],
                  state: dict[str, Any] | None) -> Any:
        """`rule`'s detector from its saved `state` (None: a fresh one)."""
        det = build_detector(rule, in_points(params, self.stride), self.settings, state)
        if isinstance(getattr(det, "epochs", None), pg.EpochStart):
            # a detector that asks where the log starts gets the run's one EpochStart, fed
            # by every batch that logs `epoch` (its own default reads nothing)
            det.epochs = self.epochs
        return det

    def _restore(self) -> None:
        for key, est in self._saved.items():
            ev = self._make(key, est)
            if ev is not None and not any(m in self.seen for m in ev.rule.not_with):
                self.evals[key] = ev
        self._saved = {}

    def _activate(self) -> list[Evaluator]:
        """Start the rules the metrics seen so far allow; returns the evaluators an
        exclusive rule dropped for a variant it prefers."""
        dropped: list[Evaluator] = []
        for rule in self.rules:
            if rule.detector in ("nonfinite", "stall"):
                continue
            if any(m in self.seen for m in rule.not_with):
                # the run logs what says the rule does not apply: it stops, if it started
                dropped += [self.evals.pop(k) for k in [k for k in self.evals
                                                       if k.startswith(rule.id + "|")]]
                continue
            for variant in rule.variants:
                key = rule.id + "|" + "|".join(variant)
                if key in self.evals:
                    if rule.exclusive:
                        break  # its preferred variant already runs
                    continue
                if self.stride is None and rule.params.get("window_in") == "steps":
                    continue  # its window in points waits for the logging stride
                # A divergence rule starts with its reference series, so the judged
                # (sparse, validation) series finds history to compare with; one that
                # compares a validation with its own lowest starts with either (a
                # validation before the first training step is where the model started).
                if rule.detector in EITHER_FIRST:
                    if not any(m in self.seen for m in variant):
                        continue
                else:
                    needed = variant[:1] if rule.detector in PAIRED else variant
                    if not all(m in self.seen for m in needed):
                        continue
                ev = self._make(key, None)
                if ev is None:
                    continue
                self.evals[key] = ev
                if rule.exclusive:
                    # An exclusive rule runs on the first variant in its order the run
                    # logs, also when that metric appears after a later one (an eval
                    # accuracy logged at step 0, the reward from step 1).
                    for other in [k for k in self.evals
                                  if k.startswith(rule.id + "|") and k != key]:
                        dropped.append(self.evals.pop(other))
                    break
        return dropped

    # --- evaluation ----------------------------------------------------------------

    def feed(self, batch: Batch) -> list[Finding]:
        """Evaluate new points; returns the findings that opened, changed or resolved."""
        out: dict[int, Finding] = {}
        if not batch:
            return []
        if self._saved:
            self._restore()
        longest = max(batch.values(), key=lambda c: len(c.steps))
        if longest.steps:
            self._past_stall(longest.ts[0], out)
            self.stall.feed(longest.steps, longest.ts)
        early = self.early
        learned = self._learn_stride(batch)
        grown = learned
        cols: dict[str, StepValues] = {}
        bad: dict[int, dict[str, Any]] = {}  # step -> the metrics non-finite there
        # A shown name read only when alone goes last, so a batch holding both it and
        # the role's own name (a whole file read at once) gives the role to the latter;
        # an unknown name read by its words goes after both.
        for raw, (_seqs, steps, _ts, values) in sorted(
                batch.items(), key=lambda item: alone_rank(item[0])):
            if not steps:
                continue
            values = _check_finite(raw, steps, values, bad)
            name, transform = health_name(raw)
            owner = self.claims.setdefault(name, raw)
            if owner != raw:
                continue  # another key already feeds this canonical metric
            cols[name] = (steps, transform(values) if transform else values)
            if name not in self.seen:
                self.seen.add(name)
                grown = True
        if self.method not in FAMILIES and self.told is None:
            told = told_method(self.seen)
            if told is not None:  # its metrics tell its family: that family's rules
                self._choose_rules(told, {})
                grown = True  # they start on the metrics seen
        if EPOCH in cols:  # before the rules that ask where the log starts
            self.epochs.feed(*cols[EPOCH])
        if "metric.non_finite" in self.rule_ids:
            self._nonfinite_incident(batch, bad, out)
        if self.stride is None:  # kept for the rules that wait for the stride
            self.early = _joined(early, cols)
        elif learned:
            self.early = {}
        # Only in the batch that learns the stride do rules start that waited for it.
        catch_up = learned and bool(early)
        before = set(self.evals) if catch_up else set()
        if grown:  # a metric appeared for the first time: rules may start on it
            for ev in self._activate():
                if ev.tracker.open is not None:
                    out[id(ev.tracker.open)] = ev.finding(ev.tracker.open, "resolved")
        touched: set[str] = set()
        if catch_up:  # their window started now: the points before
            late = {k: ev for k, ev in self.evals.items() if k not in before
                    and ev.rule.params.get("window_in") == "steps"}
            if late:
                self._run(late, early, out, touched)
        self._run(self.evals, cols, out, touched, learn=True)
        for key in touched:
            open_rec = self.evals[key].tracker.open
            if open_rec is not None:
                out[id(open_rec)] = self.evals[key].finding(open_rec, "open")
        if self.finished:  # points read after the end (or with it): judged again
            for item in self.finish():
                out[id(item.record)] = item
        return self._advised(out.values())

    def finish(self) -> list[Finding]:
        """Judge the rules that wait for the run's end (`whole_window`) on its whole log;
        returns the findings that opened, changed or resolved. Idempotent: the end read
        twice changes nothing. A rule that judges the same metric's fall after a warm-up
        (`no_progress`, not a spread or a fall that is the finding) and has judged it
        leaves this one silent: the run was long enough for the live verdict. A rule with
        `after_signal` is judged whatever the live rules judged, but is silent while a
        finding of a rule of that signal that reads the same metric is open: it says only
        what none of them says."""
        if self._saved:
            self._restore()
        out: list[Finding] = []
        # a rule that speaks only where no rule of a signal that reads its metric does
        # (`after_signal`) is judged last, once the others have said what they say at the
        # end (sorted so, whatever order the catalogue lists them in)
        whole = sorted((ev for ev in self.evals.values() if ev.rule.detector == "whole_window"),
                       key=lambda ev: bool(ev.params.get("after_signal")))
        for ev in whole:
            after = ev.params.get("after_signal")
            if after:
                judged = any(other is not ev and other.rule.signal == after
                             and ev.metric in other.reads and other.tracker.open is not None
                             for other in self.evals.values())
            else:
                judged = any(isinstance(other.detector, pg.NoProgress)
                             and other.detector.judged and other.metric == ev.metric
                             and not other.params.get("moved")
                             and not other.params.get("max_spread")
                             for other in self.evals.values())
            found = ev.finish(judged)
            if found is not None:
                out.append(found)
        return self._advised(out)

    def _run(self, evals: Mapping[str, Evaluator], cols: dict[str, StepValues],
             out: dict[int, Finding], touched: set[str], learn: bool = False) -> None:
        """Feed `cols` to `evals`, noting resolved findings in `out` and open ones' keys;
        with `learn`, the learning gates first, chunk by chunk (the points the evaluators
        are about to judge count toward whether the run learns)."""
        for chunk in _chunks(cols):
            if learn:
                for metric, gate in self.gates.values():
                    if metric in chunk:
                        gate.feed(chunk[metric][1], chunk[metric][0])
            for key, ev in evals.items():
                if not any(m in chunk for m in ev.reads):
                    continue
                closed, is_open = ev.feed(chunk)
                for rec in closed:
                    out[id(rec)] = ev.finding(rec, "resolved")
                if is_open:
                    touched.add(key)

    def _learn_stride(self, batch: Batch) -> bool:
        """Note the run's first distinct logged steps until three show its stride (the
        median gap); True when the stride became known in this batch."""
        if self.stride is not None:
            return False
        seen = set(self.probe)
        for cols in batch.values():
            seen.update(cols.steps[:STRIDE_PROBE])
        self.probe = sorted(seen)[:STRIDE_PROBE]
        if len(self.probe) < STRIDE_PROBE:
            return False
        gaps = sorted(b - a for a, b in zip(self.probe, self.probe[1:], strict=False))
        self.stride = float(max(1, gaps[len(gaps) // 2]))
        self.probe = []
        return True

    def _nonfinite_incident(self, batch: Batch, bad: dict[int, dict[str, Any]],
                            out: dict[int, Finding]) -> None:
        """Extend, open or resolve the non-finite incident: it holds over consecutive
        logged steps where any metric is NaN or infinite, and lists every such metric."""
        rec = self.nonfinite
        if not bad:
            if rec is not None:  # the batch's steps are all finite: the incident is over
                out[id(rec)] = self._nonfinite_finding(rec, "resolved")
                self.nonfinite = None
            return
        steps = sorted({s for c in batch.values() for s in c.steps})
        touched = False
        for step in steps:
            found = bad.get(step)
            if found is None:
                if rec is not None:
                    out[id(rec)] = self._nonfinite_finding(rec, "resolved")
                    rec, touched = None, False
                continue
            if rec is None:
                rec = {"id": None, "first_step": step, "last_step": step, "count": 0,
                       "values": {}}
            if not rec["count"] or step != rec["last_step"]:
                rec["count"] += 1  # a step whose lines come in two batches is one step
            rec["last_step"] = step
            # every kind seen, for the message (a state saved before "kinds" was kept
            # knows each metric's first kind)
            kinds = rec.setdefault("kinds", list(dict.fromkeys(rec["values"].values())))
            for raw, text in found.items():
                rec["values"].setdefault(raw, text)
                if text not in kinds:
                    kinds.append(text)
            touched = True
        if rec is not None and touched:
            out[id(rec)] = self._nonfinite_finding(rec, "open")
        self.nonfinite = rec

    def _nonfinite_finding(self, rec: Record, status: str) -> Finding:
        rule = BY_ID["metric.non_finite"]
        values: dict[str, str] = rec["values"]
        names = list(values)
        # a state saved before "kinds" was kept knows each metric's first kind only
        kinds = sorted(set(rec.get("kinds") or values.values()), key=NONFINITE_KINDS.index)
        first, last = int(rec["first_step"]), int(rec["last_step"])
        evidence = {"metric": names[0], "metrics": names, "values": values,
                    "value": values[names[0]], "count": rec["count"]}
        fields = {
            "names": _listed(names), "verb": "was" if len(names) == 1 else "were",
            "value": _listed(kinds, last="or"),
            "where": f"at step {first}" if first == last else
            f"at {rec['count']} logged steps from {first} to {last}",
        }
        return Finding(rule.id, rule.title, self.overrides.severity(rule), status, names[0],
                       first, last, evidence, render(rule.message, fields), rule.advice,
                       rec.get("id"), rec)

    # --- stall -----------------------------------------------------------------

    def check_stall(self, now: float, running: bool) -> list[Finding]:
        """The open stall finding at wall-clock time `now`, if the run has gone silent.

        A stall is a live condition, checked when findings are read; it is stored (as
        resolved) once points arrive again after the silence, by `feed`.
        """
        if "run.stalled" not in self.rule_ids or not running:
            return []
        if not self.stall.stalled(now):
            return []
        return self._advised([self._stall_finding(self._stall_record(now), "open")])

    def _past_stall(self, resumed_ts: float, out: dict[int, Finding]) -> None:
        if "run.stalled" in self.rule_ids and self.stall.stalled(resumed_ts):
            rec = self._stall_record(resumed_ts)
            out[id(rec)] = self._stall_finding(rec, "resolved")

    def _stall_record(self, now: float) -> Record:
        step = self.stall.last_step if self.stall.last_step is not None else 0
        return {"id": None, "first_step": step, "last_step": step,
                "silent_s": now - (self.stall.last_ts or now), "limit_s": self.stall.limit()}

    def _stall_finding(self, rec: Record, status: str) -> Finding:
        rule = BY_ID["run.stalled"]
        evidence = {"silent_s": round(rec.get("silent_s", 0.0), 1),
                    "limit_s": round(rec.get("limit_s", 0.0), 1), "last_step": rec["last_step"]}
        fields = {**self.overrides.params(rule), **evidence}
        return Finding(rule.id, rule.title, self.overrides.severity(rule), status, "*",
                       int(rec["first_step"]), int(rec["last_step"]), evidence,
                       render(rule.message, fields), rule.advice, rec.get("id"), rec)

    # --- persistence -----------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {
            "fp": self.fp,
            "claims": self.claims,
            "seen": sorted(self.seen),
            "told": self.told,
            "evals": {**self._saved, **{k: ev.state() for k, ev in self.evals.items()}},
            "learning": {k: gate.state() for k, (_m, gate) in self.gates.items()},
            "nonfinite": self.nonfinite,
            "stall": self.stall.state(),
            "stride": self.stride,
            "probe": self.probe,
            "early": {k: [v[0], v[1]] for k, v in self.early.items()},
            "epochs": self.epochs.state(),
        }


def _joined(a: Mapping[str, StepValues], b: Mapping[str, StepValues],
            most: int = 64) -> dict[str, StepValues]:
    """Series `a` followed by `b`, per name, keeping at most the first `most` points."""
    out = {k: (list(v[0]), list(v[1])) for k, v in a.items()}
    for k, (steps, values) in b.items():
        got = out.setdefault(k, ([], []))
        room = most - len(got[0])
        got[0].extend(steps[:room])
        got[1].extend(values[:room])
    return out


def in_points(params: Mapping[str, Param], stride: float | None) -> Mapping[str, Param]:
    """A rule's params with a window given in steps (`window_in: steps`) turned into
    logged points for a run logged every `stride` steps, and never under `min_window`
    points: a run logged every 10 steps judges 64 steps on 8 points, not on 64."""
    if params.get("window_in") != "steps" or stride is None:
        return params
    window = math.ceil(float(params["window"]) / stride)
    return {**params, "window": max(int(params.get("min_window", 8)), window)}


def _check_finite(raw: str, steps: list[int], values: list[Any],
                  bad: dict[int, dict[str, Any]]) -> list[float]:
    """Note the steps where `raw` is NaN or infinite in `bad`; returns the values with
    NULLs (the store's NaN) as NaN."""
    verdicts = d.NonFinite().feed(values)
    if True not in verdicts:
        return values
    values = clean(values)
    for step, value, hit in zip(steps, values, verdicts, strict=True):
        if hit:
            bad.setdefault(step, {}).setdefault(raw, finite_or_text(value))
    return values


def _listed(names: list[str], most: int = 4, last: str = "and") -> str:
    """"a", "a and b", "a, b and c", "a, b, c and 3 more" (`last` "or": "a, b or c")."""
    if len(names) == 1:
        return names[0]
    if len(names) > most:
        return ", ".join(names[: most - 1]) + f" {last} {len(names) - most + 1} more"
    return ", ".join(names[:-1]) + f" {last} " + names[-1]


def _chunks(cols: dict[str, StepValues]) -> Iterable[dict[str, StepValues]]:
    """Split a big batch into step ranges of CHUNK_STEPS so that series advance together.

    Only the ranges that hold points are visited: from one chunk the walk jumps to the
    next range a point falls in, so the work is bounded by the batch's points, not by
    its step numbers (a run that logs step 10**12 after step 4 is two chunks, not 10**9).
    """
    lo = min((c[0][0] for c in cols.values()), default=0)
    hi = max((c[0][-1] for c in cols.values()), default=0)
    if hi - lo <= CHUNK_STEPS:
        yield cols
        return
    cuts = dict.fromkeys(cols, 0)
    # the edges are lo + j * CHUNK_STEPS; the first beyond hi is the last and takes the rest
    final = lo + ((hi - lo) // CHUNK_STEPS + 1) * CHUNK_STEPS
    edge = lo + CHUNK_STEPS
    while edge <= final:
        last = edge == final
        chunk: dict[str, StepValues] = {}
        for k, (steps, values) in cols.items():
            start = cuts[k]
            # The last chunk takes whatever is left, so a key whose steps go backwards
            # (a resumed run) still delivers every point once, in order.
            end = len(steps) if last else bisect_right(steps, edge - 1, start)
            if end > start:
                chunk[k] = (steps[start:end], values[start:end])
                cuts[k] = end
        if chunk:
            yield chunk
        reach = [_reach(steps, cuts[k]) for k, (steps, _v) in cols.items()
                 if cuts[k] < len(steps)]
        if not reach:
            return
        # the first edge whose chunk takes a point: edge - 1 >= min(reach)
        ahead = lo - (lo - min(reach) - 1) // CHUNK_STEPS * CHUNK_STEPS
        edge = min(max(edge + CHUNK_STEPS, ahead), final)


def _reach(steps: list[int], start: int) -> int:
    """The least x for which `bisect_right(steps, x, start)` passes `start`: steps[start]
    for sorted steps. Steps that go backwards (a resumed run) are searched as bisect
    searches them: it stays at `start` only while x is below every step it probes on its
    way down to `start`."""
    least, hi = steps[start], len(steps)
    while hi > start + 1:
        hi = (start + hi) // 2
        least = min(least, steps[hi])
    return least
