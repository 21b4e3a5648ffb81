"""Checking a run's manifest: the fields runwatch reads from it, each of the right kind.

The indexer stores a run whose manifest has a field of the wrong kind (the field set
aside) and reports the field as a problem of the run; the HTTP ingest refuses the
batch (`check_manifest` raises `ManifestError`, which the API answers with 400).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line
from runwatch.rundir.safeio import read_capped
from runwatch.store.runs import RUN_ID_LENGTH, TEXT_FIELDS, column_length, created_at, tags
from runwatch.store.values import preview


class ManifestError(ValueError):
    """A manifest with fields runwatch cannot use; the message names each and why."""


class NotARun(Exception):
    """A run folder's manifest that makes it no run this runwatch indexes (another format
    version, no usable run id); the message says which, naming the file."""


def read_run_manifest(run_dir: Path) -> dict[str, Any]:
    """The manifest of run folder `run_dir` where the indexer reads it as a run. Raises
    OSError (FileNotFoundError: none yet), rundir.safeio.UnsafeFile, ValueError (not a
    JSON object), or NotARun (see there)."""
    path = run_dir / fmt.MANIFEST
    manifest = loads_line(read_capped(path))
    if not isinstance(manifest, dict):
        raise ValueError("not a JSON object")
    problem = fmt.schema_version_problem(manifest.get("schema_version"))
    if problem is not None:
        raise NotARun(f"{path} {problem}")
    run_id = manifest.get("run_id")
    if not isinstance(run_id, str) or not 0 < len(run_id) <= RUN_ID_LENGTH:
        raise NotARun(f"{path} has no run_id of 1 to {RUN_ID_LENGTH} characters; run not "
                      "indexed")
    return manifest


def manifest_problems(manifest: dict[str, Any]) -> list[str]:
    """What is wrong with the fields of `manifest`, one sentence each (none: all fine)."""
    problems = []
    if manifest.get("created_at") is not None and created_at(manifest) is None:
        problems.append(f"'created_at' is {preview(manifest['created_at'])!r}, not a time in "
                        "seconds since the epoch; the time it was indexed is used")
    if tags(manifest) is None:
        problems.append(f"'tags' is {preview(manifest['tags'])!r}, not a list; "
                        "the run has no tags")
    for field in TEXT_FIELDS:
        value, length = manifest.get(field), column_length(field)
        if isinstance(value, str) and length and len(value) > length:
            problems.append(f"'{field}' is {len(value)} characters, longer than the "
                            f"{length} it may have; it is cut to {length}")
    try:
        orjson.dumps(manifest, option=orjson.OPT_NON_STR_KEYS)
    except TypeError as exc:  # orjson's encode error
        problems.append(f"it holds a value JSON readers may not parse ({exc}); "
                        "write plain numbers and at most 254 levels of nesting")
    return problems


def check_manifest(manifest: dict[str, Any]) -> None:
    """Raise ManifestError when a field of `manifest` is of the wrong kind."""
    problems = manifest_problems(manifest)
    if problems:
        raise ManifestError("the manifest is refused: " + "; ".join(problems))
