"""`runwatch ui` and `runwatch server`: serve the API and the web app over an index, and
run queued jobs in embedded workers (`ui` runs one by default, `server` none)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from runwatch.cli.context import default_db
from runwatch.cli.context import runs_dir as folder_of
from runwatch.cli.options import DbOpt, DirArg
from runwatch.jobs.cost import ProfileError, offered_devices, read_profiles
from runwatch.jobs.worker import device_ids
from runwatch.server.settings import (
    DEFAULT_PORT,
    ENV_VAR,
    INDEX_INTERVAL_S,
    is_loopback,
    new_token,
    token_problem,
)
from runwatch.store.db import StoreError, open_engine

if TYPE_CHECKING:
    from runwatch.server.runner import Runner


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _check_bind(host: str, token: str | None) -> None:
    if token is not None:
        problem = token_problem(token)
        if problem:
            _fail(problem)
    elif not is_loopback(host):
        _fail(f"refusing to serve on {host} without auth: anyone on the network could read "
              f"every run; pass a token (for example --token {new_token()}) or set "
              f"{ENV_VAR}, or bind 127.0.0.1")


def _workers(runs_dir: Path | None, workers: int, devices: int | None,
             device_profile: str | None) -> tuple[int, str, list[str] | None]:
    """The embedded workers' devices each, device profile (defaults: the profile's device
    count, the profiles' default) and the device ids they hand out between them."""
    if workers and runs_dir is None:
        _fail("embedded workers run the jobs of a runs folder: pass --runs-dir, or "
              "--workers 0")
    try:
        profile = read_profiles(runs_dir).get(device_profile)
        each = offered_devices(profile, devices)
    except ProfileError as exc:
        _fail(str(exc))
    try:
        ids = device_ids(profile.name, each * workers, os.environ)
    except ValueError as exc:
        _fail(str(exc))
    return each, profile.name, ids


def _run(runner: Runner) -> None:
    # SIGTERM stops like Ctrl-C: the workers stop their jobs before the server exits
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        try:
            runner.start()
        except OSError as exc:
            _fail(str(exc))
        typer.echo(f"runwatch is serving {runner.url}/runs"
                   + (f" (indexing {runner.runs_dir})" if runner.runs_dir else "")
                   + (f", running queued jobs on {runner.workers} worker(s) of "
                      f"{runner.devices} {runner.device_profile} device(s)"
                      if runner.workers else ""))
        sys.stdout.flush()
    except KeyboardInterrupt:
        # Ctrl-C while the server starts, or just after: stop as from wait(), exit 0
        runner.stop()
        return
    runner.wait()


WorkersOption = Annotated[int, typer.Option(
    min=0, help="embedded workers that run queued jobs (0: none)")]
DevicesOption = Annotated[int | None, typer.Option(
    min=1, help="devices each embedded worker offers; default: the device profile's")]
ProfileOption = Annotated[str | None, typer.Option(
    help="device profile of the embedded workers; default: the profiles' default")]


def ui(
    runs_dir: DirArg = None,
    port: Annotated[int, typer.Option(help="port to listen on")] = DEFAULT_PORT,
    host: Annotated[str, typer.Option(help="address to bind; non-loopback needs --token")] = (
        "127.0.0.1"),
    db: DbOpt = None,
    token: Annotated[str | None, typer.Option(
        envvar=ENV_VAR, help="require this token (16+ characters; see docs/security.md)")] = None,
    interval: Annotated[float, typer.Option(help="seconds between indexing passes")] = (
        INDEX_INTERVAL_S),
    exit_when_done: Annotated[bool, typer.Option(
        help="stop once every run in DIR has finished and is indexed (for scripts)")] = False,
    workers: WorkersOption = 1,
    devices: DevicesOption = None,
    device_profile: ProfileOption = None,
) -> None:
    """Index a runs folder continuously, run its queued jobs (one embedded worker; --workers
    0: none) and serve the web app on http://127.0.0.1:8765."""
    _check_bind(host, token)
    runs_dir = folder_of(runs_dir)
    if not runs_dir.is_dir():
        _fail(f"{runs_dir} is not a folder; create it or point ui at your runs folder")
    target = db or str(default_db(runs_dir))
    try:
        engine = open_engine(target)
    except StoreError as exc:
        _fail(str(exc))
    from runwatch.server.runner import Runner

    devices, profile, ids = _workers(runs_dir, workers, devices, device_profile)
    _run(Runner(engine, runs_dir=runs_dir, host=host, port=port, token=token,
                interval=interval, exit_when_done=exit_when_done, workers=workers,
                devices=devices, device_profile=profile, device_ids=ids, index_first=False))


def server(
    db: Annotated[str, typer.Option(help="index database: a URL (postgresql://…) or a path")],
    runs_dir: Annotated[Path | None, typer.Option(
        help="also index this runs folder continuously")] = None,
    host: Annotated[str, typer.Option(help="address to bind; non-loopback needs --token")] = (
        "127.0.0.1"),
    port: Annotated[int, typer.Option(help="port to listen on")] = DEFAULT_PORT,
    token: Annotated[str | None, typer.Option(
        envvar=ENV_VAR, help="require this token (16+ characters; see docs/security.md)")] = None,
    interval: Annotated[float, typer.Option(help="seconds between indexing passes")] = (
        INDEX_INTERVAL_S),
    workers: WorkersOption = 0,
    devices: DevicesOption = None,
    device_profile: ProfileOption = None,
) -> None:
    """Serve the API and web app over a database: the long-lived team form of `ui`."""
    _check_bind(host, token or os.environ.get(ENV_VAR))
    if runs_dir is not None and not runs_dir.is_dir():
        _fail(f"{runs_dir} is not a folder")
    try:
        engine = open_engine(db)
    except StoreError as exc:
        _fail(str(exc))
    from runwatch.server.runner import Runner

    devices, profile, ids = _workers(runs_dir, workers, devices, device_profile)
    _run(Runner(engine, runs_dir=runs_dir, host=host, port=port, token=token, interval=interval,
                workers=workers, devices=devices, device_profile=profile, device_ids=ids,
                index_first=False))
