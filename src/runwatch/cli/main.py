"""The `runwatch` command: every sub-command is registered here, one line each, by the
import path of its function (or typer.Typer); its module is imported only when it runs,
so each command starts without the others' libraries (see cli/lazy.py)."""

from __future__ import annotations

import typer

from runwatch.cli.lazy import LazyTyper

app = LazyTyper(
    help="runwatch: monitor LLM post-training runs (SFT, DPO, GRPO).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    """`--version`: which runwatch this is, the index schema it writes (an index it opens
    at an older one is upgraded, one way) and the run format it records."""
    if not value:
        return
    from runwatch import __version__
    from runwatch.rundir.format import SCHEMA_VERSION
    from runwatch.store.db import HEAD_REVISION

    typer.echo(f"runwatch {__version__} (index schema {HEAD_REVISION}, run format "
               f"{SCHEMA_VERSION})")
    raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_version,
        help="Say which runwatch this is, its index schema and its run format, and exit.")
) -> None:
    pass
runs = LazyTyper(help="Read the runs in the index.", no_args_is_help=True)

app.lazy("import", "runwatch.cli.import_cmd:import_command")
app.lazy("thresholds", "runwatch.cli.health:thresholds_command")
app.lazy("health-eval", "runwatch.cli.health_eval:health_eval_command")
app.lazy("ui", "runwatch.cli.serve:ui")
app.lazy("server", "runwatch.cli.serve:server")
app.lazy("worker", "runwatch.cli.worker:worker_cmd")
app.lazy("demo", "runwatch.cli.demo:demo_cmd")
app.lazy("submit", "runwatch.cli.submit:submit_cmd")
app.lazy("resources", "runwatch.cli.jobs_cmds:resources_cmd")
app.lazy("sync", "runwatch.cli.sync_cmd:sync_cmd")
app.lazy("index", "runwatch.cli.index_cmd:index_cmd")
app.lazy("runs", runs)
app.lazy("recipes", "runwatch.cli.recipes:recipes_app")
app.lazy("grafana", "runwatch.cli.grafana_cmd:grafana_app")
app.lazy("tokens", "runwatch.cli.tokens_cmd:tokens_app")
app.lazy("projects", "runwatch.cli.tokens_cmd:projects_app")

runs.lazy("list", "runwatch.cli.runs_list:list_cmd")
runs.lazy("get", "runwatch.cli.runs:get_cmd")
runs.lazy("metrics", "runwatch.cli.runs:metrics_cmd")
runs.lazy("logs", "runwatch.cli.runs:logs_cmd")
runs.lazy("health", "runwatch.cli.health:health_command")
runs.lazy("compare", "runwatch.cli.compare_cmd:compare_cmd")
runs.lazy("rollouts", "runwatch.cli.inspect_cmds:rollouts_cmd")
runs.lazy("hparams", "runwatch.cli.inspect_cmds:hparams_cmd")
runs.lazy("engine-config", "runwatch.cli.inspect_cmds:engine_config_cmd")
runs.lazy("wait", "runwatch.cli.inspect_cmds:wait_cmd")
runs.lazy("cancel", "runwatch.cli.jobs_cmds:cancel_cmd")
runs.lazy("retry", "runwatch.cli.jobs_cmds:retry_cmd")
runs.lazy("tensorboard", "runwatch.cli.tensorboard_cmd:tensorboard_cmd")
runs.lazy("share", "runwatch.cli.share_cmd:share_cmd")
runs.lazy("grafana", "runwatch.cli.grafana_cmd:grafana_run_cmd")
