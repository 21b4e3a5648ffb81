"""The health rules scored on a labelled corpus of real logs (tests/data/real): each run is
replayed one logged step at a time through the live path, and precision, recall and the
delay from onset to detection are counted per pathology class.

The live path is the one a user watching a run sees: the run's lines are appended to
its metrics.jsonl, the folder indexer stores them and calls the health hook
(`runwatch.health.store.on_metrics`), and the findings table is read after every step.
After the last line the run's end (SUCCEEDED) is appended to its events.jsonl, as the
SDK's finish writes it, and read as its own pass (`runwatch.health.store.on_events`).
A finding is *detected* at the step whose line made it appear; one the end made appear,
at the last line.
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import select

from runwatch.health.rules.base import SEVERITY_RANK
from runwatch.health.store import on_events, on_metrics
from runwatch.ingest.importers import read_source, write_run_dir
from runwatch.ingest.importers.common import Imported, synthesize_ts
from runwatch.ingest.indexer import Indexer
from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import dumps_line
from runwatch.store import open_engine
from runwatch.store import queries as q
from runwatch.store import schema as s

# The pathology class each rule's finding stands for, as the corpus labels name them.
# Rules not listed raise findings that count toward no class (they are still false
# alarms on a healthy run when they are warnings or worse).
RULE_CLASSES: dict[str, str] = {
    "metric.non_finite": "nan",
    "grpo.zero_variance": "reward_zero_variance",
    "grpo.no_signal": "reward_zero_variance",
    "grpo.reward_std_zero": "reward_zero_variance",
    "grpo.reward_std_zero_often": "reward_zero_variance",
    "grpo.no_gradient": "reward_zero_variance",
    "grpo.reward_pinned": "reward_zero_variance",
    "grpo.reward_range_zero": "reward_zero_variance",
    "grpo.truncation": "length_truncation",
    "grpo.length_at_budget": "length_truncation",
    "grpo.length_at_ceiling": "length_truncation",
    "grpo.truncation_extreme": "length_truncation",
    "grpo.truncation_rising": "length_truncation",
    "sft.overfitting": "overfitting",
    "val.loss_above_best": "overfitting",
    "val.gap_rising": "overfitting",
    "grpo.loss_spike": "loss_spike",
    "loss.spike": "loss_spike",
    "loss.excursion": "loss_spike",
    "loss.above_max": "loss_spike",
    "loss.spike_isolated": "loss_spike",
    "grpo.loss_above_max": "loss_spike",
    "loss.rising": "loss_rising",
    "loss.upturn": "loss_rising",
    "loss.stepped_up": "loss_rising",
    "loss.climbing": "loss_rising",
    "loss.above_start": "loss_rising",
    "loss.doubled": "loss_rising",
    "loss.diverged": "loss_rising",
    "loss.implausible": "loss_rising",
    "loss.repeats": "loss_not_falling",
    "loss.zero": "loss_zero",
    "loss.near_zero": "loss_zero",
    "dpo.loss_zero": "loss_zero",
    "loss.stuck": "loss_not_falling",
    "val.loss_frozen": "loss_not_falling",
    "optim.zero_gradient": "loss_not_falling",
    "sft.loss_not_falling": "loss_not_falling",
    "loss.flat_finished_run": "loss_not_falling",
    "loss.fell_little": "loss_not_falling",
    "sft.plateau": "loss_not_falling",
    "dpo.loss_not_falling": "loss_not_falling",
    "dpo.train_margin_not_positive": "loss_not_falling",
    "rl.no_progress": "rl_no_progress",
    "dpo.over_optimisation": "dpo_over_optimisation",
    "dpo.loss_collapsed": "dpo_over_optimisation",
    "dpo.preference_saturated": "dpo_over_optimisation",
    "grpo.entropy_collapse": "entropy_collapse",
    "grpo.entropy_low": "entropy_collapse",
    "grpo.entropy_crash": "entropy_collapse",
    "grpo.entropy_falling": "entropy_collapse",
    "grpo.entropy_near_zero": "entropy_collapse",
    "grpo.kl_ref_growing": "kl_growth",
    "grpo.kl_ref_high": "kl_growth",
    "grpo.kl_ref_drift": "kl_growth",
    "grpo.kl_ref_creep": "kl_growth",
    "grpo.reward_hacking": "reward_hacking",
    "grpo.perplexity_hacking": "reward_hacking",
    "grpo.proxy_hacking": "reward_hacking",
    "grpo.task_score_falling": "reward_hacking",
}
# The method a corpus run is imported as: PPO reads as RL, pretraining as SFT (its loss
# should fall), as `runwatch import --method` takes them.
IMPORT_METHOD = {"sft": "sft", "dpo": "dpo", "grpo": "grpo", "ppo": "grpo", "other": "sft"}
SPLITS = ("train", "holdout", "all")
ALARM = SEVERITY_RANK["warning"]  # a finding this severe on a healthy run is a false alarm
# Findings about the process, not the training: a stall reads the wall time between log
# lines, which the labels (what the metrics show) do not judge. Listed apart.
PROCESS_RULES = frozenset({"run.stalled"})


@dataclass
class Label:
    """What a careful reader sees in a run: a class and the step it shows from."""

    cls: str
    onset: int


@dataclass
class CorpusRun:
    name: str
    path: Path
    method: str
    split: str
    label: str  # "healthy" or the main class
    labels: list[Label]  # the main class and any secondary ones
    round: int | None = None  # when a held-back run was added (labels.yaml)


@dataclass
class Detection:
    rule_id: str
    cls: str | None
    severity: str
    step: int  # the step whose line made the finding appear
    point: int  # that line's index among the run's logged steps
    first_step: int
    open_at_end: bool = True  # its status after the run's last line and end


@dataclass
class Replayed:
    run: CorpusRun
    steps: list[int]  # the step of every logged line, in order
    detections: list[Detection] = field(default_factory=list)
    seconds: float = 0.0


def read_labels(corpus: Path) -> dict[str, Any]:
    """A corpus folder's labels.yaml as yaml.safe_load reads it, by libyaml's safe loader
    where PyYAML was built with it (a tenth of the pure-Python loader's second on the
    real corpus's file)."""
    return dict(yaml.load((corpus / "labels.yaml").read_text(encoding="utf-8"),
                          Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))


def load_corpus(corpus: Path) -> list[CorpusRun]:
    """The labelled runs of a corpus folder (its labels.yaml), by name."""
    data = read_labels(corpus)
    out = []
    for name, entry in sorted(data["runs"].items()):
        labels = [] if entry["label"] == "healthy" else [Label(entry["label"],
                                                               int(entry["onset_step"]))]
        labels += [Label(x["label"], int(x["onset_step"])) for x in entry.get("secondary", [])]
        out.append(CorpusRun(name, corpus / name / entry["file"], entry["method"],
                             entry["split"], entry["label"], labels, entry.get("round")))
    return out


def replay(run: CorpusRun, folder: Path) -> Replayed:
    """Feed `run`'s log to a fresh runs folder in `folder` one line at a time, indexing
    after each line as the server does, and note when each finding first appears."""
    imported = read_source(run.path)
    records = sorted(imported.records, key=lambda r: r["step"])
    synthesize_ts(records, end=time.time())
    runs = folder / "runs"
    runs.mkdir(parents=True)
    method = IMPORT_METHOD.get(run.method, run.method)
    first = Imported(imported.trainer, imported.method, records[:1], imported.config,
                     imported.source)
    run_dir = write_run_dir(first, runs, run.name, method=method, finished=False)
    engine = open_engine(folder / "index.db")
    indexer = Indexer(engine, runs, hooks=[on_metrics], events_hooks=[on_events])
    out = Replayed(run, [r["step"] for r in records])
    # a finding by its id: it counts from the line that made it appear, at the highest
    # severity it reaches (an info that holds long enough turns into a warning)
    seen: dict[int, Detection] = {}
    pk: int | None = None  # the run's key, once the first line is indexed

    def note(point: int, rec: dict[str, Any]) -> None:
        nonlocal pk
        indexer.index_once()
        with engine.connect() as conn:
            if pk is None:
                pk = q.resolve_run(conn, run.name).pk
            f = s.findings.c
            rows = conn.execute(select(f.id, f.rule_id, f.severity, f.first_step, f.status)
                                .where(f.run_pk == pk)).all()
        for row in rows:
            known = seen.get(row.id)
            if known is not None:
                if SEVERITY_RANK.get(row.severity, 0) > SEVERITY_RANK.get(known.severity, 0):
                    known.severity = row.severity
                known.open_at_end = row.status == "open"
                continue
            seen[row.id] = Detection(row.rule_id, RULE_CLASSES.get(row.rule_id),
                                     row.severity, rec["step"], point, int(row.first_step),
                                     row.status == "open")
            out.detections.append(seen[row.id])

    start = time.perf_counter()
    try:
        for point, rec in enumerate(records):
            if point:
                with open(run_dir / fmt.METRICS, "ab") as fh:
                    fh.write(dumps_line({"step": rec["step"], "ts": rec["ts"], "seq": point,
                                         **{k: v for k, v in rec.items()
                                            if k not in ("step", "ts")}}))
            note(point, rec)
        with open(run_dir / fmt.EVENTS, "ab") as fh:  # the end, as the SDK's finish writes it
            fh.write(dumps_line({"ts": records[-1]["ts"], "seq": 1, "phase": "SUCCEEDED"}))
        note(len(records) - 1, records[-1])
    finally:
        engine.dispose()
    out.seconds = time.perf_counter() - start
    return out


def replay_all(runs: Iterable[CorpusRun]) -> list[Replayed]:
    out = []
    for run in runs:
        with tempfile.TemporaryDirectory(prefix="runwatch-health-eval-") as tmp:
            out.append(replay(run, Path(tmp)))
    return out


def _delay(result: Replayed, label: Label, det: Detection) -> tuple[int, int]:
    """Logged points and steps from the labelled onset to the detection (negative: the
    finding came before the step the label names)."""
    onset_point = next((i for i, st in enumerate(result.steps) if st >= label.onset),
                       len(result.steps) - 1)
    return det.point - onset_point, det.step - label.onset


def score(results: list[Replayed], split: str = "all",
          round_: int | None = None) -> dict[str, Any]:
    """Precision, recall and detection delay per class over the runs of `split` (and,
    given `round_`, only the held-back runs added in that round).

    A run labelled with a class (main or secondary) is detected when a finding of that
    class appears at any point of the replay; a finding of a class on a run not
    labelled with it is a false positive of that class. A healthy run with a finding of
    warning or worse (the highest severity it reached) is a false alarm, whatever its
    class."""
    chosen = [r for r in results if (split == "all" or r.run.split == split)
              and (round_ is None or r.run.round == round_)]
    classes = sorted({lab.cls for r in chosen for lab in r.run.labels}
                     | {d.cls for r in chosen for d in r.detections if d.cls})
    per_class: dict[str, dict[str, Any]] = {}
    for cls in classes:
        positives = [r for r in chosen if any(lab.cls == cls for lab in r.run.labels)]
        hits, delays_points, delays_steps, missed = [], [], [], []
        for r in positives:
            label = next(lab for lab in r.run.labels if lab.cls == cls)
            det = next((d for d in r.detections if d.cls == cls), None)
            if det is None:
                missed.append(r.run.name)
                continue
            hits.append(r.run.name)
            points, steps = _delay(r, label, det)
            delays_points.append(points)
            delays_steps.append(steps)
        false_pos = [r.run.name for r in chosen if r not in positives
                     and any(d.cls == cls for d in r.detections)]
        flagged = len(hits) + len(false_pos)
        per_class[cls] = {
            "runs": len(positives), "detected": len(hits), "missed": missed,
            "false_positives": false_pos,
            "recall": len(hits) / len(positives) if positives else None,
            "precision": len(hits) / flagged if flagged else None,
            "median_delay_points": statistics.median(delays_points) if delays_points else None,
            "median_delay_steps": statistics.median(delays_steps) if delays_steps else None,
            "delays_points": dict(zip(hits, delays_points, strict=True)),
        }
    healthy = [r for r in chosen if not r.run.labels]
    alarms = {r.run.name: sorted({d.rule_id for d in r.detections
                                  if SEVERITY_RANK.get(d.severity, 0) >= ALARM
                                  and d.rule_id not in PROCESS_RULES}) for r in healthy}
    process = {r.run.name: sorted({d.rule_id for d in r.detections
                                   if d.rule_id in PROCESS_RULES}) for r in healthy}
    # A false alarm that the engine took back: every warning of the run had resolved by
    # its end (a reward flat for its first 30 points that then rose), which a user saw
    # while it held but does not find at the end.
    taken_back = sorted(r.run.name for r in healthy if alarms[r.run.name] and not any(
        d.open_at_end for d in r.detections
        if SEVERITY_RANK.get(d.severity, 0) >= ALARM and d.rule_id not in PROCESS_RULES))
    # Not a false alarm, but what a user of a healthy run reads all the same: the healthy
    # runs with a finding below a warning and none above it.
    infos = {r.run.name: sorted({d.rule_id for d in r.detections
                                 if d.rule_id not in PROCESS_RULES})
             for r in healthy if not alarms[r.run.name]}
    labelled = [r for r in chosen if r.run.labels]
    found = [r for r in labelled if any(d.cls in {lab.cls for lab in r.run.labels}
                                        for d in r.detections)]
    # Found counts a finding of any severity; a healthy run counts as warned only on a
    # warning. The stricter figure beside it: labelled runs told of their class by a
    # warning or worse, the measure a false alarm on a healthy run is taken by.
    warned = [r for r in found if any(d.cls in {lab.cls for lab in r.run.labels}
                                      and SEVERITY_RANK.get(d.severity, 0) >= ALARM
                                      for d in r.detections)]
    delays = [v for c in per_class.values() for v in c["delays_points"].values()]
    return {
        "split": split, "round": round_, "runs": len(chosen), "classes": per_class,
        "pathologies": {"runs": len(labelled), "detected": len(found),
                        "recall": len(found) / len(labelled) if labelled else None,
                        "recall_interval": interval(len(found), len(labelled)),
                        "warned": len(warned),
                        "warned_recall": len(warned) / len(labelled) if labelled else None,
                        "median_delay_points": statistics.median(delays) if delays else None},
        "healthy": {"runs": len(healthy),
                    "warned_interval": interval(sum(1 for v in alarms.values() if v),
                                                len(healthy)),
                    "with_warnings": {k: v for k, v in alarms.items() if v},
                    "warnings_resolved_by_end": taken_back,
                    "with_infos_only": {k: v for k, v in infos.items() if v},
                    "process_findings": {k: v for k, v in process.items() if v}},
    }


def interval(k: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """The Wilson score interval (95% at z 1.96) of a share of k in n, or None for n 0.
    A corpus of a few hundred runs measures a share to several points either way; the
    interval says how far, and unlike the normal approximation it stays within 0-1 and
    holds for shares near 0 or 1 (no false alarm in 243 runs is not a rate of 0)."""
    if n <= 0:
        return None
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _between(bounds: tuple[float, float] | None) -> str:
    return "" if bounds is None else f", 95% interval {bounds[0] * 100:.0f}-{bounds[1]:.0%}"


def pct(value: float | None) -> str:
    """A share as a whole percent; a dash where there is nothing to share."""
    return "—" if value is None else f"{value:.0%}"


def summary_line(title: str, sc: dict[str, Any]) -> str:
    """A score's one line, as `health-eval` and `make bench` print it: pathologies found
    (any severity) and told by a warning, the median delay, healthy runs warned (and how
    many of them had every warning resolved by the run's end), and the healthy runs with
    an info and no warning (not false alarms, but read all the same)."""
    p, h = sc["pathologies"], sc["healthy"]
    delay = p["median_delay_points"]
    warned = len(h["with_warnings"])
    infos = len(h.get("with_infos_only", {}))
    resolved = len(h.get("warnings_resolved_by_end", []))
    return (f"{title}: {p['detected']} of {p['runs']} pathologies found ({pct(p['recall'])}"
            f"{_between(interval(p['detected'], p['runs']))}; "
            f"{p['warned']} by a warning, {pct(p['warned_recall'])}), median delay "
            f"{'—' if delay is None else f'{delay:g}'} logged points; "
            f"{warned} of {h['runs']} healthy runs with a warning"
            + (f" ({pct(warned / h['runs'])}{_between(interval(warned, h['runs']))})"
               if h["runs"] else "")
            + (f", {resolved} of them resolved by the run's end" if resolved else "")
            + (f", {infos} more with an info only" if infos else ""))


def run_rows(results: list[Replayed]) -> list[dict[str, Any]]:
    """Per run: its label and what was found, for `-o json` and for reading a miss."""
    return [{
        "name": r.run.name, "split": r.run.split, "round": r.run.round, "label": r.run.label,
        "points": len(r.steps), "seconds": round(r.seconds, 3),
        "findings": [{"rule_id": d.rule_id, "class": d.cls, "severity": d.severity,
                      "detected_step": d.step, "detected_point": d.point,
                      "first_step": d.first_step, "open_at_end": d.open_at_end}
                     for d in r.detections],
    } for r in results]
