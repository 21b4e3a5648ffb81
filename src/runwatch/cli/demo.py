"""`runwatch demo`: record a run and show it, so a new user sees every part working."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Annotated

import typer

import runwatch
from runwatch.cli.context import open_context
from runwatch.cli.output import console


def demo_cmd(
    directory: Annotated[Path, typer.Option("--dir", help="Folder to record runs into.")
                         ] = Path("runs"),
    steps: Annotated[int, typer.Option(min=1, help="Steps to record.")] = 200,
) -> None:
    """Record a small run with the SDK into --dir, then show it with the CLI."""
    import time

    c = console()
    name = f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    rng = random.Random(0)
    with runwatch.init(project="demo", name=name, method="sft", base_model="none (demo loop)",
                       dataset="demo", trainer="runwatch-demo", backend="python",
                       config={"steps": steps, "learning_rate": 1e-3}, dir=directory) as run:
        run.log_text("demo loop started", data={"steps": steps})
        for step in range(steps):
            lr = 1e-3 * (1 - step / steps)
            loss = 2.5 * math.exp(-step / (steps / 4)) + 0.1 + rng.gauss(0, 0.02)
            run.log({"loss": loss, "learning_rate": lr, "grad_norm": abs(rng.gauss(1, 0.2))},
                    step=step)
            if step % 50 == 49:
                run.log({"val/loss": loss + 0.05}, step=step)
                run.log_checkpoint(step, "training", f"{name}-step{step}")
        run.log_text("demo loop finished")
    c.print(f"recorded run [bold]{name}[/] in {directory / name}")
    ctx = open_context(directory, None)
    report = ctx.refresh()
    c.print(f"indexed {report.runs} runs; try:")
    for cmd in (f"runwatch runs list --dir {directory}",
                f"runwatch runs get {name} --dir {directory}",
                f"runwatch runs metrics {name} --dir {directory} --limit 10"):
        c.print(f"  {cmd}", markup=False)
