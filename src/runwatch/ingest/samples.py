"""A run's samples files (the completions of one step) into rows, one per sample."""

from __future__ import annotations

import time
from typing import Any, cast

import orjson
from sqlalchemy import Connection, String, delete

from runwatch.ingest.lifecycle import started_by_records
from runwatch.ingest.sql import insert_ignore_sql
from runwatch.rundir.jsonl import loads_line
from runwatch.store import schema as s
from runwatch.store.values import finite, is_int64, to_float

KIND_LENGTH = cast(String, s.samples.c.kind.type).length or 64  # the schema's String(64)


def store_samples(conn: Connection, run_pk: int, name: str, raw: bytes,
                  parsed: tuple[int, str, str]) -> tuple[int, int]:
    """Store (replacing) the samples of file `name`, whose content is `raw` and whose
    (step, split, kind) is `parsed`; returns how many were stored and how many set aside
    (a value beyond 64 bits or nested too deep for JSON readers). Raises ValueError when
    it is not a samples file. Samples show a QUEUED run has started (at the file's `ts`,
    else now)."""
    step, split, kind = parsed
    if len(kind) > KIND_LENGTH:
        raise ValueError(f"its kind is {len(kind)} characters, longer than the {KIND_LENGTH} "
                         "a samples kind may have")
    payload = loads_line(raw)
    items = payload.get("samples") if isinstance(payload, dict) else payload
    if not isinstance(items, list):
        raise ValueError("no 'samples' list")
    conn.execute(delete(s.samples).where(s.samples.c.run_pk == run_pk,
                                         s.samples.c.file == name))
    rows = []
    aside = 0
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        try:
            data = orjson.dumps(item, option=orjson.OPT_NON_STR_KEYS).decode()
            prompt, completion = _text(item.get("prompt")), _text(item.get("completion"))
        except TypeError:  # orjson's encode error: a value beyond 64 bits, too deep
            aside += 1  # an item no JSON reader could take is not stored
            continue
        rows.append((run_pk, name, i, step, split, kind, _num(item.get("reward")),
                     _num(item.get("advantage")), _int(item.get("group")),
                     bool(item["truncated"]) if "truncated" in item else None,
                     prompt, completion, data))
    if rows:
        conn.exec_driver_sql(insert_ignore_sql(s.samples, conn.dialect.name, conn.dialect), rows)
        written = finite(payload.get("ts")) if isinstance(payload, dict) else None
        started_by_records(conn, run_pk, time.time() if written is None else written)
    return len(rows), aside


def _num(v: Any) -> float | None:
    number = to_float(v)
    return None if number is None or number != number else number


def _int(v: Any) -> int | None:
    return v if is_int64(v) else None


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    return orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS).decode()
