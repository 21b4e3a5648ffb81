"""The ingest route: batches of run-directory records, stored idempotently on (run, file, seq),
and a run's whole files (config.yaml, engine_config.json, samples files), each replacing what
was stored of it, through the indexer's own functions (`runwatch.ingest.wholefiles`).

Each batch is stored in its own transaction, whole or not at all, so a bad batch is
refused with its reason while the good batches of the same request are kept.
"""

from __future__ import annotations

import zlib
from typing import Any

import orjson
from fastapi import APIRouter, Depends, Request
from sqlalchemy import Connection, select
from starlette.concurrency import run_in_threadpool

from runwatch.health.store import on_metrics as health_on_metrics
from runwatch.ingest import ingest_records
from runwatch.ingest.indexer import PointsHook
from runwatch.ingest.manifest import ManifestError, check_manifest
from runwatch.ingest.wholefiles import store_whole_file, whole_file_cap, whole_file_name_problem
from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line
from runwatch.server import scopes
from runwatch.server.errors import ApiError, error_response
from runwatch.server.jsonio import JSONResponse
from runwatch.server.state import Limits, ServerState, state
from runwatch.store import schema as s
from runwatch.store.runs import upsert_run

router = APIRouter(tags=["ingest"])

_BATCH = {
    "type": "object",
    "required": ["run_id", "file", "records"],
    "properties": {
        "run_id": {"type": "string", "minLength": 1, "maxLength": 64},
        "file": {"type": "string", "enum": list(fmt.FILES)},
        "records": {"type": "array", "items": {
            "type": "object", "required": ["seq"],
            "properties": {"seq": {"type": "integer", "minimum": 0}}}},
        "manifest": {"type": "object", "description": "the run's manifest.json, with the "
                                                      "first batch of a run"},
    },
}
_WHOLE_FILE = {
    "type": "object",
    "required": ["run_id", "file", "content"],
    "properties": {
        "run_id": {"type": "string", "minLength": 1, "maxLength": 64},
        "file": {"type": "string", "description": f"{fmt.CONFIG}, {fmt.ENGINE_CONFIG}, or a "
                 "samples file step_NNNN_<split>.json / val_NNNN_<split>.json"},
        "content": {"description": "the whole file: its text, or (for a JSON file) its "
                                   "JSON value"},
        "manifest": {"type": "object", "description": "the run's manifest.json"},
    },
}
# The body is read by hand (to count it while it streams); this tells /openapi.json its shape.
REQUEST_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "anyOf": [{"type": "object", "required": ["batches"],
               "properties": {"batches": {"type": "array", "minItems": 1,
                                          "items": {"anyOf": [_BATCH, _WHOLE_FILE]}}}},
              _BATCH, _WHOLE_FILE]}}}}}


