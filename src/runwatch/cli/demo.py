"""`runwatch demo`: train the SFT, GRPO and DPO recipes for real, through the job queue,
while the web app shows them.

`runwatch ui` serves the web app over the demo's folder and runs the embedded worker
(one CPU device). The demo submits each recipe as a job, with the commands a user would
type (`runwatch submit recipes …`, then `runwatch runs wait`): SFT first; once it has
succeeded, GRPO and DPO from its checkpoint together, so the web app shows one RUNNING
and one QUEUED. It ends with each run's state and health and the commands to look
further, so every part of runwatch is seen working on a laptop CPU; the web app keeps
serving until Ctrl-C (`--no-keep-serving`: the demo ends with its runs). Each command is
printed runnable as printed (`runwatch` where PATH has it, else `.venv/bin/runwatch`),
from `demo_steps` and `next_commands`, which tests/test_first_ten_minutes.py runs too.
Without the web app (`--no-serve`), a `runwatch worker` runs the jobs instead.
"""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from runwatch.cli.context import open_context, runs_dir
from runwatch.cli.output import console, fail, line
from runwatch.cli.program import runwatch_words
from runwatch.health.store import health_for_run
from runwatch.server.settings import DEFAULT_PORT
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


@dataclass(frozen=True)
class Step:
    """One command the demo runs and shows: `submit` queues a recipe as run `name`;
    `wait` follows run `name` until it ends. `args` are runwatch's arguments as shown."""

    kind: str
    name: str
    args: list[str]


def demo_names(stamp: str) -> tuple[str, str, str]:
    """The demo's SFT, GRPO and DPO run names."""
    sft, grpo, dpo = (f"demo-{m}-{stamp}" for m in ("sft", "grpo", "dpo"))
    return sft, grpo, dpo


def demo_steps(directory: Path, stamp: str) -> list[Step]:
    """The commands the demo runs, in order: SFT, then GRPO and DPO from its checkpoint."""
    sft, grpo, dpo = demo_names(stamp)
    where = ["--dir", str(directory)]

    def submit(name: str, method: str, args: list[str]) -> Step:
        return Step("submit", name, ["submit", "recipes", method, *args, "--name", name, *where])

    def wait(name: str) -> Step:
        return Step("wait", name, ["runs", "wait", name, *where, "--exit-status"])

    init_from = f"init_from={(directory / sft).resolve()}"
    # GRPO and DPO both at once on one device: the web app shows one RUNNING, one QUEUED.
    return [submit(sft, "sft", SFT_ARGS), wait(sft),
            submit(grpo, "grpo", [init_from, *GRPO_ARGS]),
            submit(dpo, "dpo", [init_from, *DPO_ARGS]), wait(grpo), wait(dpo)]


def ui_args(directory: Path, port: int) -> list[str]:
    """`ui` over the demo's folder, on the demo's port."""
    return ["ui", str(directory), *([] if port == DEFAULT_PORT else ["--port", str(port)])]


def next_commands(directory: Path, stamp: str, port: int) -> list[list[str]]:
    """What the demo suggests once its runs have ended (runwatch's arguments); the last
    serves the runs again."""
    grpo = demo_names(stamp)[1]
    where = ["--dir", str(directory)]
    return [["runs", "list", *where], ["runs", "get", grpo, *where],
            ["runs", "health", grpo, *where], ["runs", "rollouts", grpo, "--worst", "3", *where],
            ui_args(directory, port)]


def shown(args: list[str]) -> str:
    """A runwatch command as the demo prints it: runnable as printed, here."""
    return shlex.join([*runwatch_words(), *args])


def _run_step(step: Step, directory: Path) -> None:
    """Run `step` as the user would type it (printed first); fail unless it worked."""
    console().print()
    line("$ ", shown(step.args), style="bold")
    if step.kind == "submit":
        proc = subprocess.run([*RUNWATCH, *step.args, "-o", "json"], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise fail(f"submitting {step.name} failed (exit {proc.returncode}): "
                       f"{proc.stderr.strip() or proc.stdout.strip()}")
        line(step.name, ": ", json.loads(proc.stdout)["status"])
        return
    code = subprocess.run([*RUNWATCH, *step.args]).returncode
    if code != 0:
        raise fail(f"run {step.name} did not succeed (runs wait exited {code}); "
                   f"`{shown(['runs', 'get', step.name, '--dir', str(directory)])}` says why")


def _start(directory: Path, port: int, serve: bool, keep: bool) -> subprocess.Popen[bytes]:
    """The process that runs the jobs: `runwatch ui` (web app and embedded worker), or a
    `runwatch worker` of its own without the web app."""
    if serve:
        after = ", and after them until Ctrl-C" if keep else ""
        line(f"web app: http://127.0.0.1:{port}/runs  (live while the recipes train{after})")
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
    directory: Annotated[Path | None, typer.Option(
        "--dir", help="Folder to record runs into (default: $RUNWATCH_DIR or ./runs).",
        show_default=False)] = None,
    port: Annotated[int, typer.Option(help="Port for the web app (another if busy).")] = 8765,
    serve: Annotated[bool, typer.Option(
        help="Serve the web app (and its worker) while the recipes train; else a worker.")
                     ] = True,
    keep_serving: Annotated[bool, typer.Option(
        help="Keep serving after the recipes finish, until Ctrl-C.")] = True,
) -> None:
    """Submit SFT, then GRPO and DPO from its checkpoint, while the web app shows them live;
    the web app keeps serving them afterwards until Ctrl-C."""
    c = console()
    directory = runs_dir(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    port = _free_port(port) if serve else port
    # The index is made before the processes that share it start (two at once on a new
    # index would both try to make it).
    open_context(directory, None, refresh=False).engine.dispose()
    runner = _start(directory, port, serve, keep_serving)
    try:
        for step in demo_steps(directory, stamp):
            _run_step(step, directory)
        _summary(directory, demo_names(stamp))
        c.print("\nnext:", markup=False)
        for args in next_commands(directory, stamp, port):
            after = ("   (serves these runs again after Ctrl-C)" if args[0] == "ui" and serve
                     and keep_serving else "")
            line("  ", shown(args), after)
        if serve and keep_serving:
            line(f"\nthe web app keeps serving http://127.0.0.1:{port}/runs; Ctrl-C stops it")
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
