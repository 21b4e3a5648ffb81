"""`runwatch runs tensorboard RUN`: the run as TensorBoard event files (runwatch.interop.
tensorboard writes them), and TensorBoard started on them on this machine, following the
run while it trains; or, with --no-start, the files alone (once, or --follow)."""

from __future__ import annotations

import ctypes
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from runwatch.cli.context import INDEX_DIRNAME, Context, open_context
from runwatch.cli.inspect_cmds import flatten
from runwatch.cli.options import DbOpt, DirOpt, RunArg, resolve_or_exit
from runwatch.cli.output import counted, fail, line
from runwatch.rundir.configtext import load_config
from runwatch.rundir.format import TERMINAL_PHASES

INSTALL_HINT = "install the extra: pip install 'runwatch[tensorboard]'"
PR_SET_PDEATHSIG = 1  # linux/prctl.h


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
    start: Annotated[bool, typer.Option(
        "--start/--no-start", help="Start TensorBoard on this machine (127.0.0.1 only) and "
        "keep adding what the run logs until Ctrl-C; --no-start writes the files and prints "
        "the command that shows them.")] = True,
    port: Annotated[int | None, typer.Option(
        "--port", min=0, max=65535, help="TensorBoard's port (default: 6006, or the next "
        "free one; 0: any free port).", show_default=False)] = None,
) -> None:
    """Write a run's metrics (reward terms included), its config for the HParams dashboard
    and its rollouts as TensorBoard event files, and start TensorBoard on them, following
    the run while it trains (--no-start: print the command that shows them)."""
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
        line(f"wrote {counted(export.points, 'point')} of {counted(len(export.tags), 'scalar')} "
             f"and {counted(len(export.rollout_steps), 'step')} of rollouts of {row.name} to "
             f"{target}")
        if start:
            _serve(ctx, export, row, target, port, interval)
            return
        line("view them: tensorboard --logdir ", shlex.quote(str(target)))
        sys.stdout.flush()
        if follow and row.status not in TERMINAL_PHASES:
            row, _ = _follow(ctx, export, row, interval)
        elif row.status not in TERMINAL_PHASES:
            line(f"{row.name} is {row.status}: --follow keeps adding what it logs until it ends")
        if row.status in TERMINAL_PHASES:
            export.end(row.status)
    finally:
        export.close()


def _serve(ctx: Context, export: Any, row: Any, target: Path, port: int | None,
           interval: float) -> None:
    """Start TensorBoard on `target`, follow the run while it trains, and keep TensorBoard
    serving until Ctrl-C (which stops it)."""
    board, url = _start_tensorboard(target, port)
    # Ctrl-C stops it from the moment that is said, the flush of the saying included (a
    # flush runs the signal handlers once it has written: the reader may already have sent
    # the signal)
    try:
        line(f"TensorBoard: {url} (Ctrl-C stops it; it has no authentication, so it "
             "listens on this machine only)")
        sys.stdout.flush()
        stopped = False
        if row.status not in TERMINAL_PHASES:
            row, stopped = _follow(ctx, export, row, interval)
        if row.status in TERMINAL_PHASES:
            export.end(row.status)
        if not stopped:
            code = board.wait()
            raise fail(f"TensorBoard ended by itself (exit status {code})")
        line("stopped TensorBoard")
    except KeyboardInterrupt:
        line("stopped TensorBoard")
    finally:
        _stop(board)


def _start_tensorboard(logdir: Path, port: int | None) -> tuple[subprocess.Popen[str], str]:
    """TensorBoard (this installation's) serving `logdir` on 127.0.0.1, and its address once
    it listens."""
    try:
        import tensorboard  # noqa: F401
    except ImportError as exc:
        raise fail("starting TensorBoard needs the tensorboard package, which is not "
                   "installed", [INSTALL_HINT, "or --no-start writes the files alone"]) from exc
    board = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host",
         "127.0.0.1", "--port", "default" if port is None else str(port),
         # new points show within a second (TensorBoard's own default looks every 5 s)
         "--reload_interval", "1"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, preexec_fn=_dies_with_this_process())
    assert board.stderr is not None
    said: list[str] = []
    try:
        for text_line in board.stderr:
            found = re.search(r"TensorBoard \S+ at (http://\S+?)/? ", text_line)
            if found:
                url = found.group(1) + "/"
                break
            said.append(text_line.rstrip())
        else:
            board.wait()
            raise fail(f"TensorBoard did not start (exit status {board.returncode})",
                       said[-5:])
    except BaseException:
        _stop(board)
        raise
    # what it says later is read and dropped, so a full pipe never stops it
    threading.Thread(target=board.stderr.read, daemon=True).start()
    return board, url


def _dies_with_this_process() -> Callable[[], None] | None:
    """What TensorBoard's process runs before it starts so that it ends when this one dies,
    even of SIGKILL, which leaves no chance to stop it (Linux: SIGTERM from the kernel, by
    PR_SET_PDEATHSIG); None elsewhere, where only Ctrl-C and the command's own end stop it."""
    if sys.platform != "linux":
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not after fork
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # this process died before the line above
            os.kill(os.getpid(), signal.SIGTERM)

    return arm


def _stop(board: subprocess.Popen[str]) -> None:
    if board.poll() is None:
        board.terminate()
        try:
            board.wait(timeout=10)
        except subprocess.TimeoutExpired:
            board.kill()
            board.wait()


def _follow(ctx: Context, export: Any, row: Any, interval: float) -> tuple[Any, bool]:
    """Add what the run logs until it ends, its process is gone, or Ctrl-C: its last row,
    and whether Ctrl-C stopped it."""
    try:  # from the saying on (its flush can raise the Ctrl-C the reader sent at once)
        line(f"following {row.name} until it ends (Ctrl-C stops)")
        sys.stdout.flush()
        gone = False
        while row.status not in TERMINAL_PHASES and not gone:
            time.sleep(interval)
            ctx.refresh()
            row, gone = ctx.current_run(row.run_id)
            with ctx.engine.connect() as conn:
                added = export.sync(conn, row)
            if added:
                line(f"+{added} points (step {row.observed_step})")
                sys.stdout.flush()
    except KeyboardInterrupt:
        line(f"stopped following; {export.points} points written")
        return row, True
    if row.status in TERMINAL_PHASES:
        line(f"{row.name} ended {row.status}; {export.points} points written")
    else:
        line(f"{row.name}'s training process is gone; {export.points} points written")
    sys.stdout.flush()
    return row, False


def _config_of(row: Any) -> dict[str, Any]:
    """The run's config.yaml flattened (`optim.beta1`); empty when it has none."""
    try:
        data = load_config(row.config) if row.config else None
    except yaml.YAMLError:
        return {}
    if isinstance(data, dict):
        return flatten(data)
    return {} if data is None else {"config": data}

