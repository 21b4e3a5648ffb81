"""Workers for tests: real `runwatch worker` processes, and everything they start killed.

`workers` is a fixture (import it into a test module): `workers.start(runs, db, ...)`
starts `runwatch worker` in a session of its own with short heartbeats and grace
(`workers.spawn(runs, ["ui", ...])` any other command that runs jobs); at teardown
every one is stopped (SIGTERM, then SIGKILL of its group) and every job
process still running for the test's runs folders is SIGKILLed with its group, whatever
the test did. A worker's jobs run in sessions of their own, so killing the worker alone
would leave them running: `job_processes(runs)` finds them by the RUNWATCH_RUN_DIR their
worker gave them. `phases(run_dir)` is a run's phases with repeats folded;
`set_back(engine, worker_id)` makes a worker that stamps no more lost at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

import pytest
from sqlalchemy import Engine

from runwatch.rundir import format as fmt
from runwatch.store import jobs as store_jobs
from tests.support.jobs import events
from tests.support.wait import DEADLINE_S, wait_for


class Timings(TypedDict):
    """A worker's heartbeat and grace settings, as Worker takes them by keyword."""

    heartbeat_s: float
    heartbeat_timeout_s: float
    grace_s: float


# Short enough that a test waits little; heartbeat_timeout_s leaves room for a loaded CI.
FAST: Timings = {"heartbeat_s": 0.2, "heartbeat_timeout_s": 3.0, "grace_s": 1.0}


def set_back(engine: Engine, worker_id: str) -> float:
    """Stamp a worker that stamps no more (killed, or its loop stalled: it logged so) as
    its last heartbeat stands once FAST's timeout has passed, its row's and its jobs', so
    that the others find it lost now instead of a timeout later; the stamp it now has."""
    then = time.time() - FAST["heartbeat_timeout_s"] - 1
    with engine.begin() as conn:
        store_jobs.heartbeat(conn, worker_id, then)
    return then


def phases(run_dir: Path) -> list[str]:
    """A run's phases in order, each once however many events repeat it (progress)."""
    out: list[str] = []
    for ev in events(run_dir):
        if not out or out[-1] != ev["phase"]:
            out.append(ev["phase"])
    return out


def job_processes(runs: Path) -> dict[int, int]:
    """{pid: process group} of every live process whose RUNWATCH_RUN_DIR is in `runs`."""
    prefix = f"{fmt.ENV_RUN_DIR}={Path(runs).resolve()}/".encode()
    found: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
            if any(var.startswith(prefix) for var in env):
                found[int(entry)] = os.getpgid(int(entry))
        except (OSError, ProcessLookupError):
            continue
    return found


def pid_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:].split()[0] != b"Z"


def group_gone(pgid: int) -> bool:
    """Whether no live process of group `pgid` is left."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getpgid(int(entry)) == pgid and pid_alive(int(entry)):
                    return False
            except ProcessLookupError:
                continue
    return True


class Workers:
    """The `runwatch worker` processes of one test, and the runs folders they serve."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        self.folders: set[Path] = set()

    def start(self, runs: Path, db: str | Path, *, devices: int = 1,
              device_profile: str | None = None, env: dict[str, str] | None = None,
              log: Path | None = None, **options: float) -> subprocess.Popen[str]:
        """Start `runwatch worker runs --db db` with FAST settings (override by keyword:
        heartbeat_s=…, startup_timeout_s=…) and `env` added to its environment; its
        output goes to `log` (default <runs>/../worker-<n>.log)."""
        settings = {**FAST, **options}
        args = [f"--{key.replace('_', '-')}={value}" for key, value in settings.items()]
        if device_profile is not None:
            args.append(f"--device-profile={device_profile}")
        return self.spawn(runs, ["worker", str(runs), "--db", str(db), f"--devices={devices}",
                                 *args], env=env, log=log)

    def spawn(self, runs: Path, args: list[str], *, env: dict[str, str] | None = None,
              log: Path | None = None) -> subprocess.Popen[str]:
        """Start `runwatch ARGS` (a command that runs the jobs of `runs`: worker, ui) in a
        session of its own; stopped, with the jobs of `runs`, at teardown."""
        self.folders.add(Path(runs))
        log = log or Path(runs).parent / f"{args[0]}-{len(self.procs)}.log"
        with open(log, "w") as out:
            proc = subprocess.Popen([sys.executable, "-m", "runwatch", *args],
                                    env={**os.environ, **(env or {})}, stdout=out,
                                    stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> int:
        """Send `sig` to a worker (or ui) and wait for it to exit; its exit code."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)
        return proc.wait(timeout=DEADLINE_S)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for runs in self.folders:
            kill_jobs(runs)


def kill_jobs(runs: Path) -> None:
    """SIGKILL every job process of `runs` with its group, and wait until they are gone."""
    for pgid in set(job_processes(runs).values()):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    wait_for(lambda: not job_processes(runs), what=f"the job processes of {runs} to be gone")


@pytest.fixture
def workers() -> Iterator[Workers]:
    """Start `runwatch worker` processes; all of them and their jobs end with the test."""
    started = Workers()
    try:
        yield started
    finally:
        started.close()
