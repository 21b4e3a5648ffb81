"""`runwatch runs tensorboard RUN`: the run as TensorBoard event files (runwatch.interop.
tensorboard writes them), once or following the run until it ends."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from runwatch.cli.context import INDEX_DIRNAME, Context, open_context
from runwatch.cli.inspect_cmds import flatten
from runwatch.cli.output import fail, line
from runwatch.cli.runs import DbOpt, DirOpt, RunArg, resolve_or_exit
from runwatch.rundir.format import TERMINAL_PHASES
from runwatch.store import queries as q

INSTALL_HINT = "install the extra: pip install 'runwatch[tensorboard]'"


def tensorboard_cmd(
    run: RunArg, directory: DirOpt = None, db: DbOpt = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="Folder for the event files (default: DIR/.runwatch/tensorboard/"
        "RUN_ID).", show_default=False)] = None,
    follow: Annotated[bool, typer.Option(
        "--follow", help="Keep adding new points until the run ends (Ctrl-C stops).")
    ] = False,
    interval: Annotated[float, typer.Option(
        "--interval", min=0.05, help="With --follow: seconds between looks for new points.")
    ] = 2.0,
    rollouts: Annotated[int, typer.Option(
        "--rollouts", min=0, help="Rollouts shown as text for each kept step.")] = 8,
) -> None:
    """Write a run's metrics (reward terms included), its config for the HParams dashboard
    and its rollouts as TensorBoard event files, and print the command that shows them."""
    try:
        from runwatch.interop.tensorboard import Export, ExportError
    except ImportError as exc:
        raise fail(f"TensorBoard export needs tensorboardX, which is not installed "
                   f"({exc.name} is missing)", [INSTALL_HINT]) from exc
    ctx = open_context(directory, db, read_only=True)
    with ctx.engine.connect() as conn:
        row = resolve_or_exit(conn, run)
    target = out or ctx.directory / INDEX_DIRNAME / "tensorboard" / row.run_id
    try:
        export = Export(target, text_rollouts=rollouts)
    except ExportError as exc:
        raise fail(str(exc)) from exc
    try:
        with ctx.engine.connect() as conn:
            row = resolve_or_exit(conn, row.run_id)
            export.sync(conn, row)
            export.write_hparams(_config_of(row), sorted(export.tags))
        line(f"wrote {export.points} points of {len(export.tags)} scalars and "
             f"{len(export.rollout_steps)} steps of rollouts of {row.name} to {target}")
        line("view them: tensorboard --logdir ", shlex.quote(str(target)))
        sys.stdout.flush()
        if follow and row.status not in TERMINAL_PHASES:
            row = _follow(ctx, export, row, interval)
        elif row.status not in TERMINAL_PHASES:
            line(f"{row.name} is {row.status}: --follow keeps adding what it logs until it ends")
        if row.status in TERMINAL_PHASES:
            export.end(row.status)
    finally:
        export.close()


def _follow(ctx: Context, export: Any, row: Any, interval: float) -> Any:
    """Add what the run logs until it ends, its process is gone, or Ctrl-C; its last row."""
    line(f"following {row.name} until it ends (Ctrl-C stops)")
    sys.stdout.flush()
    try:
        while row.status not in TERMINAL_PHASES and not q.process_gone(row):
            time.sleep(interval)
            ctx.refresh()
            with ctx.engine.connect() as conn:
                row = resolve_or_exit(conn, row.run_id)
                added = export.sync(conn, row)
            if added:
                line(f"+{added} points (step {row.observed_step})")
                sys.stdout.flush()
    except KeyboardInterrupt:
        line(f"stopped following; {export.points} points written")
        return row
    if row.status in TERMINAL_PHASES:
        line(f"{row.name} ended {row.status}; {export.points} points written")
    else:
        line(f"{row.name}'s training process is gone; {export.points} points written")
    return row


def _config_of(row: Any) -> dict[str, Any]:
    """The run's config.yaml flattened (`optim.beta1`); empty when it has none."""
    try:
        data = yaml.safe_load(row.config) if row.config else None
    except yaml.YAMLError:
        return {}
    if isinstance(data, dict):
        return flatten(data)
    return {} if data is None else {"config": data}
