"""Read queries over the index shared by the CLI and the server (portable SQL only)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from sqlalchemy import Connection, Row, func, or_, select

from runwatch.rundir import format as fmt
from runwatch.store import schema as s
from runwatch.store.keys import metric_keys, run_keys
from runwatch.store.points import read_points

# json_or_text, process_gone and process_here are read without SQLAlchemy (runs list);
# this module's readers find them here too
from runwatch.store.runrows import SEARCH_COLUMNS, escape_like
from runwatch.store.runrows import json_or_text as json_or_text
from runwatch.store.runrows import process_gone as process_gone
from runwatch.store.runrows import process_here as process_here


class RunNotFound(LookupError):
    """A run reference matched no run, or more than one."""

    def __init__(self, message: str, candidates: Sequence[str] = (), ambiguous: bool = False
                 ) -> None:
        super().__init__(message)
        self.candidates = list(candidates)
        # True when several runs matched (the caller must be more precise), False when none.
        self.ambiguous = ambiguous


def resolve_run(conn: Connection, ref: str,
                projects: frozenset[str] | None = None) -> Row[Any]:
    """The run whose id is `ref`, or whose id or name uniquely starts with `ref`; with
    `projects`, among those projects' runs only (a scoped token's candidates and
    ambiguities never name another project's runs)."""
    r = s.runs.c
    within = [r.project.in_(sorted(projects))] if projects is not None else []
    if len(ref) > fmt.MAX_NAME_LENGTH or "\x00" in ref:
        # no name or id is longer (nor holds a NUL), and SQLite refuses a LIKE pattern of
        # some 50,000 characters: said without a query, and without echoing all of it
        shown = ref[:40].replace("\x00", "\\0") + ("…" if len(ref) > 40 else "")
        raise RunNotFound(f"no run has the id or name {shown!r} ({len(ref)} characters; "
                          f"a run's name has at most {fmt.MAX_NAME_LENGTH}, its id 32, and "
                          "neither holds a NUL)", [])
    exact = conn.execute(select(s.runs).where(or_(r.run_id == ref, r.name == ref),
                                              *within)).all()
    if len(exact) == 1:
        return exact[0]
    if len(exact) > 1:
        raise RunNotFound(f"{ref!r} names {len(exact)} runs; use a run id",
                          [f"{x.run_id}  {x.name}" for x in exact], ambiguous=True)
    pattern = escape_like(ref) + "%"
    found = conn.execute(
        select(s.runs).where(or_(r.run_id.like(pattern, escape="\\"),
                                 r.name.like(pattern, escape="\\")), *within)
        .order_by(r.created_at.desc()).limit(20)
    ).all()
    if len(found) == 1:
        return found[0]
    if found:
        raise RunNotFound(f"{ref!r} matches {len(found)} runs; give more of the id or name",
                          [f"{x.run_id}  {x.name}" for x in found], ambiguous=True)
    recent = conn.execute(select(r.run_id, r.name).where(*within)
                          .order_by(r.created_at.desc()).limit(10)).all()
    raise RunNotFound(f"no run has the id or name {ref!r}",
                      [f"{x.run_id}  {x.name}" for x in recent])


# What a list row carries (runwatch.analysis.views.run_summary's fields, the cursor's pk,
# the manifest for process_gone): not a run's config or engine config, which can be large.
LIST_COLUMNS = tuple(c for c in s.runs.c
                     if c.name not in ("config", "engine_config", "dir", "progress_done",
                                       "progress_total", "problems"))


def list_runs(
    conn: Connection,
    search: str | None = None,
    project: str | None = None,
    status: str | None = None,
    limit: int = 100,
    before: tuple[float, int] | None = None,
    group: str | None = None,
) -> list[Row[Any]]:
    """Runs newest first; `before` = (created_at, pk) of the last row of the previous page;
    `group` keeps the runs of one group (a sweep's arms share one). Rows carry
    LIST_COLUMNS, enough for `run_summary`."""
    r = s.runs.c
    q = select(*LIST_COLUMNS)
    if search:
        pattern = "%" + escape_like(search.lower()) + "%"
        if conn.dialect.name == "sqlite":
            # SQLite's LIKE ignores ASCII case, as its lower() folds only ASCII: the same
            # matches as lower(column) LIKE, without a function call per column and row
            q = q.where(or_(*[getattr(r, c).like(pattern, escape="\\")
                              for c in SEARCH_COLUMNS]))
        else:
            # one lower() of the columns joined (by a control character no search holds)
            # instead of one per column: about 1.6x faster over 10,000 runs on PostgreSQL
            joined = func.concat_ws("\x1f", *[getattr(r, c) for c in SEARCH_COLUMNS])
            q = q.where(func.lower(joined).like(pattern, escape="\\"))
    if project:
        q = q.where(r.project == project)
    if group:
        q = q.where(r.group_name == group)
    if status:
        q = q.where(r.status == status.upper())
    if before is not None:
        ts, pk = before
        # `created_at <= ts` bounds the index range; the OR alone made a deep page walk
        # every newer run first
        q = q.where(r.created_at <= ts, or_(r.created_at < ts, r.pk < pk))
    return list(conn.execute(q.order_by(r.created_at.desc(), r.pk.desc()).limit(limit)).all())


