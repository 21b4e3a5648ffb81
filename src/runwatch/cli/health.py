"""`runwatch runs health RUN`: the findings of the health rules on one run.

Registered in cli/main.py as `runs health` and `thresholds`. With `--fail-on` the command
exits 1 when a finding (open or resolved, listed or merged into another's incident) is at
or above that severity, so a script can gate on a run's health.
"""

from __future__ import annotations

import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.text import Text

from runwatch.cli.context import open_context, runs_dir
from runwatch.cli.options import (
    DbOpt,
    DirOpt,
    JqOpt,
    OutOpt,
    RawOpt,
    RunArg,
    ServerOpt,
    TokenOpt,
    resolve_or_exit,
)
from runwatch.cli.output import Output, console, emit, fail, line, print_table, text
from runwatch.cli.remote import remote_for
from runwatch.health import store as health_store
from runwatch.health.engine import Engine
from runwatch.health.rules.base import SEVERITY_RANK
from runwatch.health.thresholds import NONE, ThresholdError, load_yaml
from runwatch.rundir import thresholdfiles
from runwatch.rundir.format import ACTIVE_PHASES, RunDirError

EXIT_UNHEALTHY = 1
STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


class FailOn(StrEnum):
    warning = "warning"
    critical = "critical"


def health_command(
    run: RunArg,
    directory: DirOpt = None,
    db: DbOpt = None,
    output: OutOpt = Output.table,
    jq: JqOpt = None,
    raw: RawOpt = False,
    fail_on: Annotated[FailOn | None, typer.Option(
        "--fail-on", help="Exit 1 if any finding is at least this severe (warning|critical).")
    ] = None,
    open_only: Annotated[bool, typer.Option("--open", help="Only findings still open.")
                         ] = False,
    thresholds: Annotated[Path | None, typer.Option(
        "--thresholds", help="Evaluate with these overrides (YAML, see docs/health.md) "
        "instead of the project's; nothing is stored.")] = None,
    server: ServerOpt = None, token: TokenOpt = None,
) -> None:
    """What the health rules found in a run: severity, steps, values and what to change."""
    remote = remote_for(server, token, directory, db)
    if remote is not None:
        if thresholds is not None:
            raise fail("--thresholds evaluates the run's points here, from a local index; "
                       "it does not work with --server", ["run it where the run's folder or "
                                                         "index is, with --dir or --db"])
        detail = remote.detail(run)
        data = {"run_id": detail["run_id"], "name": detail["name"],
                "status": detail["state"]["phase"]}
        findings = remote.findings(detail["run_id"])
    else:
        ctx = open_context(directory, db, read_only=True)
        with ctx.engine.begin() as conn:
            row = resolve_or_exit(conn, run)
            data = {"run_id": row.run_id, "name": row.name, "status": row.status}
            if thresholds is not None:
                findings = _what_if(conn, row, thresholds)
            else:
                health_store.ensure_current(conn, row.pk)
                findings = health_store.health_for_run(conn, row.pk)
    if open_only:
        findings = [f for f in findings if f["status"] == "open"]
    data["findings"] = findings
    name = data["name"]

    def table(wide: bool) -> None:
        if not findings:
            line(name, ": no findings")
            return
        rows = []
        for f in findings:
            steps = f"{f['first_step']}–{f['last_step']}" if f["first_step"] != f["last_step"] \
                else str(f["first_step"])
            severity = text(f["severity"], STYLE.get(f["severity"], ""))
            if wide:
                rows.append([severity, f["status"], steps, f["rule_id"], f["message"],
                             f["advice"]])
            else:  # the status under the severity, the advice under the message: 80 columns
                rows.append([Text.assemble(severity, "\n", text(f["status"], "dim")), steps,
                             f["rule_id"], Text.assemble(text(f["message"]), "\n",
                                                         text("What to do: ", "bold"),
                                                         text(f["advice"]))])
        cols = (["SEVERITY", "STATUS", "STEPS", "RULE", "MESSAGE", "ADVICE"] if wide
                else ["SEVERITY", "STEPS", "RULE", "FINDING"])
        print_table(cols, rows, title=f"health of {name}", wide=wide,
                    prose=("FINDING",))

    emit(data, output, jq, table, raw)
    if fail_on is not None and worst(findings) >= SEVERITY_RANK[fail_on.value]:
        raise typer.Exit(EXIT_UNHEALTHY)


