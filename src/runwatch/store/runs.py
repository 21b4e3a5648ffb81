"""Writing a run's row: the manifest's fields, inserted or refreshed by run id.

A field of the wrong kind never fails the write: `created_at` that is not a finite
number of seconds is the time of writing, `tags` that is not a list is none, and text
longer than its column (which PostgreSQL enforces) is cut to it. The ingest reports
such fields (`runwatch.ingest.manifest`) using the same readers.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, cast

import orjson
from sqlalchemy import Connection, String, delete, or_, select, update

from runwatch.store import schema as s
from runwatch.store.dialect import conflict_insert
from runwatch.store.points import in_key
from runwatch.store.values import finite


def created_at(manifest: dict[str, Any]) -> float | None:
    """The manifest's `created_at` as a finite float, or None when absent or unusable."""
    return finite(manifest.get("created_at"))


def tags(manifest: dict[str, Any]) -> list[str] | None:
    """The manifest's tags as strings, or None when `tags` is there but not a list."""
    value = manifest.get("tags")
    if value is None:
        return []
    return [_text(t) for t in value] if isinstance(value, list) else None


RUN_ID_LENGTH = cast(String, s.runs.c.run_id.type).length or 64  # the schema's String(64)
# manifest field -> runs column, for the text fields cut to their column's length
TEXT_FIELDS = {"name": "name", "project": "project", "group": "group_name",
               "method": "method", "trainer": "trainer", "backend": "backend"}


def column_length(field: str) -> int | None:
    """The most characters the column of manifest text field `field` holds, if bounded."""
    length = getattr(s.runs.c[TEXT_FIELDS[field]].type, "length", None)
    return int(length) if length else None


