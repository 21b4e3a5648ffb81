"""A step's rollouts with their NaN and ±Infinity read back from the run's sample files.

The index holds a sample's NaN reward as null, and each NaN and ±Infinity inside a sample
(its reward terms) as null: the same as a value never logged, since JSON has no token for
them. The run folder's sample file keeps them, so `runs rollouts` reads them back from
there, to show them as `runs metrics` does (NaN, Inf) and write them in -o json as the run
files do. A run the index has no folder of (one a server was sent) keeps the nulls.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line
from runwatch.rundir.safeio import SAMPLES_CAP, read_capped

# The fields of a sample that the index keeps in columns of their own, not in its data
TEXT_FIELDS = ("prompt", "completion")


def with_non_finite(data: dict[str, Any], run_dir: str | None) -> dict[str, Any]:
    """`data`, one step's rollouts as store.rollouts gives them, with each null reward,
    advantage, reward term and data value that the sample's file holds as NaN or ±Infinity
    put back. A sample is matched to its file by its index in the file and its data, which
    must be the file's sample with non-finite values as null (so a file written anew since
    it was indexed changes nothing)."""
    if run_dir is None or data.get("step") is None or not any(
            _lost(smp) for smp in data["samples"]):
        return data
    files = _sample_lists(Path(run_dir), data["step"], data["split"])
    for smp in data["samples"]:
        i = smp["index"]
        raw = next((f[i] for f in files if i < len(f) and isinstance(f[i], dict)
                    and _as_indexed(f[i]) == smp["data"]), None)
        if raw is not None:
            _put_back(smp, raw)
    return data


def _lost(smp: dict[str, Any]) -> bool:
    """Whether a sample shows a null that may stand for a non-finite value."""
    return (smp["reward"] is None or smp["advantage"] is None
            or any(v is None for v in smp["reward_terms"].values()))


def _sample_lists(run_dir: Path, step: int, split: str) -> list[list[Any]]:
    """The samples lists of the run's files of `step` and `split` (any kind); a file that
    cannot be read or is no samples file is left out."""
    try:
        names = sorted(os.listdir(run_dir))
    except OSError:
        return []
    found = []
    for name in names:
        parsed = fmt.parse_sample_file_name(name)
        if parsed is None or parsed[:2] != (step, split):
            continue
        try:
            payload = loads_line(read_capped(run_dir / name, SAMPLES_CAP))
        except (OSError, ValueError):
            continue
        items = payload.get("samples") if isinstance(payload, dict) else payload
        if isinstance(items, list):
            found.append(items)
    return found


def _as_indexed(raw: dict[str, Any]) -> Any:
    """A file's sample as the index holds its data: without its text, non-finite as null."""
    return _nulled({k: v for k, v in raw.items() if k not in TEXT_FIELDS})


def _nulled(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _nulled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nulled(v) for v in value]
    return value


def _put_back(smp: dict[str, Any], raw: dict[str, Any]) -> None:
    for key in ("reward", "advantage"):
        value = raw.get(key)
        if isinstance(value, float) and not math.isfinite(value):
            smp[key] = value
    terms = raw.get("reward_terms") or raw.get("terms")
    if isinstance(terms, dict):
        smp["reward_terms"] = terms
    smp["data"] = {k: v for k, v in raw.items() if k not in TEXT_FIELDS}
