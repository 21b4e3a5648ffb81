"""The ingest route: batches of run-directory records, stored idempotently on (run, file, seq),
and a run's whole files (config.yaml, engine_config.json, samples files), each replacing what
was stored of it, through the indexer's own functions (`runwatch.ingest.wholefiles`).

Each batch is stored in its own transaction, whole or not at all, so a bad batch is
refused with its reason while the good batches of the same request are kept.

Ingest writes only runs sent over HTTP: a run indexed from a runs folder (or one the server's
runs folder holds) has the folder as its record, and a run's name may be no other run's
in its project (`_owner_refusal`, and the index's ux_runs_sent_name for two ingests that
race). Nor does it make a queued command job for a token that may not submit one
(`_queued_command_refusal`).

`GET /api/ingest?run=` says what the index holds of a run (`held`), for a sender to go on
from there when it holds less than the sender sent (a database restored from a backup).
"""

from __future__ import annotations

import asyncio
import os
import zlib
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import orjson
from fastapi import APIRouter, Depends, Query, Request
from sqlalchemy import Connection, func, select
from sqlalchemy.exc import IntegrityError
from starlette.concurrency import run_in_threadpool

from runwatch.health.store import on_events as health_on_events
from runwatch.health.store import on_metrics as health_on_metrics
from runwatch.ingest import IngestResult, ingest_records
from runwatch.ingest.indexer import PointsHook
from runwatch.ingest.manifest import ManifestError, check_manifest
from runwatch.ingest.parts import Piece
from runwatch.ingest.points import MetricsGroup
from runwatch.ingest.wholefiles import store_whole_file, whole_file_cap, whole_file_name_problem
from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line
from runwatch.rundir.safeio import UnsafeFile, read_capped
from runwatch.server import scopes
from runwatch.server.errors import ApiError, error_response, not_found
from runwatch.server.jsonio import JSONResponse
from runwatch.server.schemas import IngestHeld, documented
from runwatch.server.state import Limits, ServerState, connection, state
from runwatch.store import schema as s
from runwatch.store.keys import run_keys
from runwatch.store.points import newest_seq
from runwatch.store.runrows import json_or_text
from runwatch.store.runs import (
    manifest_json,
    name_taken,
    renames,
    run_name,
    run_project,
    upsert_run,
)

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

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code  # a word a sender acts on (`FOLDER_RUN`), beside the message


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
        file, raw = _check_whole_file(file, batch["content"])
        # a piece of a file too big for one request carries its part (ingest/parts.py)
        return run_id, file, raw if "part" not in batch else Piece(raw, batch["part"]), manifest
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


def _store(conn: Connection, run_pk: int, run_id: str, file: str,
           records: list[dict[str, Any]] | bytes, on_points: PointsHook | None
           ) -> dict[str, Any]:
    """Store one batch of a run found (or made) already."""
    if isinstance(records, bytes):  # a whole file: replaces what was stored of it
        try:
            rows, aside = store_whole_file(conn, run_pk, file, records, file)
        except ValueError as exc:
            raise BatchError(400, str(exc)) from exc
        return {"ok": True, "run_id": run_id, "file": file, "rows": rows, "set_aside": aside}
    result = ingest_records(conn, run_pk, file, records)
    _check_problems(result)
    if file == fmt.METRICS:
        _stored_points(conn, run_pk, result, on_points)
    elif file == fmt.EVENTS and result.rows:
        health_on_events(conn, run_pk)  # a run that succeeded: its whole log is judged
    return {"ok": True, "run_id": run_id, "file": file, "records": result.records,
            "rows": result.rows}


