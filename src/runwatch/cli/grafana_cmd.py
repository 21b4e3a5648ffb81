"""`runwatch runs grafana RUN` (a Grafana link covering the run's time range) and
`runwatch grafana dashboard` (the dashboard JSON over the server's /metrics)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from runwatch.cli.options import DbOpt, DirOpt, RunArg, resolve_or_exit
from runwatch.cli.output import fail, line
from runwatch.interop import grafana

grafana_app = typer.Typer(help="Grafana: the dashboard over runwatch's Prometheus metrics.",
                          no_args_is_help=True)

GrafanaUrlOpt = Annotated[str | None, typer.Option(
    "--grafana-url", envvar=grafana.ENV_VAR,
    help="Grafana's base address: http or https, its host, and its port and path where it "
    "has them, such as http://localhost:3000; not a dashboard's address "
    f"(default: ${grafana.ENV_VAR}).",
    show_default=False)]


def grafana_run_cmd(
    run: RunArg, grafana_url: GrafanaUrlOpt = None,
    server: Annotated[str | None, typer.Option(
        "--server", help="runwatch's address, for the dashboard's link back to the run.",
        show_default=False)] = None,
    attempt: Annotated[int | None, typer.Option(
        "--attempt", min=1, help="Cover this attempt of a retried run (default: the run "
        "from its first start).", show_default=False)] = None,
    directory: DirOpt = None, db: DbOpt = None,
) -> None:
    """Print a link to the runwatch dashboard in Grafana covering the run: from its start to
    its end, or to now while it trains."""
    from runwatch.cli.context import open_context

    if not grafana_url:
        raise fail("no Grafana address: give --grafana-url URL or set "
                   f"{grafana.ENV_VAR}", ["e.g. --grafana-url http://localhost:3000"])
    try:
        base = grafana.base_url(grafana_url)
    except ValueError as exc:
        raise fail(f"--grafana-url (or ${grafana.ENV_VAR}): {exc}") from exc
    ctx = open_context(directory, db, read_only=True)
    with ctx.engine.connect() as conn:
        row = resolve_or_exit(conn, run)
        start = row.started_at if row.started_at is not None else row.created_at
        end, what = row.ended_at, f"run {row.name} ({row.run_id}), {row.status}"
        if attempt is not None:
            start, end, what = _attempt(conn, row, attempt)
    line(grafana.run_link(base, row.run_id, start, end, server))
    line(f"{what}, project {row.project}: "
         + ("from its start to its end" if end is not None
            else "from its start to now, following it"))


def _attempt(conn: Any, row: Any, number: int) -> tuple[float, float | None, str]:
    """Attempt `number` of the run: its start, its end (None while it is open), and what
    the link covers, in words."""
    from runwatch.jobs.cost import attempt_times
    from runwatch.store.queries import events

    attempts = attempt_times(events(conn, row.pk))
    a = next((a for a in attempts if a.number == number), None)
    start = None if a is None else a.started_at if a.started_at is not None else a.queued_at
    if a is None or start is None:
        raise fail(f"run {row.name} has no attempt {number}",
                   [f"its attempts: {', '.join(str(a.number) for a in attempts)}"
                    if attempts else "it has not started"])
    # an attempt no worker started (queued, or cancelled while it waited) spans its queue
    return (start, a.ended_at if a.ended else None,
            f"attempt {a.number} of run {row.name} ({row.run_id}), {a.phase}")


@grafana_app.command("dashboard")
def dashboard_cmd(
    out: Annotated[Path | None, typer.Option(
        "-o", "--out", help="Write the JSON to this file (default: print it).",
        show_default=False)] = None,
) -> None:
    """Write the dashboard (Grafana's JSON model) over runwatch's /metrics: import it in
    Grafana (Dashboards > New > Import) with a Prometheus data source that scrapes the server."""
    try:
        board = grafana.dashboard()
    except grafana.GrafanaSDKMissing as exc:
        raise fail(f"the dashboard is built with grafana-foundation-sdk, which is not "
                   f"installed ({exc.name} is missing)",
                   ["install the extra: pip install 'runwatch[grafana]'"]) from exc
    text = json.dumps(board, indent=2) + "\n"
    if out is None:
        typer.echo(text, nl=False)
        return
    try:
        out.write_text(text)
    except OSError as exc:
        raise fail(f"cannot write {out}: {exc.strerror or exc}") from exc
    line(f"wrote the runwatch dashboard (uid {grafana.UID}) to {out}")