def thresholds_command(
    project: Annotated[str, typer.Argument(help="Project whose thresholds to show or set.")],
    file: Annotated[Path | None, typer.Argument(help="YAML overrides to store (see "
                                                "docs/health.md); omit to show the current "
                                                "ones.")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the project's overrides.")
                     ] = False,
    directory: DirOpt = None,
    db: DbOpt = None,
) -> None:
    """Show or set a project's health thresholds; setting re-evaluates its runs.

    They are kept in the runs folder (.runwatch/thresholds/PROJECT.yaml), which an index
    made again reads back, and in the index; an index with no runs folder (a team server's
    PostgreSQL) is their only store."""
    try:
        overrides = NONE if clear else load_yaml(file) if file is not None else None
        path = thresholdfiles.path_of(runs_dir(directory), project)
    except (ThresholdError, RunDirError) as exc:
        raise fail(str(exc), ["see docs/health.md for the file's shape and the rule ids"]
                   ) from exc
    # showing reads only the folder's thresholds files, not its runs
    ctx = open_context(directory, db, refresh=overrides is not None)
    if overrides is None:
        # a file edited by hand since the last pass is read now; one that is refused says
        # so each time, since what is shown is then not what the file says
        for problem in health_store.sync_thresholds(ctx.engine, ctx.directory, every=True):
            console(stderr=True).print(f"warning: {problem}", markup=False)
        with ctx.engine.connect() as conn:
            current = health_store.get_thresholds(conn, project).to_dict()
        console().print(yaml.safe_dump(current, sort_keys=True).rstrip(), markup=False)
        return
    written = None
    if ctx.directory.is_dir():
        try:
            written = thresholdfiles.write(ctx.directory, project, overrides.to_dict())
        except OSError as exc:
            raise fail(f"cannot write {path} ({exc.strerror or exc}): nothing was stored",
                       ["make the runs folder writable, or pass --dir with the folder "
                        "the index is of"]) from exc
    with ctx.engine.begin() as conn:
        health_store.set_thresholds(conn, project, overrides.to_dict(),
                                    updated_ts=written.mtime if written else None)
        count = health_store.refresh_project(conn, project)
    where = (f"in {written.path} and the index" if written else
             f"in the index only (there is no runs folder {ctx.directory} to keep them in: "
             "an index made again will not have them)")
    console().print(f"{'cleared' if clear else 'stored'} the health thresholds of {project} "
                    f"{where}; re-evaluated {count} runs", markup=False)


def worst(findings: list[dict[str, Any]]) -> int:
    """Rank of the most severe finding, each one merged into an incident included (-1 when
    there is none): a server that lists a group at its lead's severity cannot hide a
    warning that resolved under an open info."""
    return max((SEVERITY_RANK.get(item["severity"], 0) for f in findings
                for item in [f, *(f.get("evidence") or {}).get("incident", [])]), default=-1)


def _what_if(conn: Any, row: Any, path: Path) -> list[dict[str, Any]]:
    try:
        overrides = load_yaml(path)
    except ThresholdError as exc:
        raise fail(str(exc), ["see docs/health.md for the file's shape and the rule ids"]) from exc
    settings = health_store.settings_from_config(row.config)
    engine = Engine(row.method, settings, overrides)
    cols, _ = health_store.stored_points(conn, row.pk, -1)
    fed = engine.feed(cols)
    # a running run that has gone silent, judged by these overrides too (run.stalled is a
    # live condition the stored findings check when read; the what-if skipped it)
    fed += engine.check_stall(time.time(), running=row.status in ACTIVE_PHASES)
    return health_store.listed([health_store.finding_json(f.to_dict()) for f in fed])
