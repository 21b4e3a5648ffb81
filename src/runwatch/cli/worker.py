"""`runwatch worker`: run queued jobs from an index, until drained or stopped."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from enum import StrEnum
from typing import Annotated

import typer

from runwatch.cli.context import default_db
from runwatch.cli.context import runs_dir as folder_of
from runwatch.cli.options import DbOpt, DirArg
from runwatch.jobs.cost import ProfileError, offered_devices, read_profiles
from runwatch.jobs.worker import STALL_TIMEOUT_S
from runwatch.store.db import StoreError, open_engine
from runwatch.store.jobs import HEARTBEAT_TIMEOUT_S


class ExecutorName(StrEnum):
    local = "local"
    ray = "ray"


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def worker_cmd(
    runs_dir: DirArg = None,
    db: DbOpt = None,
    devices: Annotated[int | None, typer.Option(
        min=1, help="devices this worker offers; default: the device profile's")] = None,
    device_profile: Annotated[str | None, typer.Option(
        help="the device profile of this machine; default: the profiles' default")] = None,
    heartbeat_s: Annotated[float, typer.Option(
        min=0.05, help="seconds between heartbeats")] = 2.0,
    heartbeat_timeout_s: Annotated[float, typer.Option(
        min=0.1, help="once this worker has sent no heartbeat for this long it is lost: "
                      "it shows lost, and another worker ends (or queues again) its "
                      "jobs; longer than --heartbeat-s")] = HEARTBEAT_TIMEOUT_S,
    grace_s: Annotated[float, typer.Option(
        min=0.0, help="seconds a job may take to stop after SIGTERM before SIGKILL")] = 10.0,
    startup_timeout_s: Annotated[float, typer.Option(
        min=0.0, help="a job still PREPARING that wrote no event and no output for this "
                      "long fails (a job's own startup timeout wins; 0: none)")] = 600.0,
    stall_timeout_s: Annotated[float, typer.Option(
        min=1.0, help="a worker whose loop has not moved for this long (a database call or "
                      "a filesystem read that never returns) stops heartbeating, so other "
                      "workers reap its jobs")] = STALL_TIMEOUT_S,
    executor: Annotated[ExecutorName, typer.Option(
        help="what runs each job: a process of this machine (local), or a job of a Ray "
             "cluster (ray, with --address)")] = ExecutorName.local,
    address: Annotated[str | None, typer.Option(
        help="with --executor ray: the Ray dashboard's address, such as "
             "http://127.0.0.1:8265")] = None,
) -> None:
    """Run queued jobs: claim them from the index, run each as a process, until stopped.

    Ctrl-C or SIGTERM stops the running jobs as a cancel would: each ends CANCELLED
    ("its worker was stopped", code worker_stopped) with what it recorded still shown,
    and is not queued again; retry it to start it over. To let the running jobs finish,
    drain the worker instead (runwatch resources --drain WORKER).
    With --executor ray each job runs as a Ray job of the cluster at --address.
    """
    runs_dir = folder_of(runs_dir)
    if executor is ExecutorName.local and address is not None:
        _fail("--address names a Ray cluster: add --executor ray, or leave --address out")
    if executor is ExecutorName.ray and not address:
        _fail("--executor ray needs the Ray dashboard's address: pass --address "
              "http://HOST:8265 (the head node's dashboard port)")
    if heartbeat_timeout_s <= heartbeat_s:
        _fail(f"--heartbeat-timeout-s {heartbeat_timeout_s:g} would call this worker lost "
              f"between two of its heartbeats ({heartbeat_s:g} s apart): make it longer "
              "than --heartbeat-s")
    if not runs_dir.is_dir():
        _fail(f"{runs_dir} is not a folder; create it or point the worker at your runs "
              "folder")
    try:
        profile = read_profiles(runs_dir).get(device_profile)
    except ProfileError as exc:
        _fail(str(exc))
    try:
        engine = open_engine(db or str(default_db(runs_dir)))
    except StoreError as exc:
        _fail(str(exc))
    from runwatch.health.store import on_events as health_end
    from runwatch.health.store import on_metrics as health_hook
    from runwatch.ingest.indexer import Indexer
    from runwatch.jobs.worker import Worker, device_ids

    run_on = None
    ids = None
    if executor is ExecutorName.ray:
        assert address is not None
        from runwatch.jobs.ray_executor import RayExecutor, RayUnavailable, connect

        offered = devices or profile.devices  # devices' worth of jobs on the cluster at once
        try:
            run_on = RayExecutor(connect(address), address)
        except RayUnavailable as exc:
            _fail(str(exc))
    else:
        try:
            offered = offered_devices(profile, devices)
            ids = device_ids(profile.name, offered, os.environ)
        except (ProfileError, ValueError) as exc:
            _fail(str(exc))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    worker = Worker(engine, runs_dir, devices=offered, device_profile=profile.name,
                    heartbeat_s=heartbeat_s, heartbeat_timeout_s=heartbeat_timeout_s,
                    grace_s=grace_s, startup_timeout_s=startup_timeout_s or None,
                    indexer=Indexer(engine, runs_dir, hooks=[health_hook],
                                    events_hooks=[health_end]), device_ids=ids,
                    executor=run_on, stall_timeout_s=stall_timeout_s)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    where = f" as Ray jobs at {address}" if executor is ExecutorName.ray else ""
    typer.echo(f"worker {worker.id} runs jobs on {worker.devices} {profile.name} device(s) "
               f"from {runs_dir}{where}")
    sys.stdout.flush()
    worker.run_forever(stop)
    typer.echo(f"worker {worker.id} stopped")
