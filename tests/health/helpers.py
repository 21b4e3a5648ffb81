"""Building engine batches from plain series, shared by the health tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runwatch.health.engine import Engine
from runwatch.health.findings import Finding
from runwatch.health.rules import BY_ID
from runwatch.ingest.importers import read_source
from runwatch.store.points import PointColumns

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
T0 = 1_000_000.0
STEP_S = 10.0


def to_batch(series: dict[str, Any]) -> dict[str, PointColumns]:
    """Series (values at steps 0.. or explicit (steps, values)) as an engine batch."""
    batch = {}
    for name, data in series.items():
        if isinstance(data, tuple):
            steps, values = list(data[0]), list(data[1])
        else:
            steps, values = list(range(len(data))), list(data)
        seqs = list(range(len(steps)))
        batch[name] = PointColumns(seqs, steps, [T0 + STEP_S * s for s in steps], values)
    return batch


def evaluate(method: str, settings: dict[str, float], series: dict[str, Any],
             finished: bool = False) -> list[Finding]:
    """The findings of one batch; with `finished`, of a run that has succeeded."""
    return Engine(method, settings, finished=finished).feed(to_batch(series))


def at_end(rule_id: str) -> bool:
    """Whether a rule waits for the run's end: its cases are judged on a finished run."""
    return BY_ID[rule_id].detector == "whole_window"


def rule_ids(findings: list[Finding]) -> set[str]:
    return {f.rule_id for f in findings}


def corpus_records(run: str) -> list[dict[str, Any]]:
    """A labelled corpus run's logged lines in step order, read by the importer `runwatch
    import` uses."""
    (path,) = [p for p in (REAL / run).iterdir() if p.name != "source.json"]
    return sorted(read_source(path).records, key=lambda r: r["step"])


def of_rule(found: list[Finding], rule_id: str) -> list[Finding]:
    """The findings of one rule."""
    return [f for f in found if f.rule_id == rule_id]


def corpus_columns(run: str, key: str) -> tuple[list[int], list[float]]:
    """A labelled corpus run's steps and values of one logged key, in step order."""
    rows = [r for r in corpus_records(run) if isinstance(r.get(key), (int, float))]
    return [int(r["step"]) for r in rows], [float(r[key]) for r in rows]