def _queued_command_refusal(conn: Connection, request: Request, run_pk: int, run_id: str,
                            file: str) -> None:
    """403 for a batch of events or a job.json that leaves a run waiting in the queue as a
    command job (the events say QUEUED, or there are none) when the request may not submit
    one: POST /api/jobs refuses a command job to a project token, so ingest must not make
    one either, which would count in the queue depth and send an operator to start workers
    for it. A job.json of a run that has started (an SDK streams it) is stored as before."""
    if file not in (fmt.EVENTS, fmt.JOB):
        return
    sc = scopes.scope_of(request)
    if sc.can(None, "write"):  # the server's token: it may submit command jobs
        return
    r, j = s.runs.c, s.jobs.c
    queued = conn.execute(select(r.pk).join(s.jobs, j.run_pk == r.pk).where(
        r.pk == run_pk, r.status == "QUEUED", j.kind == "command")).first()
    if queued is not None:
        raise BatchError(403, f"run {run_id!r} would wait in the queue as a command job, "
                              f"and {sc.who} may not submit one (a command runs as the "
                              "server's user, so only the server's token may); send its "
                              "job.json once the run has started, or send it with the "
                              "server's token")


def _check_problems(result: IngestResult) -> None:
    if result.problem_count:
        raise BatchError(400, f"{result.problem_count} bad record(s): "
                              + "; ".join(result.problems[:5]))


def _stored_points(conn: Connection, run_pk: int, result: IngestResult,
                   on_points: PointsHook | None) -> None:
    if result.rows:
        # Streamed runs get the same live health evaluation as indexed folders.
        health_on_metrics(conn, run_pk, result.points, stored=result.rows)
        if on_points is not None:  # /metrics counts streamed points like indexed ones
            on_points(conn, run_pk, result.points)


# --- storing requests together ----------------------------------------------------
#
# Every request's batches go to the app's one _Writer. While it stores a group in one
# transaction (in a worker thread), the requests that arrive wait, and all of them are the
# next group: one commit, one lookup of their runs and their metric keys, and on
# PostgreSQL one statement for all their points (runwatch.ingest.points.MetricsGroup).
# A group stops growing at GROUP_RECORDS records (a request is never split).
GROUP_RECORDS = 20_000
# Groups stored at once: while one waits on the database, another is worked on.
WRITERS = 4

Checked = tuple[str, str, list[dict[str, Any]] | bytes, Any] | BatchError
Job = tuple[Request, list[Any]]  # a request, and its batches as sent


class _Again(Exception):
    """A batch refused after the group wrote some of it: the group is stored again,
    batch by batch."""


def _checked(batch: Any, limits: Limits) -> Checked:
    try:
        return _check_batch(batch, limits)
    except BatchError as exc:
        return exc


def _refused(exc: BatchError) -> dict[str, Any]:
    out = {"ok": False, "error": exc.message, "status": exc.status}
    return out if exc.code is None else {**out, "code": exc.code}


# A batch of a run the server records from a runs folder: the run is there already (a
# job's SDK that also streams to the server that indexes its folder), so its sender stops
# without a warning.
FOLDER_RUN = "folder_run"


def _refusal(request: Request, runs: dict[str, _Run], run_id: str,
             manifest: dict[str, Any] | None) -> BatchError | None:
    """403 unless the request may write batches of `run_id` (`runs`: the runs looked up)."""
    sc = scopes.scope_of(request)
    if sc.projects is None and sc.right == "admin":
        return None  # every project, every right: nothing to check
    run = runs.get(run_id)
    why = scopes.stored_ingest_refusal(request, run_id, run.project if run else None, manifest)
    return None if why is None else BatchError(403, why)


class _Run(NamedTuple):
    pk: int
    manifest: str | None
    project: str | None
    name: str
    dir: str | None  # the folder it is indexed from; None for a run sent over HTTP


def _runs(conn: Connection, run_ids: Iterable[str]) -> dict[str, _Run]:
    r = s.runs.c
    ids = sorted(set(run_ids))
    if not ids:
        return {}
    return {row.run_id: _Run(int(row.pk), row.manifest, row.project, row.name, row.dir)
            for row in conn.execute(select(r.run_id, r.pk, r.manifest, r.project, r.name, r.dir)
                                    .where(r.run_id.in_(ids)))}


class _NameRace(BatchError):
    """The index refused the run's row: another ingest stored its name after this one's
    check. The transaction is spoilt (PostgreSQL): a group is stored again batch by batch."""


def _folder_refusal(name: str) -> BatchError:
    return BatchError(409, f"run {name!r} is recorded in a runs folder this server indexes: "
                           "the folder is its record, so it cannot be written over HTTP",
                      FOLDER_RUN)


