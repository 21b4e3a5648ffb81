"""Import `runwatch runs metrics -o json` (another runwatch's export of a run): an object
with `run_id`, `name` and `steps`, each step `{"step", "ts", "measured": {metric: value}}`.
NaN and ±Infinity tokens are kept; a `null` value (what `--jq` and the HTTP API give for a
non-finite value, where a metric a step did not log has no key) is read as NaN."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runwatch.ingest.importers import jsonl
from runwatch.ingest.importers.common import (
    Imported,
    SourceError,
    checked_step,
    is_number,
    read_bytes,
)
from runwatch.rundir.jsonl import loads_line

MARK = b'"run_id"'


def looks_like(path: Path) -> bool:
    """Whether the JSON file at `path` starts as the export does: an object whose first
    key is `run_id`."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(256).lstrip()
    except OSError:
        return False
    return head.startswith(b"{") and head[1:].lstrip().startswith(MARK)


def read(path: Path) -> Imported:
    try:
        data = loads_line(read_bytes(path))
    except ValueError as exc:
        raise SourceError(f"{path} is not JSON ({exc})") from exc
    steps = data.get("steps") if isinstance(data, dict) else None
    if not isinstance(steps, list):
        raise SourceError(f"{path} has no list of steps: is it `runwatch runs metrics -o "
                          "json` output?")
    records: list[dict[str, Any]] = []
    for i, entry in enumerate(steps):
        where = f"{path}: steps[{i}]"
        measured = entry.get("measured") if isinstance(entry, dict) else None
        if not isinstance(measured, dict):
            raise SourceError(f"{where} has no `measured` object of metrics; fix or delete it")
        step = checked_step(entry.get("step"), where, "fix or delete that step")
        rec: dict[str, Any] = {"step": step, **{
            k: float("nan") if v is None else v for k, v in measured.items()
            if v is None or is_number(v)}}
        if is_number(entry.get("ts")):
            rec["ts"] = float(entry["ts"])
        records.append(rec)
    _, method = jsonl.guess({k for r in records for k in r})
    return Imported("runwatch", method, records, {}, str(path))
