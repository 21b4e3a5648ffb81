"""A run's whole files (config.yaml, engine_config.json, the samples files) into the index,
whether the indexer read them from a run folder or a sender posted them to /api/ingest."""

from __future__ import annotations

import orjson
from sqlalchemy import Connection, update

from runwatch.ingest.samples import store_samples
from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line
from runwatch.rundir.safeio import CAPS, SAMPLES_CAP
from runwatch.store import schema as s

# the runs column each whole file other than a samples file is stored in
COLUMNS = {fmt.CONFIG: "config", fmt.ENGINE_CONFIG: "engine_config"}


def whole_file_name_problem(name: object) -> str | None:
    """Why `name` is not a whole file of run format v1 that can be stored (None: it is)."""
    if not isinstance(name, str):
        return "file must be a string"
    if name in COLUMNS:
        return None
    if ("/" in name or "\\" in name or "\n" in name or "\x00" in name
            or fmt.parse_sample_file_name(name) is None):
        return (f"file {name!r} is not a whole file of a run directory: send "
                f"{fmt.CONFIG}, {fmt.ENGINE_CONFIG} or a samples file named "
                "step_NNNN_<split>.json or val_NNNN_<split>.json (no folder)")
    return None


def whole_file_cap(name: str) -> int:
    """The most bytes a whole file may hold, as the indexer reads it."""
    return CAPS.get(name, SAMPLES_CAP)


def whole_file_text(name: str, raw: bytes, where: str) -> str:
    """config.yaml as text; engine_config.json as JSON that every reader parses (NaN and
    Infinity, which the SDK may write, become null). `where` names it in the error."""
    if name == fmt.CONFIG:
        return raw.decode("utf-8", errors="replace")
    try:
        return orjson.dumps(loads_line(raw)).decode()
    except (ValueError, TypeError) as exc:  # orjson's encode error is a TypeError
        raise ValueError(f"{where} is not JSON that runwatch can store "
                         f"({str(exc).splitlines()[0][:120]})") from None


def store_whole_file(conn: Connection, run_pk: int, name: str, raw: bytes,
                     where: str) -> tuple[int, int]:
    """Store (replacing what was stored of it) the whole file `name` whose content is `raw`:
    (rows stored, samples set aside). Raises ValueError when the content cannot be stored;
    `name` must have passed whole_file_name_problem."""
    column = COLUMNS.get(name)
    if column is not None:
        value = whole_file_text(name, raw, where)
        conn.execute(update(s.runs).where(s.runs.c.pk == run_pk).values({column: value}))
        return 1, 0
    parsed = fmt.parse_sample_file_name(name)
    if parsed is None:
        raise ValueError(whole_file_name_problem(name))
    try:
        return store_samples(conn, run_pk, name, raw, parsed)
    except ValueError as exc:
        raise ValueError(f"{where}: not a samples file ({exc})") from None