def _name_refusal(name: str, project: str, by: str = "another run") -> BatchError:
    return BatchError(409, f"the run name {name!r} is already taken in project {project!r} "
                           f"by {by}; name this run "
                           "otherwise (runwatch.init(name=...)) and send it again")


def _owner_refusal(conn: Connection, run: _Run | None, run_id: str,
                   manifest: dict[str, Any] | None, text: str | None, runs_dir: Path | None
                   ) -> BatchError | None:
    """409 for a batch ingest may not write: of a run indexed from a folder, or whose
    manifest (`text`: its JSON) names it as another run is named (in the index, or a folder
    of `runs_dir` the indexer has not read yet, whose records would otherwise be taken by
    this batch's)."""
    if run is not None and run.dir is not None:
        return _folder_refusal(run.name)
    if manifest is None or (run is not None and run.manifest == text):
        return None  # nothing to store of the manifest: the run's name stays as stored
    name, project = run_name(manifest), run_project(manifest)
    held = _in_folder(runs_dir, name) if runs_dir is not None else None
    if held is not None and held.run_id == run_id:  # this very run, not yet indexed
        return _folder_refusal(name)
    if run is not None and not renames(run.manifest, manifest) and run.project == project:
        return None  # its name is the one it was stored with: checked when it was given
    if held is not None and held.project in (None, project):
        # a folder of another project's run takes nothing (names are a project's own);
        # one whose project cannot be read yet is taken as this project's
        return _name_refusal(name, project,
                             "a run recorded in the runs folder this server indexes")
    return _name_refusal(name, project) if name_taken(conn, name, run_id, project) else None


class _Held(NamedTuple):
    """The run a folder of the server's runs folder holds: the run id and the project its
    manifest gives ("" and None while its manifest cannot be read)."""

    run_id: str
    project: str | None


def _in_folder(runs_dir: Path, name: str) -> _Held | None:
    """What the runs folder holds as entry `name` (only a valid run name is looked up),
    None when it holds none."""
    try:
        fmt.validate_name(name)
    except fmt.RunDirError:
        return None
    if not os.path.lexists(runs_dir / name):
        return None
    try:
        held = loads_line(read_capped(runs_dir / name / fmt.MANIFEST))
    except (OSError, ValueError, UnsafeFile):
        return _Held("", None)
    if not isinstance(held, dict) or not isinstance(held.get("run_id"), str):
        return _Held("", None)
    return _Held(held["run_id"], run_project(held))


def _run_pk(conn: Connection, runs: dict[str, _Run], run_id: str,
            manifest: dict[str, Any] | None, runs_dir: Path | None) -> int:
    """The run's pk: made or refreshed from `manifest` when it differs from the stored one
    (`runs` is kept current), 404 when the run is unknown and no manifest came, 409 when
    ingest may not write it (`_owner_refusal`)."""
    run = runs.get(run_id)
    text = None if manifest is None else manifest_json(manifest)
    if (refused := _owner_refusal(conn, run, run_id, manifest, text, runs_dir)) is not None:
        raise refused
    if manifest is not None and (run is None or run.manifest != text):
        name = run_name(manifest)
        try:
            pk, _ = upsert_run(conn, manifest, None)
        except IntegrityError as exc:  # ux_runs_sent_name: another ingest took the name
            raise _NameRace(409, _name_refusal(name, run_project(manifest)).message) from exc
        run = runs[run_id] = _Run(pk, text, run_project(manifest), name, None)
    if run is None:
        raise BatchError(404, f"run {run_id!r} is unknown here; send its manifest with "
                              "the first batch")
    return run.pk


