"""What the index holds about one run, read in one place for its detail and its logs.

The store only reads rows and records here; `runwatch.analysis.detail` turns them into
the run detail the CLI and the API show.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Row, select

from runwatch.rundir.format import levels_from
from runwatch.store import queries as q
from runwatch.store import schema as s
from runwatch.store.jobs import job_row
from runwatch.store.keys import KeyInfo, run_keys


@dataclass(frozen=True)
class RunRecords:
    """A run's row and the records of it that its detail is made from."""

    row: Row[Any]
    events: list[dict[str, Any]]
    keys: list[KeyInfo]
    checkpoints: list[Row[Any]]
    problems: list[str]
    process_gone: bool
    job: dict[str, Any] | None  # its row in the queue (store.jobs.job_row); None by hand
    # the runs it started from, nearest first (`init_from`: see `parent_runs`)
    parents: tuple[Row[Any], ...] = ()
    # each parent's events and job row (None: started by hand), in `parents`' order: what
    # its cost is made from, for the chain's cost (a pipeline's stages and total)
    parent_records: tuple[tuple[list[dict[str, Any]], dict[str, Any] | None], ...] = ()


def read_run(conn: Connection, row: Row[Any], gone: bool,
             projects: frozenset[str] | None = None) -> RunRecords:
    """The records of the run in `row`; `gone`: whether its process is gone, judged by
    the caller with `row` (cli Context.current_run, server/settle.py). Its parents are
    looked for among the runs of `projects` only (None: every run), the runs its reader
    may see."""
    job = job_row(conn, row.pk)
    parents = parent_runs(conn, row, job, projects)
    return RunRecords(row, q.events(conn, row.pk), run_keys(conn, row.pk),
                      checkpoint_rows(conn, row.pk), q.problems(conn, row.pk),
                      gone, job, parents,
                      tuple((q.events(conn, p.pk), job_row(conn, p.pk)) for p in parents))


INIT_FROM = "init_from:"
MAX_ANCESTORS = 8
# a checkpoint file given as init_from lies this many folders below its run's at most
CHECKPOINT_DEPTH = 3


def init_from(base_model: str | None) -> str | None:
    """The run folder or checkpoint file a run started from, when its base model says
    `init_from:<path>` (as the recipes record a model started from an earlier run)."""
    if base_model and base_model.startswith(INIT_FROM):
        return base_model[len(INIT_FROM):] or None
    return None


def parent_runs(conn: Connection, row: Row[Any], job: dict[str, Any] | None,
                projects: frozenset[str] | None = None) -> tuple[Row[Any], ...]:
    """The indexed runs `row` started from, nearest first: its `init_from` run, that run's,
    and so on (a cycle or a run not in the index ends the chain). Only runs of `projects`
    (None: any) are found: a manifest names any path, and the run a path leads to must not
    tell a reader of one project the id, name or base model of another's (a run outside
    them ends the chain as one not in the index does)."""
    chain: list[Row[Any]] = []
    seen = {row.pk}
    while len(chain) < MAX_ANCESTORS:
        parent = _parent_run(conn, row, job if not chain else None, projects)
        if parent is None or parent.pk in seen:
            break
        chain.append(parent)
        seen.add(parent.pk)
        row = parent
    return tuple(chain)


def _parent_run(conn: Connection, row: Row[Any], job: dict[str, Any] | None,
                projects: frozenset[str] | None) -> Row[Any] | None:
    """The indexed run of `projects` (None: any) whose folder holds `row`'s init_from path.

    A relative path is read from the job's working folder, else from the folder that holds
    the runs folder (`runs/<run>`) or the runs folder itself; a checkpoint file is looked
    for in the folders above it. Failing an exact folder, a run of the same runs folder
    with the same folder name is taken (the path was relative to a folder not recorded)."""
    ref = init_from(row.base_model)
    if ref is None:
        return None
    path = Path(ref).expanduser()
    runs_folder = Path(row.dir).parent if row.dir else None
    bases: list[Path] = []
    if not path.is_absolute():
        if job and job.get("cwd"):
            bases.append(Path(job["cwd"]))
        if runs_folder is not None:
            bases += [runs_folder.parent, runs_folder]
    candidates = [path] if path.is_absolute() else [b / path for b in bases]
    folders: list[str] = []
    names: list[str] = []
    for cand in candidates:
        cand = cand.resolve()
        for folder in (cand, *list(cand.parents)[:CHECKPOINT_DEPTH]):
            folders.append(str(folder))
            names.append(folder.name)
    c = s.runs.c
    visible = select(s.runs)
    if projects is not None:
        visible = visible.where(c.project.in_(sorted(projects)))
    if folders:
        found = conn.execute(visible.where(c.dir.in_(folders))).all()
        if found:
            return min(found, key=lambda r: folders.index(r.dir))
    if runs_folder is None:
        return None
    near = [str(runs_folder / n) for n in dict.fromkeys(names) if n]
    found = conn.execute(visible.where(c.dir.in_(near))).all() if near else []
    return min(found, key=lambda r: near.index(r.dir)) if found else None


def checkpoint_rows(conn: Connection, run_pk: int) -> list[Row[Any]]:
    """A run's checkpoint rows, oldest first."""
    c = s.checkpoints.c
    return list(conn.execute(select(s.checkpoints).where(c.run_pk == run_pk).order_by(c.seq)))


def log_rows(conn: Connection, run_pk: int, level: str | None = None,
             before_seq: int | None = None, limit: int = 200) -> list[Row[Any]]:
    """A run's log rows newest first, from `level` up (one of LOG_LEVELS), below `before_seq`."""
    c = s.logs.c
    stmt = select(s.logs).where(c.run_pk == run_pk)
    if level:
        stmt = stmt.where(c.level.in_(levels_from(level)))
    if before_seq is not None:
        stmt = stmt.where(c.seq < before_seq)
    return list(conn.execute(stmt.order_by(c.seq.desc()).limit(limit)).all())
