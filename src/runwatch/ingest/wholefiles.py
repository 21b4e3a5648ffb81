"""A run's whole files (config.yaml, engine_config.json, job.json, the samples files) into the
index, whether the indexer read them from a run folder or a sender posted them to /api/ingest.

A job.json posted to /api/ingest is stored (into the run's jobs row, for the server to show
what the job is) only for a run the index knows no folder of: a worker runs the command of
the jobs row of a run in its folder, and a token that may send records must not change it.

Each whole file stored keeps its size and sha256 (whole_file_hashes), which GET /api/ingest
answers without reading it: a sender whose file the server holds another version of sends it
again.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from sqlalchemy import Connection, delete, insert, select, update

from runwatch.ingest.parts import PARTS, Piece
from runwatch.ingest.samples import store_samples
from runwatch.jobs.spec import MAX_JOB_BYTES, validate
from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line
from runwatch.rundir.safeio import CAPS, SAMPLES_CAP
from runwatch.store import schema as s
from runwatch.store.jobs import upsert_spec

# the runs column each whole file other than a samples file is stored in
COLUMNS = {fmt.CONFIG: "config", fmt.ENGINE_CONFIG: "engine_config"}


def whole_file_name_problem(name: object) -> str | None:
    """Why `name` is not a whole file of run format v1 that can be stored (None: it is)."""
    if not isinstance(name, str):
        return "file must be a string"
    if name in COLUMNS or name == fmt.JOB:
        return None
    if fmt.parse_sample_file_name(name) is None:
        return (f"file {name!r} is not a whole file of a run directory: send "
                f"{fmt.CONFIG}, {fmt.ENGINE_CONFIG}, {fmt.JOB} or a samples file named "
                "step_NNNN_<split>.json or val_NNNN_<split>.json (no folder)")
    return None


def whole_file_cap(name: str) -> int:
    """The most bytes a whole file may hold, as the indexer reads it."""
    return MAX_JOB_BYTES if name == fmt.JOB else CAPS.get(name, SAMPLES_CAP)


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
                     where: str, part: Any = None) -> tuple[int, int]:
    """Store (replacing what was stored of it) the whole file `name` whose content is `raw`:
    (rows stored, samples set aside). With `part` (a batch's, see runwatch.ingest.parts;
    a `Piece` carries its own) `raw` is one piece of it, held until the last piece comes
    ((0, 0) until then). Raises ValueError when the content cannot be stored; `name` must
    have passed whole_file_name_problem."""
    if part is None and isinstance(raw, Piece):
        part = raw.part
    if part is not None:
        whole = PARTS.take(run_pk, name, raw, part, whole_file_cap(name))
        if whole is None:
            return 0, 0
        raw = whole
    column = COLUMNS.get(name)
    if column is not None:
        value = whole_file_text(name, raw, where)
        conn.execute(update(s.runs).where(s.runs.c.pk == run_pk).values({column: value}))
        stored = 1, 0
    elif name == fmt.JOB:
        stored = _store_job_spec(conn, run_pk, raw, where), 0
        if not stored[0]:
            return stored  # the folder's job.json is kept: its hash is not this one
    else:
        parsed = fmt.parse_sample_file_name(name)
        if parsed is None:
            raise ValueError(whole_file_name_problem(name))
        try:
            stored = store_samples(conn, run_pk, name, raw, parsed)
        except ValueError as exc:
            raise ValueError(f"{where}: not a samples file ({exc})") from None
    _keep_hash(conn, run_pk, name, raw)
    return stored


def _keep_hash(conn: Connection, run_pk: int, name: str, raw: bytes) -> None:
    """Keep the size and sha256 of the whole file just stored, replacing its last ones."""
    h = s.whole_file_hashes.c
    conn.execute(delete(s.whole_file_hashes).where(h.run_pk == run_pk, h.file == name))
    conn.execute(insert(s.whole_file_hashes).values(
        run_pk=run_pk, file=name, size=len(raw), sha256=hashlib.sha256(raw).hexdigest()))


def _store_job_spec(conn: Connection, run_pk: int, raw: bytes, where: str) -> int:
    """A posted job.json into the jobs row of a run the index has no folder of (1); for a
    run indexed from its folder, the folder's job.json is the one kept (0)."""
    try:
        spec = validate(loads_line(raw))
    except ValueError as exc:  # not JSON, or JobSpecError
        raise ValueError(f"{where}: {str(exc).splitlines()[0][:200]}") from None
    if conn.execute(select(s.runs.c.dir).where(s.runs.c.pk == run_pk)).scalar() is not None:
        return 0
    upsert_spec(conn, run_pk, spec.as_dict())
    return 1
