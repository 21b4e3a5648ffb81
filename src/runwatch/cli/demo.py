"""`runwatch demo`: train the SFT, GRPO and DPO recipes for real, through the job queue,
while the web app shows them.

`runwatch ui` serves the web app over the demo's folder and runs the embedded worker
(one CPU device). The demo submits each recipe as a job, with the commands a user would
type (`runwatch submit recipes …`, then `runwatch runs wait`): SFT first; once it has
succeeded, GRPO and DPO from its checkpoint together, so the web app shows one RUNNING
and one QUEUED. It ends with each run's state and health, so every part of runwatch is
seen working on a laptop CPU. Without the web app (`--no-serve`), a `runwatch worker`
runs the jobs instead.
"""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from runwatch.cli.context import open_context
from runwatch.cli.output import console, fail, line, runwatch_command
from runwatch.health.store import health_for_run
from runwatch.store import queries as q

# SFT on 400 rows leaves 2-digit addition imperfect (0.75 greedy accuracy on 1000 unseen
# questions), so GRPO, with its defaults (the settings docs/recipes.md measured), has
# something to improve (0.73 -> 0.78 on its own 1000 questions).
SFT_ARGS = ["n_train=400", "n_val=1000", "max_steps=250", "val_interval=125"]
GRPO_ARGS = ["wandb_project=None", "n_val=1000", "max_sample_tokens=6"]
DPO_ARGS: list[str] = []  # its defaults
RUNWATCH = [sys.executable, "-m", "runwatch"]


def _free_port(preferred: int) -> int:
    for port in (preferred, 0):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise fail("no free port on 127.0.0.1 for the web app")


def _show(args: list[str]) -> None:
    """Print the command the demo runs next, as a user would type it."""
    console().print()
    line("$ ", shlex.join(["runwatch", *args]), style="bold")


def _submit(directory: Path, name: str, method: str, args: list[str]) -> None:
    """Queue recipe `method` as run `name`, printing the command and the run's state."""
    cmd = ["submit", "recipes", method, *args, "--name", name, "--dir", str(directory)]
    _show(cmd)
    proc = subprocess.run([*RUNWATCH, *cmd, "-o", "json"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise fail(f"submitting the {method} recipe failed (exit {proc.returncode}): "
                   f"{proc.stderr.strip() or proc.stdout.strip()}")
    line(name, ": ", json.loads(proc.stdout)["status"])


def _wait(directory: Path, name: str) -> None:
    """Follow run `name` until it ends (`runwatch runs wait`); fail unless it succeeded."""
    cmd = ["runs", "wait", name, "--dir", str(directory), "--exit-status"]
    _show(cmd)
    code = subprocess.run([*RUNWATCH, *cmd]).returncode
    if code != 0:
        raise fail(f"run {name} did not succeed (runs wait exited {code}); "
                   f"`{runwatch_command('runs', 'get', name, folder=directory)}` says why")


def _start(directory: Path, port: int, serve: bool) -> subprocess.Popen[bytes]:
    """The process that runs the jobs: `runwatch ui` (web app and embedded worker), or a
    `runwatch worker` of its own without the web app."""
    if serve:
        line(f"web app: http://127.0.0.1:{port}/runs  (live while the recipes train)")
        return subprocess.Popen([*RUNWATCH, "ui", str(directory), "--port", str(port)])
    return subprocess.Popen([*RUNWATCH, "worker", str(directory)])


def _summary(directory: Path, names: tuple[str, ...]) -> None:
    """Each run's folder, state and health findings."""
    ctx = open_context(directory, None)
    console().print()
    line(f"runs are in {directory.resolve()}:")
    with ctx.engine.connect() as conn:
        for name in names:
            row = q.resolve_run(conn, name)
            findings = [f for f in health_for_run(conn, row.pk) if f["status"] == "open"]
            health = (", ".join(f"{f['severity']} {f['rule_id']}" for f in findings)
                      or "no open findings")
            line("  ", str(directory / name), "  ", row.status, "  health: ", health)
    ctx.engine.dispose()


def demo_cmd(
    directory: Annotated[Path, typer.Option("--dir", help="Folder to record runs into.")
                         ] = Path("runs"),
    port: Annotated[int, typer.Option(help="Port for the web app (another if busy).")] = 8765,
    serve: Annotated[bool, typer.Option(
        help="Serve the web app (and its worker) while the recipes train; else a worker.")
                     ] = True,
    keep_serving: Annotated[bool, typer.Option(
        help="Keep serving after the recipes finish, until Ctrl-C.")] = False,
) -> None:
    """Submit SFT, then GRPO and DPO from its checkpoint, while the web app shows them live."""
    c = console()
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    sft, grpo, dpo = (f"demo-{m}-{stamp}" for m in ("sft", "grpo", "dpo"))
    port = _free_port(port) if serve else port
    # The index is made before the processes that share it start (two at once on a new
    # index would both try to make it).
    open_context(directory, None, refresh=False).engine.dispose()
    runner = _start(directory, port, serve)
    try:
        _submit(directory, sft, "sft", SFT_ARGS)
        _wait(directory, sft)
        init_from = f"init_from={(directory / sft).resolve()}"
        # Both at once on one device: the web app shows GRPO RUNNING and DPO QUEUED.
        _submit(directory, grpo, "grpo", [init_from, *GRPO_ARGS])
        _submit(directory, dpo, "dpo", [init_from, *DPO_ARGS])
        _wait(directory, grpo)
        _wait(directory, dpo)
        _summary(directory, (sft, grpo, dpo))
        c.print("\nnext:", markup=False)
        for words in (["runs", "list"], ["runs", "get", grpo], ["runs", "health", grpo],
                      ["runs", "rollouts", grpo, "--worst", "3"]):
            line("  ", runwatch_command(*words, folder=directory))
        line("  ", runwatch_command("ui", str(directory)))
        if serve and keep_serving:
            line(f"\nstill serving http://127.0.0.1:{port}/runs; Ctrl-C to stop")
            runner.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if runner.poll() is None:
            runner.terminate()  # its worker stops the jobs still running
            try:
                runner.wait(timeout=30)
            except subprocess.TimeoutExpired:
                runner.kill()
