"""`runwatch runs grafana RUN` (a Grafana link covering the run's time range) and
`runwatch grafana dashboard` (the dashboard JSON over the server's /metrics)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from runwatch.cli.context import open_context
from runwatch.cli.options import DbOpt, DirOpt, RunArg, resolve_or_exit
from runwatch.cli.output import fail, line
from runwatch.interop import grafana

grafana_app = typer.Typer(help="Grafana: the dashboard over runwatch's Prometheus metrics.",
                          no_args_is_help=True)

GrafanaUrlOpt = Annotated[str | None, typer.Option(
    "--grafana-url", envvar=grafana.ENV_VAR,
    help=f"Grafana's base address, such as http://localhost:3000 (default: ${grafana.ENV_VAR}).",
    show_default=False)]


def grafana_run_cmd(
    run: RunArg, grafana_url: GrafanaUrlOpt = None,
    server: Annotated[str | None, typer.Option(
        "--server", help="runwatch's address, for the dashboard's link back to the run.",
        show_default=False)] = None,
    directory: DirOpt = None, db: DbOpt = None,
) -> None:
    """Print a link to the runwatch dashboard in Grafana covering the run: from its start to
    its end, or to now while it trains."""
    if not grafana_url:
        raise fail("no Grafana address: give --grafana-url URL or set "
                   f"{grafana.ENV_VAR}", ["e.g. --grafana-url http://localhost:3000"])
    if "://" not in grafana_url:
        raise fail(f"--grafana-url {grafana_url!r} is not an address: give it as "
                   "http://HOST:PORT")
    ctx = open_context(directory, db, read_only=True)
    with ctx.engine.connect() as conn:
        row = resolve_or_exit(conn, run)
    start = row.started_at if row.started_at is not None else row.created_at
    line(grafana.run_link(grafana_url, row.run_id, start, row.ended_at, server))
    line(f"run {row.name} ({row.run_id}), {row.status}: "
         + ("from its start to its end" if row.ended_at is not None
            else "from its start to now, following it"))


@grafana_app.command("dashboard")
def dashboard_cmd(
    out: Annotated[Path | None, typer.Option(
        "-o", "--out", help="Write the JSON to this file (default: print it).",
        show_default=False)] = None,
) -> None:
    """Write the dashboard (Grafana's JSON model) over runwatch's /metrics: import it in
    Grafana (Dashboards > New > Import) with a Prometheus data source that scrapes the server."""
    text = json.dumps(grafana.dashboard(), indent=2) + "\n"
    if out is None:
        typer.echo(text, nl=False)
        return
    try:
        out.write_text(text)
    except OSError as exc:
        raise fail(f"cannot write {out}: {exc.strerror or exc}") from exc
    line(f"wrote the runwatch dashboard (uid {grafana.UID}) to {out}")
