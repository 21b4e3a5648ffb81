"""Import a W&B run history exported as JSON: `run.history()` or `run.scan_history()`
written as JSON lines (one row per step, with `_step`, `_runtime`, `_timestamp`), or a JSON
list of such rows. A CSV export is read by `csvlog`, which recognises the same columns; an
offline run's binary `run-<id>.wandb` is refused, saying so (`wandb_offline`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runwatch.ingest.importers.common import (
    Imported,
    SourceError,
    is_number,
    json_rows,
    read_bytes,
)
from runwatch.ingest.importers.csvlog import WANDB_COLUMNS, records_from_table
from runwatch.ingest.importers.wandb_offline import refuse_offline_run
from runwatch.rundir.jsonl import loads_line


def looks_like(path: Path) -> bool:
    """Whether the JSON (lines) file at `path` is a W&B history: a list at the top, or a
    first row carrying W&B's `_step`/`_runtime`/`_timestamp`."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096).lstrip()
    except OSError:
        return False
    if head.startswith(b"["):
        return True
    first = head.split(b"\n", 1)[0]
    return any(b'"' + marker.encode() + b'"' in first for marker in WANDB_COLUMNS)


def read(path: Path, step_column: str | None = None) -> Imported:
    refuse_offline_run(path, "wandb")
    rows = _rows(path)
    columns: dict[str, None] = {}
    table: list[dict[str, Any]] = []
    for row in rows:
        cells = {key: _value(value) for key, value in row.items()}
        columns.update(dict.fromkeys(cells))
        table.append(cells)
    return records_from_table(list(columns), table, path, "wandb", step_column)


def _rows(path: Path) -> list[dict[str, Any]]:
    raw = read_bytes(path)
    if raw.lstrip().startswith(b"["):
        try:
            data = loads_line(raw)
        except ValueError as exc:
            raise SourceError(f"{path} is not JSON ({exc})") from exc
        if not all(isinstance(row, dict) for row in data):
            raise SourceError(f"{path} is a JSON list but not of objects (one per step)")
        return list(data)
    return [row for _, row in json_rows(path, raw)]


def _value(value: Any) -> Any:
    """Numbers stay numbers, null is missing; anything else (text, W&B's histogram and
    media objects) is text to the table reader, which ignores text-only columns."""
    if value is None or is_number(value):
        return value
    return str(value) if not isinstance(value, dict) else "<object>"
