"""What the Ray tests share: a real Ray head (`ray start --head` on free loopback ports, in a
temp folder of its own), what Ray says of a run's job, a Ray worker, and a worker that died
holding a Ray job with the reaper that concludes it. The fixtures over them (`ray_head`,
`sqlite_index`) are in tests/jobs/conftest.py.

Each test file that runs jobs on a head starts its own, once, with a module-scoped fixture
of its own (`ray_cluster`, which yields `started_head()`): tests/conftest.py hands a file
that defines a module-scoped fixture to one xdist worker whole, so the head starts once per
file, not once per worker that runs one of its tests.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest
from sqlalchemy import Engine

from runwatch.ingest import Indexer
from runwatch.ingest.indexer import IndexReport
from runwatch.jobs import reaper
from runwatch.jobs.executors import attempt_env
from runwatch.jobs.process import group_members
from runwatch.rundir import format as fmt
from runwatch.rundir.append import locked, write_events
from runwatch.server.runner import free_port
from runwatch.store import jobs as store_jobs
from tests.support.jobs import job, run_row
from tests.support.wait import wait_for
from tests.support.workers import FAST, Workers

RAY = Path(sys.executable).parent / "ray"
# Starting a head (GCS, raylet, dashboard) and each job's supervisor takes a while on a
# loaded two-core machine; these bound waits only ever reached when something is wrong.
HEAD_DEADLINE_S = 180.0
JOB_DEADLINE_S = 180.0

needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None or importlib.util.find_spec("aiohttp") is None,
    reason="the ray extra is not installed (pip install -e '.[ray]': ray[default], whose "
           "dashboard serves the job submission API)")

# A plain command (no SDK, so it holds no lock on its run folder): waits for a gate that
# never opens, for at most 300 s.
PLAIN = ("import pathlib, sys, time\nend = time.monotonic() + 300\n"
         "while not pathlib.Path(sys.argv[1]).exists() and time.monotonic() < end:\n"
         "    time.sleep(0.05)\n")


@dataclass
class RayHead:
    address: str  # the dashboard's URL, which the job submission API answers at
    proc: subprocess.Popen[bytes]
    log: Path


@contextlib.contextmanager
def started_head() -> Iterator[RayHead]:
    """A Ray head on free loopback ports with its dashboard, two CPUs, its own temp
    folder (short: Ray's socket paths must fit), stopped with everything it started.
    A head takes 10-30 s to come up on two loaded cores: a file starts one for its tests."""
    head = start_head()
    try:
        yield head
    finally:
        stop_head(head)


def start_head(dashboard: int | None = None) -> RayHead:
    """Start a Ray head as `started_head` describes (its dashboard on port `dashboard`, or
    a free one) and wait until its dashboard answers; stop it with `stop_head`."""
    temp = Path(tempfile.mkdtemp(prefix="rw-ray-", dir="/tmp"))
    log = temp / "head.log"
    dashboard = dashboard or free_port()
    args = [str(RAY), "start", "--head", "--block", f"--port={free_port()}",
            "--include-dashboard=true", "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard}", "--node-ip-address=127.0.0.1",
            f"--ray-client-server-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}", "--num-cpus=2",
            f"--temp-dir={temp}", "--disable-usage-stats"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    head = RayHead(f"http://127.0.0.1:{dashboard}", proc, log)
    try:
        def up() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"ray start exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                return httpx.get(f"{head.address}/api/version", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, what="the Ray head's dashboard", deadline=HEAD_DEADLINE_S, interval=0.5)
    except BaseException:
        stop_head(head)
        raise
    return head


def stop_head(head: RayHead) -> None:
    """Stop a head `start_head` started, with everything it started, as `ray stop` would
    (but only this head: `ray stop` stops every Ray process of the machine), and remove
    its temp folder."""
    proc = head.proc
    proc.send_signal(signal.SIGTERM)  # `ray start --block` stops what it started
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=60)
    for pid in group_members(proc.pid, session=True):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, ChildProcessError, subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    shutil.rmtree(head.log.parent, ignore_errors=True)


def head_gone(head: RayHead, exc: Exception) -> NoReturn:
    """Fail with what the module's Ray head left in its log: its dashboard answered when
    the module started, and no longer does."""
    code = head.proc.poll()
    logs = [head.log, *sorted({log.resolve() for name in ("dashboard.log", "dashboard.err")
                               for log in head.log.parent.glob(f"session_*/logs/{name}")})]
    pytest.fail(f"the module's Ray head stopped answering ({exc}); `ray start` "
                f"{'still runs' if code is None else f'exited {code}'}. "
                + "".join(f"\n--- {log.name} ends:\n{log.read_text(errors='replace')[-3000:]}"
                          for log in logs if log.is_file()))


def ray_status(client: Any, engine: Engine, name: str, attempt: int = 1) -> str:
    """What Ray says of attempt `attempt` of run `name` (its Ray job's status; "" while
    Ray knows no such job)."""
    try:
        info = client.get_job_info(f"runwatch-{run_row(engine, name).run_id}-{attempt}")
    except RuntimeError as exc:
        if "404" in str(exc) or "does not exist" in str(exc):
            return ""
        raise
    return str(getattr(info.status, "value", info.status))


def wait_ended(engine: Engine, name: str) -> Any:
    """Wait until job `name` was concluded and its end indexed (the job is released just
    before the run folder is indexed); its runs row."""
    wait_for(lambda: (job(engine, name) or {}).get("worker_id", "") is None
             and run_row(engine, name).status in fmt.TERMINAL_PHASES,
             what=f"{name} to be concluded and indexed", deadline=JOB_DEADLINE_S)
    return run_row(engine, name)


def spawn_ray_worker(workers: Workers, runs_dir: Path, db: Path, head: RayHead,
                     *options: str) -> subprocess.Popen[str]:
    """`runwatch worker --executor ray` on index `db` and the head, with the test
    settings (FAST) and `options`."""
    settings = [f"--{key.replace('_', '-')}={value}" for key, value in FAST.items()]
    return workers.spawn(runs_dir, ["worker", str(runs_dir), "--db", str(db), *settings,
                                    *options, "--executor=ray", f"--address={head.address}"])


def held_by_a_dead_worker(engine: Engine, runs_dir: Path, name: str, executor: Any) -> Any:
    """Claim run `name` for a worker "dead" that records its start (QUEUED until Ray
    starts it) and starts its attempt on `executor`, as a worker does, and then stamps
    nothing more; its claim."""
    with engine.begin() as conn:
        claim = store_jobs.claim(conn, "dead", 1, time.time())
    assert claim is not None and claim.name == name
    with locked(Path(claim.dir), 5.0):
        write_events(Path(claim.dir), [reaper.start_event(claim.attempt, "dead",
                                                          executor.queue)])
    executor.start(claim, attempt_env(claim),
                   fmt.attempt_dir(Path(claim.dir), claim.attempt) / fmt.OUTPUT_LOG)
    return claim


def dead_worker_reaper(engine: Engine, executor: Any, runs_dir: Path | None = None
                       ) -> Callable[[], int]:
    """One reaper pass of another worker ("other"), as it runs once the "dead" worker of
    `held_by_a_dead_worker` is lost ("dead" has no worker row: it declared the default
    heartbeat timeout), asking Ray through `executor`; it indexes what it concludes in
    `runs_dir` (none: indexes nothing). Each call returns how many jobs it concluded."""
    indexer = Indexer(engine, runs_dir) if runs_dir is not None else None

    def index(run_dir: Path) -> None:
        if indexer is not None:
            indexer.index_run(run_dir, IndexReport())

    def reap() -> int:
        later = time.time() + store_jobs.HEARTBEAT_TIMEOUT_S + 1
        return reaper.reap(engine, "other", later, index, executor=executor)

    return reap
