"""`runwatch runs list`: the runs of the local index (read with plain SQL, without
SQLAlchemy: store/runrows.py) or of a team server, newest first."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from runwatch.analysis.views import run_summary
from runwatch.cli.context import open_reader, runs_dir
from runwatch.cli.options import DbOpt, DirOpt, JqOpt, OutOpt, RawOpt, ServerOpt, TokenOpt
from runwatch.cli.output import Output, emit, fail, fmt_duration, line, print_table
from runwatch.cli.remote import remote_for
from runwatch.rundir.format import RECORDS_LOST, phase_named
from runwatch.store.runrows import list_runs, process_gone


def _status_text(d: dict[str, Any]) -> str:
    if d["process_gone"]:
        return f"{d['status']} (process gone)"
    if RECORDS_LOST in (d["reason"] or ""):
        return f"{d['status']} (records lost)"  # its reason, in -o wide, says how many
    return str(d["status"])


def _listed(directory: Path | None, db: str | None, search: str | None, project: str | None,
            status: str | None, limit: int) -> tuple[list[Any], list[bool]]:
    """The runs the list shows, from the index brought up to date, and whether each one's
    process is gone."""
    with open_reader(directory, db, saved=False) as (reader, _):
        rows = list_runs(reader, search, project, status, limit)
    return rows, [process_gone(r) for r in rows]


def list_cmd(
    directory: DirOpt = None, db: DbOpt = None, output: OutOpt = Output.table, jq: JqOpt = None,
    raw: RawOpt = False,
    search: Annotated[str | None, typer.Option(help="Match name, id, status, model, dataset, "
                                               "trainer or backend.")] = None,
    project: Annotated[str | None, typer.Option(help="Only this project.")] = None,
    status: Annotated[str | None, typer.Option(help="Only runs in this phase.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many runs.")] = 100,
    server: ServerOpt = None, token: TokenOpt = None,
) -> None:
    """List runs, newest first."""
    if status:
        try:
            status = phase_named(status)
        except ValueError as exc:
            raise fail(f"--status {exc}") from None
    remote = remote_for(server, token, directory, db)
    # one run past the limit is read to tell a cut list from one that ends there
    if remote is not None:
        data = remote.runs(search, project, status, limit + 1)
        where = remote.url
    else:
        rows, gone = _listed(directory, db, search, project, status, limit + 1)
        dead = {r.run_id for r, g in zip(rows, gone, strict=True) if g}
        if dead:
            # a run that ended as its process died may have written its end after the
            # read: only a read made after its death was seen can say it never ended (and
            # only of the runs seen dead before it)
            rows, gone = _listed(directory, db, search, project, status, limit + 1)
            gone = [g and r.run_id in dead for r, g in zip(rows, gone, strict=True)]
        data = [run_summary(r, gone=g) for r, g in zip(rows, gone, strict=True)]
        where = str(runs_dir(directory))
    cut = len(data) > limit
    data = data[:limit]

    def table(wide: bool) -> None:
        cols = ["NAME", "ID", "STATUS", "METHOD", "MODEL", "STEP", "DURATION"]
        if wide:
            cols += ["PROJECT", "DATASET", "TRAINER", "REASON"]
        # a name runs of several projects bear is shown as PROJECT/NAME, the reference the
        # other commands take for one of them (a bare name of several is refused there)
        seen: dict[str, set[Any]] = {}
        for d in data:
            seen.setdefault(d["name"], set()).add(d.get("project"))
        rows = []
        for d in data:
            shown = (f"{d['project']}/{d['name']}" if len(seen[d["name"]]) > 1 and d.get("project")
                     else d["name"])
            row = [shown, d["run_id"][:8], _status_text(d), d["method"], d["base_model"],
                   d["observed_step"], fmt_duration(d["duration_s"])]
            if wide:
                row += [d["project"], d["dataset"], d["trainer"], d["reason"]]
            rows.append(row)
        print_table(cols, rows, wide=wide, drop=("DURATION", "METHOD", "MODEL"))
        if cut:
            line(f"showing the newest {len(data)} runs; more match "
                 "(--limit N shows more; --search, --project or --status narrows)")
        if not data:
            asked = [f"--{name} {value}" for name, value in
                     (("search", search), ("project", project), ("status", status)) if value]
            line("no runs in ", where, *((" match ", " ".join(asked)) if asked else ()))

    emit(data, output, jq, table, raw)
