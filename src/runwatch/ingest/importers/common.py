"""What every importer produces, and writing it out as a run directory (format v1).

An importer reads another tool's log into an `Imported` (records plus what is known
about the run); `write_run_dir` turns that into a finished run directory, which the
indexer then picks up like any other.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runwatch.rundir import format as fmt
from runwatch.rundir.atomic import write_atomic
from runwatch.rundir.jsonl import dumps_line, loads_line
from runwatch.rundir.manifest import build_manifest


class SourceError(ValueError):
    """The source cannot be imported; the message says why and what to pass instead."""


@dataclass
class Imported:
    """A run read from another tool's log."""

    trainer: str  # the tool that wrote the log: "trl", "verl", "tinker-cookbook", …
    method: str | None
    records: list[dict[str, Any]]  # {"step": int, "ts": float?, metric: number, …}
    config: dict[str, Any] = field(default_factory=dict)
    source: str = ""


def read_bytes(path: Path) -> bytes:
    """The bytes of a file to import; a clear error when it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror}") from exc


def json_rows(path: Path, raw: bytes) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSON-lines file with their line numbers (blank lines skipped);
    a line that is not a JSON object is refused, naming it."""
    rows = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = loads_line(line)
        except ValueError as exc:
            raise SourceError(f"{path}: line {number} is not JSON ({exc})") from exc
        if not isinstance(row, dict):
            raise SourceError(f"{path}: line {number} is not a JSON object")
        rows.append((number, row))
    return rows


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# A row a log tags as held out (`"split": "val"`, a `mode` column of `eval`): loops that
# write training and validation rows into one file under the same names (CS336's GRPO
# logs: `{"split": "val", "accuracy": …}` beside `{"split": "train", …}`).
SPLIT_FIELDS = ("split", "mode")
HELD_OUT_SPLITS = frozenset({"val", "valid", "validation", "eval", "evaluation", "test",
                             "dev", "heldout", "held_out"})
HELD_OUT_PREFIXES = ("val/", "val_", "valid/", "valid_", "validation/", "validation_",
                     "eval/", "eval_", "test/", "test_")


def held_out(row: dict[str, Any]) -> bool:
    """Whether a row's own split field says it was measured on held-out data."""
    return any(isinstance(row.get(f), str) and row[f].strip().lower() in HELD_OUT_SPLITS
               for f in SPLIT_FIELDS)


def as_held_out(values: dict[str, Any]) -> dict[str, Any]:
    """A held-out row's metrics under `val/` names (a name that already says held out is
    kept), so they never read as the training metrics of the same name."""
    return {k if k.startswith(HELD_OUT_PREFIXES) else f"val/{k}": v for k, v in values.items()}


def numeric_items(entry: dict[str, Any], skip: frozenset[str]) -> dict[str, float | int]:
    """The entry's numeric fields (NaN and ±Infinity kept), without the `skip` keys."""
    return {k: v for k, v in entry.items() if k not in skip and is_number(v)}


def synthesize_ts(records: list[dict[str, Any]], end: float, seconds_per_step: float = 1.0
                  ) -> None:
    """Give records without a wall time one, spaced by step and ending at `end`, so the
    run's timeline keeps its shape (logs that record no time at all)."""
    if all(is_number(r.get("ts")) and math.isfinite(r["ts"]) for r in records):
        return
    if not records:
        return
    last = records[-1]["step"]
    for r in records:
        if not (is_number(r.get("ts")) and math.isfinite(r["ts"])):
            r["ts"] = end - (last - r["step"]) * seconds_per_step


def write_run_dir(imported: Imported, runs_dir: Path, name: str, project: str = "default",
                  method: str | None = None, finished: bool = True) -> Path:
    """Write `imported` as the finished run `runs_dir`/`name` (with `finished` False, as
    a run still running: health-eval's replay appends the rest and the end); refuses to
    overwrite."""
    fmt.validate_name(name)
    fmt.validate_name(project, "project name")
    if not imported.records:
        raise SourceError(f"{imported.source} holds no metrics to import")
    run_dir = runs_dir / name
    if run_dir.exists():
        raise SourceError(f"{run_dir} already exists: pass --name with another run name")
    records = sorted(imported.records, key=lambda r: r["step"])
    synthesize_ts(records, end=time.time())
    first_ts, last_ts = records[0]["ts"], records[-1]["ts"]
    manifest = build_manifest(name, project, tags=["imported"], method=method or imported.method,
                              trainer=imported.trainer, created_at=first_ts,
                              imported_from=imported.source)
    tmp = runs_dir / f".{name}.importing-{os.getpid()}"
    tmp.mkdir(parents=True)
    write_atomic(tmp / fmt.MANIFEST, dumps_line(manifest))
    with open(tmp / fmt.METRICS, "wb") as fh:
        for seq, rec in enumerate(records):
            fh.write(dumps_line({"step": rec["step"], "ts": rec["ts"], "seq": seq,
                                 **{k: v for k, v in rec.items() if k not in ("step", "ts")}}))
    with open(tmp / fmt.EVENTS, "wb") as fh:
        fh.write(dumps_line({"ts": first_ts, "seq": 0, "phase": "RUNNING"}))
        if finished:
            fh.write(dumps_line({"ts": last_ts, "seq": 1, "phase": "SUCCEEDED"}))
    if imported.config:
        write_atomic(tmp / fmt.CONFIG, yaml.safe_dump(imported.config, sort_keys=True).encode())
    # Appear complete or not at all: the indexer may be watching the folder.
    tmp.rename(run_dir)
    return run_dir
