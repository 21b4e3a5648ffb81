"""Importers: other tools' logs (TRL, verl, tinker-cookbook, TensorBoard) as run directories."""

from __future__ import annotations

from pathlib import Path

from runwatch.ingest.importers import jsonl, tensorboard, trl
from runwatch.ingest.importers.common import Imported, SourceError, write_run_dir

FORMATS = ("auto", "trl", "jsonl", "tensorboard")


def read_source(source: Path, kind: str = "auto") -> Imported:
    """Read `source` in format `kind` ("auto" looks at what the path is)."""
    if not source.exists():
        raise SourceError(f"{source} does not exist")
    if kind == "auto":
        if source.is_dir():
            kind = "tensorboard"
        elif source.suffix == ".jsonl":
            kind = "jsonl"
        elif source.suffix == ".json":
            kind = "trl"
        elif "tfevents" in source.name:
            kind = "tensorboard"
        else:
            raise SourceError(f"cannot tell what {source} is: pass --format "
                               "trl, jsonl or tensorboard")
    if kind == "trl":
        return trl.read(source)
    if kind == "jsonl":
        return jsonl.read(source)
    if kind == "tensorboard":
        return tensorboard.read(source)
    raise SourceError(f"unknown format {kind!r}: use {', '.join(FORMATS)}")


__all__ = ["FORMATS", "Imported", "SourceError", "read_source", "write_run_dir"]
