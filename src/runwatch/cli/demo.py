"""`runwatch demo`: train the SFT, GRPO and DPO recipes for real while the web app shows them.

The recipes run as subprocesses (as a user would start them), the web app is served
from a `runwatch ui` subprocess over the same folder, and the demo ends with the runs'
summary and health, so every part of runwatch is seen working on a laptop CPU.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from runwatch.cli.context import open_context
from runwatch.cli.output import console, fail

# SFT on 400 rows leaves 2-digit addition imperfect (about 0.82 greedy accuracy), so
# GRPO, with its defaults (the settings docs/recipes.md measured), has something to improve.
SFT_ARGS = ["n_train=400", "n_val=1000", "max_steps=250", "val_interval=125"]
GRPO_ARGS = ["wandb_project=None", "n_val=1000", "max_sample_tokens=6"]


def _free_port(preferred: int) -> int:
    for port in (preferred, 0):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise fail("no free port on 127.0.0.1 for the web app")


def _recipe(method: str, args: list[str]) -> None:
    console().print(f"\n[bold]$ runwatch recipes {method} {' '.join(args)}[/]", markup=True)
    proc = subprocess.run([sys.executable, "-m", "runwatch", "recipes", method, *args])
    if proc.returncode != 0:
        raise fail(f"the {method} recipe failed (exit {proc.returncode}); its run directory "
                   "and `runwatch runs get` say why")


def demo_cmd(
    directory: Annotated[Path, typer.Option("--dir", help="Folder to record runs into.")
                         ] = Path("runs"),
    port: Annotated[int, typer.Option(help="Port for the web app (another if busy).")] = 8765,
    serve: Annotated[bool, typer.Option(help="Serve the web app while the recipes train.")
                     ] = True,
    keep_serving: Annotated[bool, typer.Option(
        help="Keep serving after the recipes finish, until Ctrl-C.")] = False,
) -> None:
    """Train SFT, then GRPO and DPO from its checkpoint, while the web app shows them live."""
    c = console()
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    sft, grpo, dpo = (f"demo-{m}-{stamp}" for m in ("sft", "grpo", "dpo"))
    ui = None
    if serve:
        port = _free_port(port)
        ui = subprocess.Popen([sys.executable, "-m", "runwatch", "ui", str(directory),
                               "--port", str(port)])
        c.print(f"web app: http://127.0.0.1:{port}/runs  (live while the recipes train)")
    try:
        _recipe("sft", [f"name={sft}", f"runs_dir={directory}", *SFT_ARGS])
        sft_dir = str(directory / sft)
        _recipe("grpo", [f"name={grpo}", f"runs_dir={directory}", f"init_from={sft_dir}",
                         *GRPO_ARGS])
        _recipe("dpo", [f"name={dpo}", f"runs_dir={directory}", f"init_from={sft_dir}"])
        ctx = open_context(directory, None)
        c.print(f"\nruns are in {directory.resolve()}:")
        for name in (sft, grpo, dpo):
            c.print(f"  {directory / name}", markup=False)
        c.print("\nnext:", markup=False)
        for cmd in (f"runwatch runs list --dir {directory}",
                    f"runwatch runs get {grpo} --dir {directory}",
                    f"runwatch runs health {grpo} --dir {directory}",
                    f"runwatch runs rollouts {grpo} --dir {directory} --worst 3",
                    f"runwatch ui {directory}"):
            c.print(f"  {cmd}", markup=False)
        ctx.engine.dispose()
        if ui is not None and keep_serving:
            c.print(f"\nstill serving http://127.0.0.1:{port}/runs; Ctrl-C to stop")
            ui.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if ui is not None and ui.poll() is None:
            ui.terminate()
            try:
                ui.wait(timeout=10)
            except subprocess.TimeoutExpired:
                ui.kill()
