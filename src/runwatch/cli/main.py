"""The `runwatch` command: every sub-command is mounted here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runwatch.cli import runs
from runwatch.cli.compare_cmd import compare_cmd
from runwatch.cli.context import open_context
from runwatch.cli.demo import demo_cmd
from runwatch.cli.grafana_cmd import grafana_app, grafana_run_cmd
from runwatch.cli.health import health_command, thresholds_command
from runwatch.cli.health_eval import health_eval_command
from runwatch.cli.import_cmd import import_command
from runwatch.cli.inspect_cmds import engine_config_cmd, hparams_cmd, rollouts_cmd, wait_cmd
from runwatch.cli.jobs_cmds import cancel_cmd, resources_cmd, retry_cmd
from runwatch.cli.output import line
from runwatch.cli.recipes import recipes_app
from runwatch.cli.serve import server, ui
from runwatch.cli.share_cmd import share_cmd
from runwatch.cli.submit import submit_cmd
from runwatch.cli.tensorboard_cmd import tensorboard_cmd
from runwatch.cli.worker import worker_cmd

app = typer.Typer(
    help="runwatch: monitor LLM post-training runs (SFT, DPO, GRPO).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(runs.app, name="runs")
app.add_typer(recipes_app, name="recipes")
app.add_typer(grafana_app, name="grafana")
runs.app.command("health")(health_command)
runs.app.command("compare")(compare_cmd)
runs.app.command("rollouts")(rollouts_cmd)
runs.app.command("hparams")(hparams_cmd)
runs.app.command("engine-config")(engine_config_cmd)
runs.app.command("wait")(wait_cmd)
runs.app.command("cancel")(cancel_cmd)
runs.app.command("retry")(retry_cmd)
runs.app.command("tensorboard")(tensorboard_cmd)
runs.app.command("share")(share_cmd)
runs.app.command("grafana")(grafana_run_cmd)
app.command("import")(import_command)
app.command("thresholds")(thresholds_command)
app.command("health-eval")(health_eval_command)
app.command("ui")(ui)
app.command("server")(server)
app.command("worker")(worker_cmd)
app.command("demo")(demo_cmd)
app.command("submit")(submit_cmd)
app.command("resources")(resources_cmd)


@app.command("index")
def index_cmd(
    directory: Annotated[Path, typer.Argument(help="Folder of run directories.")] = Path("runs"),
    db: Annotated[str | None, typer.Option("--db", help="Index database URL or SQLite path.")
                  ] = None,
) -> None:
    """Index what is new in a folder of runs (safe to repeat: it adds only what is new)."""
    ctx = open_context(directory, db, refresh=False)
    report = ctx.refresh()
    line(f"indexed {report.runs} runs ({report.new_runs} new), {report.rows} new rows "
         f"from {directory}")
    for p in report.problems[:50]:
        line(f"  warning: {p}")
    if len(report.problems) > 50:
        line(f"  … and {len(report.problems) - 50} more warnings")
