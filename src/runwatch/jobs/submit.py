"""Submit a job: make its run folder (manifest, job.json, a QUEUED event) and index it.

The run is QUEUED in every surface as soon as `submit` returns; a worker claims it from
the index (runwatch.store.jobs). The folder is made exclusively, so a name already in
use is refused, and whatever submit made is removed again when a later step fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, select

from runwatch.ingest.indexer import Indexer, IndexReport
from runwatch.jobs.spec import JobSpec, write_spec
from runwatch.rundir import format as fmt
from runwatch.rundir.append import locked, write_events
from runwatch.rundir.atomic import write_atomic
from runwatch.rundir.jsonl import dumps_line
from runwatch.rundir.manifest import build_manifest
from runwatch.store import schema as s
from runwatch.store.runs import delete_run, name_taken


class SubmitError(ValueError):
    """A job cannot be submitted; `field` names the input at fault ("name", "project"…)
    when there is one, and the message says what to do."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class SubmittedRun:
    """The run a job became: QUEUED, indexed, in `dir`."""

    run_pk: int
    run_id: str
    name: str
    project: str
    dir: Path
    status: str = "QUEUED"


def submit(engine: Engine, runs_dir: Path, spec: JobSpec, name: str | None = None,
           project: str = "default", method: str | None = None, *,
           group: str | None = None, tags: Sequence[str] = (), base_model: str | None = None,
           dataset: str | None = None) -> SubmittedRun:
    """Make run `name` (by default `<recipe or job>-<time>-<4 hex>`) in `runs_dir` for
    `spec`, QUEUED as attempt 1, and index it; `method` defaults to the spec's recipe.

    Raises SubmitError for a bad or taken name; on any error nothing is left behind.
    """
    try:
        fmt.validate_name(project, "project name")
    except fmt.RunDirError as exc:
        raise SubmitError(str(exc), "project") from None
    if name is None:
        name = fmt.default_run_name(spec.recipe or "job")
    try:
        fmt.validate_name(name)
    except fmt.RunDirError as exc:
        raise SubmitError(str(exc), "name") from None
    runs_dir = Path(runs_dir)
    run_dir = runs_dir / name
    taken = SubmitError(f"a run named {name!r} already exists in {runs_dir}: choose another "
                        "name", "name")
    if run_dir.exists():
        raise taken
    with engine.connect() as conn:
        # a run of this project on the index by that name, or with that id, elsewhere than
        # this folder (one sent over HTTP, one of another runs folder): a name would then
        # find two runs; another project's names are its own, and not told
        if name_taken(conn, name, "", project):
            raise SubmitError(f"a run named {name!r} already exists on this index (sent to "
                              "it, or in another runs folder): choose another name", "name")
    runs_dir.mkdir(parents=True, exist_ok=True)
    try:
        run_dir.mkdir()
    except FileExistsError:
        raise taken from None
    now = time.time()
    manifest = build_manifest(name, project, group=group, tags=tags,
                              method=method or spec.recipe, base_model=base_model,
                              dataset=dataset, created_at=now)
    run_pk: int | None = None
    try:
        with locked(run_dir, wait_s=0):
            # the manifest first: a folder with other files but no manifest is reported
            write_atomic(run_dir / fmt.MANIFEST, dumps_line(manifest))
            write_spec(run_dir, dataclasses.replace(spec, submitted_at=now))
            write_events(run_dir, [{"ts": now, "phase": "QUEUED", "attempt": 1}])
        run_pk = Indexer(engine, runs_dir).index_run(run_dir, IndexReport())
        if run_pk is None:
            raise SubmitError(f"the new run {run_dir} was not indexed (its manifest was "
                              "refused), so nothing was submitted")
    except BaseException:
        _undo(engine, run_dir, manifest["run_id"])
        raise
    return SubmittedRun(run_pk=run_pk, run_id=manifest["run_id"], name=name, project=project,
                        dir=run_dir.resolve())


def _undo(engine: Engine, run_dir: Path, run_id: str) -> None:
    """Remove the folder submit made, and the run's rows if it was indexed."""
    shutil.rmtree(run_dir, ignore_errors=True)
    with contextlib.suppress(Exception), engine.begin() as conn:
        pk = conn.execute(select(s.runs.c.pk).where(s.runs.c.run_id == run_id)).scalar()
        if pk is not None:
            delete_run(conn, pk)
