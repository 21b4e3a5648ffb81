"""Importers: other tools' logs (TRL, verl, tinker-cookbook, TensorBoard, CSV, W&B) as run
directories."""

from __future__ import annotations

import time
from pathlib import Path

from runwatch.ingest.importers import (
    csvlog,
    jsonl,
    runwatch_export,
    tensorboard,
    trl,
    wandb_export,
)
from runwatch.ingest.importers.common import (
    NOT_METRICS,
    Imported,
    SourceError,
    place_times,
    repeated_steps,
    repeats_note,
    write_run_dir,
)

FORMATS = ("auto", "trl", "jsonl", "tensorboard", "csv", "wandb", "runwatch")


def read_source(source: Path, kind: str = "auto", step_column: str | None = None) -> Imported:
    """Read `source` in format `kind` ("auto" looks at what the path is); `step_column`
    names the column that numbers a table's rows (CSV, W&B). A step that logs no metric
    (LLaMA-Factory's last line, which has only its progress) is not a step of the run. A
    metric logged twice at one step shows its last value, as the index shows a resumed
    run's: `notes` says which steps. A log with no wall clock that logs its step times is
    timed by them, ending now (`common.place_times`): `times` and `notes` say so; one with
    neither is timed one second a step when it is written (`write_run_dir`)."""
    imported = _read(source, kind, step_column)
    imported.records = [r for r in imported.records if r.keys() - NOT_METRICS]
    repeated = repeated_steps(imported.records)
    if repeated:
        what = "event" if imported.trainer == "tensorboard" else "row"
        imported.notes.append(repeats_note(repeated, what))
    place_times(imported, end=time.time())
    return imported


def _read(source: Path, kind: str, step_column: str | None) -> Imported:
    if not source.exists():
        raise SourceError(f"{source} does not exist")
    if kind == "auto":
        if source.is_dir():
            kind = "tensorboard"
        elif source.suffix in (".csv", ".tsv"):
            kind = "csv"
        elif source.suffix == ".json" and runwatch_export.looks_like(source):
            kind = "runwatch"
        elif source.suffix in (".jsonl", ".json") and wandb_export.looks_like(source):
            kind = "wandb"
        elif source.suffix == ".jsonl":
            kind = "jsonl"
        elif source.suffix == ".json":
            kind = "trl"
        elif "tfevents" in source.name:
            kind = "tensorboard"
        else:
            raise SourceError(f"cannot tell what {source} is: pass --format "
                               "trl, jsonl, tensorboard, csv, wandb or runwatch")
    if kind == "trl":
        return trl.read(source)
    if kind == "jsonl":
        return jsonl.read(source)
    if kind == "tensorboard":
        return tensorboard.read(source)
    if kind == "csv" or (kind == "wandb" and source.suffix in (".csv", ".tsv")):
        return csvlog.read(source, step_column)
    if kind == "wandb":
        return wandb_export.read(source, step_column)
    if kind == "runwatch":
        return runwatch_export.read(source)
    raise SourceError(f"unknown format {kind!r}: use {', '.join(FORMATS)}")


__all__ = ["FORMATS", "Imported", "SourceError", "read_source", "write_run_dir"]
