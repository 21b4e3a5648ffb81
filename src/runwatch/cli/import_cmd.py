"""`runwatch import SOURCE`: bring another tool's log into the runs folder as a run.

Mount with `app.command("import")(import_command)`. Reads a TRL `trainer_state.json`, a
verl or tinker-cookbook `metrics.jsonl`, a TensorBoard event folder, a CSV of per-step
metrics, or a W&B history export (CSV or JSON lines); writes a run directory, indexes it
and evaluates the health rules on it. A W&B offline run is refused, saying how to export
its history (ingest/importers/wandb_offline.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from runwatch.cli.context import open_context, runs_dir
from runwatch.cli.options import DbOpt, DirOpt, OutOpt
from runwatch.cli.output import Output, counted, emit, fail, line, runwatch_command
from runwatch.health import store as health_store
from runwatch.health.engine import METHOD_FAMILIES
from runwatch.ingest.importers import FORMATS, SourceError, read_source, write_run_dir
from runwatch.ingest.importers.wandb_offline import refuse_offline_run
from runwatch.rundir.format import RunDirError
from runwatch.store import queries as q


def import_command(
    source: Annotated[Path, typer.Argument(help="trainer_state.json, metrics.jsonl, a "
                                           "TensorBoard event folder, a CSV of per-step "
                                           "metrics, a W&B history export, or `runwatch "
                                           "runs metrics -o json` output.")],
    directory: DirOpt = None,
    db: DbOpt = None,
    name: Annotated[str | None, typer.Option("--name", help="Run name (default: from the "
                                             "source's path).")] = None,
    project: Annotated[str, typer.Option("--project", help="Project of the run.")
                       ] = "default",
    method: Annotated[str | None, typer.Option("--method", help="sft, dpo, grpo, or one of "
                                               "their kin the health rules know (ppo, orpo, "
                                               "kto, ...; default: guessed from the metric "
                                               "names).")] = None,
    kind: Annotated[str, typer.Option("--format", help="auto, trl, jsonl, tensorboard, csv, "
                                      "wandb or runwatch.")] = "auto",
    step_column: Annotated[str | None, typer.Option(
        "--step-column", help="CSV/W&B column holding the step (default: step, global_step, "
        "train/global_step, _step, Step or iteration, else the row number).")] = None,
    output: OutOpt = Output.table,
) -> None:
    """Import another framework's training log as a finished run."""
    if kind not in FORMATS:
        raise fail(f"--format {kind!r} is not one of {', '.join(FORMATS)}")
    if method is not None and method.lower() not in METHOD_FAMILIES:
        # the method picks the health rules the run is judged by: one they do not know
        # would judge it by none of a method's own rules, and say nothing of it
        raise fail(f"--method {method!r} is not one the health rules know: "
                   f"{', '.join(sorted(METHOD_FAMILIES))}; leave it out to guess it from "
                   "the metric names")
    folder = runs_dir(directory)
    try:
        refuse_offline_run(source, kind)
        imported = read_source(source, kind, step_column)
        run_name = name or default_name(source)
        folder.mkdir(parents=True, exist_ok=True)
        run_dir = write_run_dir(imported, folder, run_name, project, method)
    except (SourceError, RunDirError) as exc:
        raise fail(str(exc)) from exc
    ctx = open_context(folder, db)
    with ctx.engine.begin() as conn:
        row = q.resolve_run(conn, run_dir.name)
        health_store.ensure_current(conn, row.pk)
        findings = health_store.health_for_run(conn, row.pk)
    steps = len({r["step"] for r in imported.records})
    data = {"run_id": row.run_id, "name": row.name, "dir": str(run_dir),
            "trainer": imported.trainer, "method": row.method, "steps": steps,
            "findings": len(findings), "notes": imported.notes}

    def table(wide: bool) -> None:
        line("imported ", str(source), " (", imported.trainer, ", ", row.method, ") as run ",
             row.name, f": {counted(steps, 'step')}, "
             f"{counted(len(findings), 'health finding')} (",
             runwatch_command("runs", "health", row.name, folder=directory, db=db), ")")
        for note in imported.notes:
            line("note: ", note)

    emit(data, output, None, table)


# File names that say what a log is, not which run: the run is named after the folder.
GENERIC_STEMS = ("trainer_state", "metrics", "progress", "history", "wandb-history",
                 "wandb_export", "train_log", "training_log")


def default_name(source: Path) -> str:
    """A run name from the source path: its folder (or file stem), made safe. The folder
    of a relative path (`history.csv`, `.`) is the one it names, not an empty name."""
    source = Path(os.path.abspath(source))
    base = source.name if source.is_dir() else (
        source.parent.name if source.stem in GENERIC_STEMS else source.stem)
    safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in base).strip(".-")
    return f"imported-{safe or 'run'}"

