"""Checking a run's manifest: the fields runwatch reads from it, each of the right kind.

The indexer stores a run whose manifest has a field of the wrong kind (the field set
aside) and reports the field as a problem of the run; the HTTP ingest refuses the
batch (`check_manifest` raises `ManifestError`, which the API answers with 400).
"""

from __future__ import annotations

from typing import Any

import orjson

from runwatch.store.runs import TEXT_FIELDS, column_length, created_at, tags
from runwatch.store.values import preview


class ManifestError(ValueError):
    """A manifest with fields runwatch cannot use; the message names each and why."""


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