class BatchError(Exception):
    """One batch cannot be stored; `status` is the HTTP status it would get alone."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _check_batch(batch: Any, limits: Limits) -> tuple[str, str, list[dict[str, Any]] | bytes,
                                                      Any]:
    """(run_id, file, records or a whole file's bytes, manifest), or BatchError."""
    if not isinstance(batch, dict):
        raise BatchError(400, "a batch is a JSON object with run_id, file and records "
                              "(or content)")
    run_id, file, records = batch.get("run_id"), batch.get("file"), batch.get("records")
    if not isinstance(run_id, str) or not run_id or len(run_id) > 64:
        raise BatchError(400, "run_id must be a string of 1 to 64 characters")
    manifest = _check_manifest(run_id, batch.get("manifest"))
    if "content" in batch and "records" not in batch:
        return run_id, *_check_whole_file(file, batch["content"]), manifest
    if file not in fmt.FILES:
        raise BatchError(400, f"file {file!r} is not one of {', '.join(fmt.FILES)} (a whole "
                              "file is sent as content, not records)")
    if not isinstance(records, list):
        raise BatchError(400, "records must be a list of record objects")
    if len(records) > limits.max_records:
        raise BatchError(413, f"{len(records)} records is more than {limits.max_records} "
                              "per batch; split the batch")
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise BatchError(400, f"record {i} is not a JSON object")
        seq = rec.get("seq")
        if type(seq) is not int or seq < 0:
            raise BatchError(400, f"record {i} has no non-negative integer 'seq'")
    return run_id, file, records, manifest


def _check_whole_file(file: Any, content: Any) -> tuple[str, bytes]:
    """A whole file's name and bytes: its name one of run format v1's, its content text (or
    the JSON value of a JSON file) no bigger than the indexer reads of such a file."""
    if (why := whole_file_name_problem(file)) is not None:
        raise BatchError(400, why)
    if isinstance(content, str):
        raw = content.encode("utf-8", errors="replace")
    elif file != fmt.CONFIG and isinstance(content, (dict, list)):
        try:
            raw = orjson.dumps(content)
        except TypeError as exc:
            raise BatchError(400, f"{file}: its content cannot be stored as JSON ({exc})") from None
    else:
        raise BatchError(400, f"{file}: content must be the file's text"
                              + ("" if file == fmt.CONFIG else " or its JSON value"))
    cap = whole_file_cap(file)
    if len(raw) > cap:
        raise BatchError(413, f"{file} is {len(raw)} bytes, more than the {cap} a run's "
                              f"{file} may hold")
    return file, raw


def _check_manifest(run_id: str, manifest: Any) -> Any:
    if manifest is not None:
        if not isinstance(manifest, dict) or manifest.get("run_id") != run_id:
            raise BatchError(400, "manifest must be an object whose run_id is the batch's run_id")
        try:
            check_manifest(manifest)
        except ManifestError as exc:
            raise BatchError(400, str(exc)) from exc
        if manifest.get("name") is not None:
            try:
                fmt.validate_name(str(manifest["name"]))
            except fmt.RunDirError as exc:
                raise BatchError(400, str(exc)) from exc
    return manifest


def _store(conn: Connection, run_id: str, file: str, records: list[dict[str, Any]] | bytes,
           manifest: dict[str, Any] | None, on_points: PointsHook | None) -> dict[str, Any]:
    if manifest is not None:
        run_pk, _ = upsert_run(conn, manifest, None)
    else:
        pk = conn.execute(select(s.runs.c.pk).where(s.runs.c.run_id == run_id)).scalar()
        if pk is None:
            raise BatchError(404, f"run {run_id!r} is unknown here; send its manifest with "
                                  "the first batch")
        run_pk = int(pk)
    if isinstance(records, bytes):  # a whole file: replaces what was stored of it
        try:
            rows, aside = store_whole_file(conn, run_pk, file, records, file)
        except ValueError as exc:
            raise BatchError(400, str(exc)) from exc
        return {"ok": True, "run_id": run_id, "file": file, "rows": rows, "set_aside": aside}
    result = ingest_records(conn, run_pk, file, records)
    if result.problem_count:
        raise BatchError(400, f"{result.problem_count} bad record(s): "
                              + "; ".join(result.problems[:5]))
    if file == fmt.METRICS and result.rows:
        # Streamed runs get the same live health evaluation as indexed folders.
        health_on_metrics(conn, run_pk, result.points, stored=result.rows)
        if on_points is not None:  # /metrics counts streamed points like indexed ones
            on_points(conn, run_pk, result.points)
    return {"ok": True, "run_id": run_id, "file": file, "records": result.records,
            "rows": result.rows}


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it passes `limit` bytes: a chunked body is
    counted while it streams in, so an oversized one is never held whole."""
    too_big = ApiError(413, f"the request is over {limit} bytes; send smaller batches")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_big
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_big
    return bytes(body)


def _gunzip(body: bytes, limit: int) -> bytes:
    """A gzip body inflated, refused with 413 as soon as it would pass `limit` bytes (a small
    body that inflates to gigabytes is never held whole) and with 400 when it is not gzip."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip header and trailer
    try:
        out = inflater.decompress(body, limit + 1)
        if len(out) > limit or inflater.unconsumed_tail:
            raise ApiError(413, f"the request inflates to over {limit} bytes; send smaller "
                                "batches")
        out += inflater.flush()
    except zlib.error as exc:
        raise ApiError(400, f"the body is not valid gzip: {exc}") from exc
    if not inflater.eof:
        raise ApiError(400, "the body is not valid gzip: it ends early")
    if len(out) > limit:
        raise ApiError(413, f"the request inflates to over {limit} bytes; send smaller batches")
    return out


async def _payload(request: Request, limit: int) -> bytes:
    """The JSON text of the request: the body as sent, or inflated when it says
    `Content-Encoding: gzip`; either way at most `limit` bytes."""
    body = await _read_body(request, limit)
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding in ("gzip", "x-gzip"):
        return _gunzip(body, limit)
    raise ApiError(415, f"Content-Encoding {encoding!r} is not supported; send gzip or none")


@router.post("/api/ingest", openapi_extra=REQUEST_BODY)
async def ingest(request: Request, st: ServerState = Depends(state)) -> JSONResponse:
    """Store batches `{"batches": [{"run_id", "file", "records", "manifest"?}]}` (or one batch).

    A batch may instead carry a whole file, `{"run_id", "file", "content", "manifest"?}`:
    config.yaml, engine_config.json or a samples file (step_NNNN_<split>.json), its text
    (or JSON value); it replaces what was stored of that file, as re-indexing the folder would.

    The body may be gzip-compressed (`Content-Encoding: gzip`); the inflated body has the
    same size limit as a plain one (413 past it, 400 when it is not valid gzip).

    Sending a batch again stores nothing new. Answers 200 when every batch was stored;
    otherwise the one error shape with the status of the first refused batch and
    `results` saying, per batch, what was stored or why it was refused.
    """
    limits = st.limits
    try:
        payload = loads_line(await _payload(request, limits.max_body_bytes))
    except ValueError as exc:
        raise ApiError(400, f"the body is not JSON: {exc}") from exc
    if isinstance(payload, dict) and "batches" not in payload:
        payload = {"batches": [payload]}
    batches = payload.get("batches") if isinstance(payload, dict) else None
    if not isinstance(batches, list) or not batches:
        raise ApiError(400, 'the body must be {"batches": [...]} or one batch object')
    if len(batches) > limits.max_batches:
        raise ApiError(413, f"{len(batches)} batches is more than {limits.max_batches} per request")

    metrics = getattr(request.app.state, "runwatch_metrics", None)
    on_points: PointsHook | None = None if metrics is None else metrics.on_points

    def store_all() -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = []
        for batch in batches:
            try:
                run_id, file, records, manifest = _check_batch(batch, limits)
                with st.engine.begin() as conn:
                    if (why := scopes.ingest_refusal(request, conn, run_id, manifest)):
                        raise BatchError(403, why)
                    results.append(_store(conn, run_id, file, records, manifest, on_points))
            except BatchError as exc:
                results.append({"ok": False, "error": exc.message, "status": exc.status})
        return results

    results = await run_in_threadpool(store_all)
    if any(r["ok"] for r in results):
        st.feed.notify()
    refused = [(i, r) for i, r in enumerate(results) if not r["ok"]]
    if refused:
        first_i, first = refused[0]
        return error_response(
            first["status"],
            f"{len(refused)} of {len(results)} batch(es) refused; "
            f"batch {first_i}: {first['error']}",
            results=results,
        )
    return JSONResponse({"ok": True, "results": results})