def _store_each(st: ServerState, request: Request, checks: list[Checked],
                on_points: PointsHook | None) -> list[dict[str, Any]]:
    """A request's batches, each in its own transaction, whole or not at all."""
    results: list[dict[str, Any]] = []
    for check in checks:
        try:
            if isinstance(check, BatchError):
                raise check
            run_id, file, records, manifest = check
            with st.engine.begin() as conn:
                runs = _runs(conn, [run_id])
                if (refused := _refusal(request, runs, run_id, manifest)) is not None:
                    raise refused
                run_pk = _run_pk(conn, runs, run_id, manifest, st.runs_dir)
                answer = _store(conn, run_pk, run_id, file, records, on_points)
                _queued_command_refusal(conn, request, run_pk, run_id, file)
                results.append(answer)
        except BatchError as exc:
            results.append(_refused(exc))
    return results


def _store_together(conn: Connection, jobs: list[Job], checked: list[list[Checked]],
                    on_points: PointsHook | None, runs_dir: Path | None
                    ) -> list[list[dict[str, Any]]]:
    """Every job's batches in the one transaction of `conn`. A batch refused before
    anything of it is written (its scope, an unknown run, a run ingest may not write) is
    answered so; one refused later (bad records, a name another ingest took meanwhile)
    raises _Again."""
    runs = _runs(conn, (c[0] for checks in checked for c in checks
                        if not isinstance(c, BatchError)))
    answers: dict[int, dict[str, Any]] = {}

    def stored(run_pk: int, result: IngestResult) -> None:
        answers[id(result)]["rows"] = result.rows
        _stored_points(conn, run_pk, result, count)

    # /metrics counts a group's points once all of it is stored: a group sent back batch
    # by batch (_Again) would otherwise count them twice
    counted: list[tuple[int, Any]] = []

    def count(_: Connection, run_pk: int, points: Any) -> None:
        counted.append((run_pk, points))

    group = MetricsGroup(conn, stored)
    group.prefetch(run.pk for run in runs.values())
    out: list[list[dict[str, Any]]] = []
    for (request, _), checks in zip(jobs, checked, strict=True):
        results: list[dict[str, Any]] = []
        out.append(results)
        for check in checks:
            try:
                if isinstance(check, BatchError):
                    raise check
                run_id, file, records, manifest = check
                if (refused := _refusal(request, runs, run_id, manifest)) is not None:
                    raise refused
                run_pk = _run_pk(conn, runs, run_id, manifest, runs_dir)
            except _NameRace as exc:
                raise _Again from exc
            except BatchError as exc:
                results.append(_refused(exc))
                continue
            try:
                if file == fmt.METRICS and isinstance(records, list):
                    result = group.add(run_pk, records)
                    _check_problems(result)
                    answer = {"ok": True, "run_id": run_id, "file": file,
                              "records": result.records, "rows": 0}
                    answers[id(result)] = answer
                    results.append(answer)
                    continue
                if group.holds(run_pk):
                    group.flush()  # a run's records are stored in the order they came
                answer = _store(conn, run_pk, run_id, file, records, count)
                _queued_command_refusal(conn, request, run_pk, run_id, file)
                results.append(answer)
                group.forget(run_pk)
            except BatchError as exc:
                raise _Again from exc
    group.flush()
    if on_points is not None:
        for run_pk, points in counted:
            on_points(conn, run_pk, points)
    return out


def _store_jobs(st: ServerState, jobs: list[Job], on_points: PointsHook | None
                ) -> list[list[dict[str, Any]] | BaseException]:
    """Each job's results (or the exception that ended it): the jobs together in one
    transaction, or, when that fails, each batch again in its own."""
    checked = [[_checked(b, st.limits) for b in batches] for _, batches in jobs]
    ordered = [_end_last(checks) for checks in checked]
    checked = [checks for checks, _ in ordered]
    orders = [order for _, order in ordered]
    try:
        with st.engine.begin() as conn:
            return [_as_sent(results, order) for results, order in zip(
                _store_together(conn, jobs, checked, on_points, st.runs_dir), orders,
                strict=True)]
    except _Again:
        pass
    except Exception:
        if len(jobs) == 1:  # its own error, as if it were stored alone
            raise
    out: list[list[dict[str, Any]] | BaseException] = []
    for (request, _), checks, order in zip(jobs, checked, orders, strict=True):
        try:
            out.append(_as_sent(_store_each(st, request, checks, on_points), order))
        except Exception as exc:  # this job's answer; the others' stand
            out.append(exc)
    return out