def last_values(conn: Connection, run_pk: int) -> dict[str, Any]:
    """The newest value of every metric of a run, with its step."""
    return {k.key: {"step": k.last_step, "value": _nan(k.last_value), "points": k.points}
            for k in run_keys(conn, run_pk)}


def _nan(value: float | None) -> float:
    return float("nan") if value is None else value


@dataclass
class StepRow:
    step: int
    ts: float
    values: dict[str, float]


def history(
    conn: Connection,
    run_pk: int,
    keys: Sequence[str] | None = None,
    step_min: int | None = None,
    step_max: int | None = None,
) -> list[StepRow]:
    """Every step of a run with its metric values; the newest record wins within a step."""
    ids = metric_keys(conn, run_pk)
    if keys:
        missing = [k for k in keys if k not in ids]
        if missing:
            raise KeyError(f"run has no metric {missing[0]!r}; it has: "
                           + ", ".join(sorted(ids)[:30]))
        ids = {k: ids[k] for k in keys}
    # Per step, per key: the time and value of its newest record (points come in seq
    # order, so a later record of the step overwrites an earlier one: a resumed run's
    # step logged again). A step's time is the earliest of the records shown, as the API
    # gives it (a superseded record's time is not the time of the values shown).
    by_step: dict[int, dict[str, tuple[float, float]]] = {}
    nan = float("nan")
    for name, kid in ids.items():
        for _, step, ts, value in read_points(conn, kid, step_min=step_min,
                                              step_max=step_max):
            by_step.setdefault(step, {})[name] = (ts, nan if value is None else value)
    return [StepRow(step, min(ts for ts, _ in shown.values()),
                    {name: value for name, (_, value) in shown.items()})
            for step, shown in sorted(by_step.items())]


def events(conn: Connection, run_pk: int) -> list[dict[str, Any]]:
    """A run's lifecycle events, oldest first (absent fields are None)."""
    c = s.events.c
    rows = conn.execute(select(s.events).where(c.run_pk == run_pk).order_by(c.seq))
    return [{k: v for k, v in r._mapping.items() if k != "run_pk"} for r in rows]


def folder_problem(conn: Connection, folder: str) -> str | None:
    """Why the run folder `folder` (a path) is not indexed, as the indexer last said it
    (it says each reason once, when it first meets it): its latest problem without a run,
    on the folder or a file in it; None if it said nothing."""
    c = s.ingest_problems.c
    return conn.execute(select(c.message).where(
        c.run_pk.is_(None), (c.path == folder) | c.path.startswith(folder + "/",
                                                                    autoescape=True))
        .order_by(c.id.desc()).limit(1)).scalar()


def unindexed_folder(conn: Connection, name: str) -> tuple[str, str] | None:
    """A run folder named `name` the indexer said it could not read, and why (its latest
    problem without a run, on the folder itself or a file right in it): (folder, message),
    or None if it said nothing of one."""
    c = s.ingest_problems.c
    if not name or "/" in name:
        return None
    rows = conn.execute(select(c.path, c.message).where(
        c.run_pk.is_(None), c.path.contains("/" + name, autoescape=True))
        .order_by(c.id.desc()).limit(50))
    for path, message in rows:  # LIKE also finds parents and other cases: only the folder
        where = PurePath(path)
        folder = where if where.name == name else where.parent
        if folder.name == name:
            return str(folder), str(message)
    return None


def problems(conn: Connection, run_pk: int, limit: int = 50) -> list[str]:
    c = s.ingest_problems.c
    rows = conn.execute(select(c.message).where(c.run_pk == run_pk).order_by(c.id).limit(limit))
    return [m for (m,) in rows]