def manifest_json(manifest: dict[str, Any]) -> str:
    """The manifest as stored: JSON, even with values orjson refuses (over 64 bits, deep)."""
    try:
        return orjson.dumps(manifest, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # orjson's encode error
        return json.dumps(manifest, default=str)


def run_name(manifest: dict[str, Any], run_dir: Path | None = None) -> str:
    """The name a run's row takes: its folder's, for a run indexed from one (a run's folder
    is named after it, so a folder renamed by hand renames its run, and a rebuilt index
    names it the same); else its manifest's name, else its run id; cut to the column."""
    if run_dir is not None:
        return cast(str, _fit("name", run_dir.name))
    return cast(str, _fit("name", _text(manifest.get("name") or manifest["run_id"])))


def _stored_name(text: str | None, run_dir: Path | None) -> str | None:
    """The name a run's stored manifest (its JSON text) gives it; None if it gives none."""
    try:
        stored = json.loads(text or "")
    except ValueError:
        return None
    return run_name(stored, run_dir) if isinstance(stored, dict) and "run_id" in stored \
        else None


def renames(stored_manifest: str | None, manifest: dict[str, Any]) -> bool:
    """Whether `manifest` gives a run a name its stored manifest (JSON text) did not: a
    run's name is checked when it is given, not at each change of its manifest."""
    return _stored_name(stored_manifest, None) != run_name(manifest)


def name_taken(conn: Connection, name: str, run_id: str, project: str | None = None
               ) -> bool:
    """Whether a run of `project` (None: of any project) other than `run_id` has the name
    `name`, or `name` is another run's id (a lookup by either would find two runs). With
    `project`, another project's run of that name takes nothing: names are a project's
    own, and a refusal must not tell one project's token what another's runs are named."""
    r = s.runs.c
    same = r.name == name if project is None else (r.name == name) & (r.project == project)
    return conn.execute(select(r.pk).where(or_(same, r.run_id == name), r.run_id != run_id)
                        .limit(1)).first() is not None


def run_project(manifest: dict[str, Any]) -> str:
    """The project a run's row takes from its manifest: its `project`, else "default";
    cut to the column."""
    return cast(str, _fit("project", _text(manifest.get("project") or "default")))


def upsert_run(
    conn: Connection, manifest: dict[str, Any], run_dir: Path | None
) -> tuple[int, bool]:
    """Insert or refresh the run row described by `manifest`; returns (pk, is_new): new
    when the row was made, or made anew from the folder `run_dir` of a run sent over HTTP.
    A run found in another folder than its row names moved there (`mv runs/a runs/b`):
    the row takes the new folder and its name, and keeps its records (the indexer reads a
    folder that is a copy of another's run as no run: ingest/gone.holds_run).

    A run sent over HTTP (`run_dir` None) may not take a name another such run of its
    project holds: the index refuses it (ux_runs_sent_name) with IntegrityError, and the
    transaction is spoilt.
    """
    r = s.runs.c
    values = {
        "name": run_name(manifest, run_dir),
        "project": run_project(manifest),
        "group_name": _fit("group", _s(manifest.get("group"))),
        "tags": orjson.dumps(tags(manifest) or []).decode(),
        "method": _fit("method", _s(manifest.get("method"))),
        "base_model": _s(manifest.get("base_model")),
        "dataset": _s(manifest.get("dataset")),
        "trainer": _fit("trainer", _s(manifest.get("trainer"))),
        "backend": _fit("backend", _s(manifest.get("backend"))),
        "created_at": created_at(manifest) or time.time(),
        "dir": str(run_dir.resolve()) if run_dir else None,
        "manifest": manifest_json(manifest),
    }
    find = select(r.pk, r.manifest, r.dir).where(r.run_id == manifest["run_id"])
    row = conn.execute(find).first()
    if row is None:
        pk = conn.execute(conflict_insert(conn.dialect.name, s.runs).values(
            run_id=manifest["run_id"], status="QUEUED", problems=0, **values,
        ).on_conflict_do_nothing(index_elements=["run_id"]).returning(r.pk)).scalar()
        if pk is not None:
            return int(pk), True
        # another indexer inserted it meanwhile (a server's, while `runwatch submit` indexes)
        row = conn.execute(find).one()
    if run_dir is not None and row.dir is None:
        # a run sent over HTTP first, now found in a folder: the folder is its record from
        # now on, and what was sent must not stand in for what the folder holds (a record
        # sent first under a seq would hide the folder's, and the sender may be another
        # project's token). It is forgotten, and the folder is read from its start into
        # the row as a new run's (the pk stays: caches and streams know the run by it).
        delete_records(conn, row.pk)
        conn.execute(update(s.runs).where(r.pk == row.pk).values(**values, **UNREAD))
        return int(row.pk), True
    if row.manifest != values["manifest"] or (run_dir is not None and row.dir != values["dir"]):
        if _stored_name(row.manifest, Path(row.dir) if row.dir else None) == values["name"]:
            # the manifest changed, not its name: the row keeps its own (one migration 0011
            # gave a sent run whose name another held, `<name>.<run id>`, stays)
            del values["name"]
        if run_dir is None:
            # a manifest sent over HTTP names no folder: the run keeps the one it was indexed
            # from (a folder's run keeps its job.json; a sender must not take that away)
            del values["dir"]
        conn.execute(update(s.runs).where(r.pk == row.pk).values(**values))
    return int(row.pk), False


# What the records of a run set in its row, as a run none of whose records is read has it
# (the columns upsert_run sets from the manifest aside): the phase, times and steps its
# events and metrics give, its whole files, its problems.
UNREAD: dict[str, Any] = {
    "status": "QUEUED", "stage": None, "progress_done": None, "progress_total": None,
    "reason": None, "reason_code": None, "attempt": 1, "started_at": None, "ended_at": None,
    "updated_at": None, "observed_step": None, "saved_step": None, "config": None,
    "engine_config": None, "problems": 0,
}


def _fit(field: str, value: str | None) -> Any:
    length = column_length(field)
    return value[:length] if value is not None and length else value


def _s(value: Any) -> str | None:
    return None if value is None else _text(value)


def _text(value: Any) -> str:
    """A field as text: a string as it is, a number as str() writes it, anything else as
    (at most 1,000 characters of) JSON."""
    if isinstance(value, str | int | float):
        return str(value)
    try:
        return json.dumps(value, default=str)[:1000]
    except (ValueError, RecursionError):
        return type(value).__name__


def delete_metrics(conn: Connection, run_pk: int) -> None:
    """Remove a run's metric points and keys from the index."""
    keys = conn.execute(select(s.metric_keys.c.id).where(s.metric_keys.c.run_pk == run_pk)
                        ).scalars().all()
    for key_id in keys:
        conn.execute(delete(s.metric_points).where(in_key(s.metric_points.c.id, key_id)))
    conn.execute(delete(s.metric_keys).where(s.metric_keys.c.run_pk == run_pk))


def delete_records(conn: Connection, run_pk: int) -> None:
    """Remove everything the index holds of a run but its row: its records, whole files,
    job, health, problems and where ingest stopped in each file."""
    delete_metrics(conn, run_pk)
    for table in reversed(s.metadata.sorted_tables):
        if "run_pk" in table.c:
            conn.execute(delete(table).where(table.c.run_pk == run_pk))


def delete_run(conn: Connection, run_pk: int) -> None:
    """Remove a run and everything the index holds of it (its folder is not touched)."""
    delete_records(conn, run_pk)
    conn.execute(delete(s.runs).where(s.runs.c.pk == run_pk))


def folder_runs(conn: Connection, base: str) -> list[tuple[int, str]]:
    """(pk, dir) of each run whose row names a folder that may lie right inside runs folder
    `base` (absolute; ingest/gone.leaf_in says which do)."""
    r = s.runs.c
    return [(int(pk), str(folder)) for pk, folder in conn.execute(
        select(r.pk, r.dir).where(r.dir.startswith(base.rstrip("/") + "/", autoescape=True)))]


def forget_run(conn: Connection, run_pk: int, folder: str) -> tuple[str, str] | None:
    """Remove run `run_pk`, whose folder `folder` is gone, and everything the index holds
    of it, in the caller's `store.db.writing` transaction; its (name, run id), or None
    when it stays: its row names another folder now (it moved, and was found there), or a
    worker holds its job (the worker ends the job when it finds the folder gone, and lets
    it go; the run is forgotten after that)."""
    r = s.runs.c
    row = conn.execute(select(r.name, r.run_id).where(r.pk == run_pk, r.dir == folder)
                       .with_for_update()).first()
    if row is None:
        return None
    holder = conn.execute(select(s.jobs.c.worker_id).where(s.jobs.c.run_pk == run_pk)
                          .with_for_update()).scalar()
    if holder is not None:
        return None
    delete_run(conn, run_pk)
    return str(row.name), str(row.run_id)