def _end_last(checks: list[Checked]) -> tuple[list[Checked], list[int]]:
    """A request's batches in the order to store them, and that order (indices into
    `checks`): as sent, but a batch of events that ends a run after the others, so that a
    run reads as ended only once the records its client sent with the end are stored (the
    indexer holds a folder's end back so too). A batch of events that names an attempt
    stays where it was sent (it may start the next attempt, whose records follow it). A
    manifest the moved batch carried goes with the run's first batch."""
    def ends(check: Checked) -> bool:
        if isinstance(check, BatchError) or check[1] != fmt.EVENTS \
                or not isinstance(check[2], list):
            return False
        records = [r for r in check[2] if isinstance(r, dict)]
        # a batch that names an attempt may start the next one, which forgets what the
        # index holds of the attempt before: the records sent beside it are that next
        # attempt's, stored after it as sent
        return (any(isinstance(r.get("phase"), str) and r["phase"] in fmt.TERMINAL_PHASES
                    for r in records)
                and not any("attempt" in r for r in records))
    order = sorted(range(len(checks)), key=lambda i: ends(checks[i]))
    out = [checks[i] for i in order]
    if order == sorted(order):
        return out, order
    first: dict[str, int] = {}  # each run's first batch in the new order
    for at, check in enumerate(out):
        if isinstance(check, BatchError):
            continue
        run_id, manifest = check[0], check[3]
        head = out[first.setdefault(run_id, at)]
        if manifest is not None and not isinstance(head, BatchError) and head[3] is None:
            out[first[run_id]] = (head[0], head[1], head[2], manifest)
    return out, order


def _as_sent(results: list[dict[str, Any]], order: list[int]) -> list[dict[str, Any]]:
    """A request's answers in the order its batches were sent (`order` is the order they
    were stored in)."""
    out: list[dict[str, Any]] = [{}] * len(results)
    for stored_at, sent_at in enumerate(order):
        out[sent_at] = results[stored_at]
    return out


class _Writer:
    """The app's ingest writer: up to WRITERS groups stored at once, each in its own
    transaction and thread (while one waits on the database another works); a request
    whose run is in a group being stored waits for the next (see above)."""

    def __init__(self, st: ServerState, on_points: PointsHook | None) -> None:
        self.st = st
        self.on_points = on_points
        self.waiting: list[_Waiting] = []
        self.busy: set[str] = set()  # the runs of the groups being stored
        self.groups = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self.tasks: set[asyncio.Future[Any]] = set()  # held: the loop holds weak references

    async def store(self, job: Job) -> list[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        if loop is not self.loop:  # a new event loop (an app served again): start afresh
            self.loop, self.waiting, self.busy, self.groups = loop, [], set(), 0
        # as sent, not checked yet: a run_id or records of any JSON type
        sent = [b for b in job[1] if isinstance(b, dict)]
        runs = {str(b.get("run_id")) for b in sent}
        records = sum(len(r) for b in sent if isinstance(r := b.get("records"), list))
        answer: asyncio.Future[list[dict[str, Any]]] = loop.create_future()
        self.waiting.append(_Waiting(job, answer, runs, records))
        self._next()
        return await answer

    def _next(self) -> None:
        while self.waiting and self.groups < WRITERS:
            take: list[_Waiting] = []
            runs: set[str] = set()
            records = 0
            left: list[_Waiting] = []
            for item in self.waiting:
                if (item.runs & (self.busy | runs)
                        or (take and records + item.records > GROUP_RECORDS)):
                    left.append(item)
                    continue
                take.append(item)
                runs |= item.runs
                records += item.records
            if not take:
                return
            self.waiting = left
            self.busy |= runs
            self.groups += 1
            task = asyncio.get_running_loop().create_task(run_in_threadpool(
                _store_jobs, self.st, [item.job for item in take], self.on_points))
            self.tasks.add(task)
            task.add_done_callback(partial(self._done, take=take, runs=runs))

    def _done(self, task: asyncio.Future[list[list[dict[str, Any]] | BaseException]],
              take: list[_Waiting], runs: set[str]) -> None:
        self.tasks.discard(task)
        self.groups -= 1
        self.busy -= runs
        try:
            answers: list[list[dict[str, Any]] | BaseException] = task.result()
        except BaseException as exc:  # every waiting request is answered
            answers = [exc] * len(take)
        for item, got in zip(take, answers, strict=True):
            if item.answer.done():  # its request went away meanwhile
                continue
            if isinstance(got, BaseException):
                item.answer.set_exception(got)
            else:
                item.answer.set_result(got)
        self._next()


class _Waiting(NamedTuple):
    job: Job
    answer: asyncio.Future[list[dict[str, Any]]]
    runs: set[str]
    records: int


def _writer(request: Request, st: ServerState) -> _Writer:
    writer: _Writer | None = getattr(request.app.state, "runwatch_ingest", None)
    if writer is None:
        metrics = getattr(request.app.state, "runwatch_metrics", None)
        writer = _Writer(st, None if metrics is None else metrics.on_points)
        request.app.state.runwatch_ingest = writer
    return writer


def _too_big(limits: Limits, what: str = "is") -> ApiError:
    return ApiError(413, f"the request {what} over {limits.max_body_bytes} bytes; send smaller "
                         f"batches (only a request of one record may be larger, up to "
                         f"{limits.max_one_record_bytes} bytes)")


async def _read_body(request: Request, limits: Limits) -> bytes:
    """The body, refused with 413 as soon as it passes its limit: max_body_bytes, or
    max_one_record_bytes for a body whose Content-Length says it is within that (whether it
    holds one record is checked once it is parsed, `_one_record`). A chunked body is
    counted while it streams in, so an oversized one is never held whole."""
    declared = request.headers.get("content-length")
    length = int(declared) if declared and declared.isdigit() else None
    if length is not None and length > limits.max_one_record_bytes:
        raise _too_big(limits)
    limit = limits.max_body_bytes if length is None else limits.max_one_record_bytes
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _too_big(limits)
    return bytes(body)


def _gunzip(body: bytes, limits: Limits) -> bytes:
    """A gzip body inflated, refused with 413 as soon as it would pass max_one_record_bytes
    (a small body that inflates to gigabytes is never held whole) and with 400 when it is
    not gzip."""
    limit = limits.max_one_record_bytes
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip header and trailer
    try:
        out = inflater.decompress(body, limit + 1)
        if len(out) > limit or inflater.unconsumed_tail:
            raise _too_big(limits, "inflates to")
        out += inflater.flush()
    except zlib.error as exc:
        raise ApiError(400, f"the body is not valid gzip: {exc}") from exc
    if not inflater.eof:
        raise ApiError(400, "the body is not valid gzip: it ends early")
    if len(out) > limit:
        raise _too_big(limits, "inflates to")
    return out


async def _payload(request: Request, limits: Limits) -> tuple[bytes, str]:
    """The JSON text of the request, the body as sent or inflated when it says
    `Content-Encoding: gzip`, at most max_one_record_bytes; and how to say its size ("is",
    "inflates to")."""
    body = await _read_body(request, limits)
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        return body, "is"
    if encoding in ("gzip", "x-gzip"):
        return _gunzip(body, limits), "inflates to"
    raise ApiError(415, f"Content-Encoding {encoding!r} is not supported; send gzip or none")


def _one_record(batches: list[Any]) -> bool:
    """Whether a request's batches are one batch of one record (such a request may be
    larger than max_body_bytes: a line of a record file may be)."""
    return (len(batches) == 1 and isinstance(batches[0], dict)
            and isinstance(records := batches[0].get("records"), list) and len(records) == 1)


@router.post("/api/ingest", openapi_extra=REQUEST_BODY)
async def ingest(request: Request) -> JSONResponse:
    """Store batches `{"batches": [{"run_id", "file", "records", "manifest"?}]}` (or one batch).

    A batch may instead carry a whole file, `{"run_id", "file", "content", "manifest"?}`:
    config.yaml, engine_config.json or a samples file (step_NNNN_<split>.json), its text
    (or JSON value); it replaces what was stored of that file, as re-indexing the folder would.

    The body may be gzip-compressed (`Content-Encoding: gzip`); the inflated body has the
    same size limit as a plain one (413 past it, 400 when it is not valid gzip). A request
    of one batch of one record may be larger, up to the longest line of a record file and
    its envelope (`Limits.max_one_record_bytes`); sent plain, it says its Content-Length.

    Sending a batch again stores nothing new. Answers 200 when every batch was stored;
    otherwise the one error shape with the status of the first refused batch and
    `results` saying, per batch, what was stored or why it was refused.
    """
    st = state(request)  # called, not a dependency: FastAPI runs a plain one in a thread
    limits = st.limits
    text, size = await _payload(request, limits)
    over = len(text) > limits.max_body_bytes  # then it must be one record
    try:
        payload = loads_line(text)
    except ValueError as exc:
        if over:
            raise _too_big(limits, size) from None
        raise ApiError(400, f"the body is not JSON: {exc}") from exc
    if isinstance(payload, dict) and "batches" not in payload:
        payload = {"batches": [payload]}
    batches = payload.get("batches") if isinstance(payload, dict) else None
    if over and not (isinstance(batches, list) and _one_record(batches)):
        raise _too_big(limits, size)
    if not isinstance(batches, list) or not batches:
        raise ApiError(400, 'the body must be {"batches": [...]} or one batch object')
    if len(batches) > limits.max_batches:
        raise ApiError(413, f"{len(batches)} batches is more than {limits.max_batches} per request")

    results = await _writer(request, st).store((request, batches))
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


@router.get("/api/ingest", **documented(IngestHeld, "what the index holds of the run"))
def held(request: Request,
         run: str = Query(..., min_length=1, max_length=64,
                          description="the run's id (its manifest's run_id; no name)"),
         conn: Connection = Depends(connection)) -> dict[str, Any]:
    """What the index holds of run `run`, for a sender to go on from: per record file the
    highest seq stored, the whole files stored (with the size and sha256 each was stored
    with, kept when it was: none for one stored before schema 0020), and the manifest.

    A sender that sent more than this (the server's database was restored from a backup,
    or made anew at the same URL) sends again from there: storing is idempotent on (run,
    file, seq), so what it sends twice is stored once. A run the index does not hold, or
    one outside the token's projects, is 404."""
    r = s.runs.c
    row = conn.execute(select(r.pk, r.run_id, r.project, r.dir, r.manifest, r.config,
                              r.engine_config).where(r.run_id == run)).first()
    if row is None or not scopes.scope_of(request).can(row.project, "read"):
        raise not_found(f"run {run!r} is not held here; a sender sends it whole, its "
                        "manifest with its first batch")
    last_seq = {fmt.METRICS: newest_seq(conn, (k.id for k in run_keys(conn, row.pk)))}
    for table, name in ((s.events, fmt.EVENTS), (s.checkpoints, fmt.CHECKPOINTS),
                        (s.logs, fmt.LOGS)):
        last_seq[name] = conn.execute(select(func.max(table.c.seq))
                                      .where(table.c.run_pk == row.pk)).scalar()
    whole = [name for name, value in ((fmt.CONFIG, row.config),
                                      (fmt.ENGINE_CONFIG, row.engine_config))
             if value is not None]
    if conn.execute(select(s.jobs.c.run_pk).where(s.jobs.c.run_pk == row.pk)).first():
        whole.append(fmt.JOB)
    whole += conn.execute(select(s.samples.c.file).where(s.samples.c.run_pk == row.pk)
                          .distinct().order_by(s.samples.c.file)).scalars()
    h = s.whole_file_hashes.c
    hashes = {file: {"size": size, "sha256": sha256} for file, size, sha256 in conn.execute(
        select(h.file, h.size, h.sha256).where(h.run_pk == row.pk)) if file in whole}
    manifest = json_or_text(row.manifest)
    return {"ok": True, "run_id": row.run_id, "folder": row.dir is not None,
            "manifest": manifest if isinstance(manifest, dict) else {}, "last_seq": last_seq,
            "whole_files": whole, "whole_file_hashes": hashes}
