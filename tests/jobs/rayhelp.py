"""What the Ray tests share: a real Ray head (`ray start --head` on free loopback ports, in a
temp folder of its own), what Ray says of a run's job, a Ray worker, and a worker that died
holding a Ray job with the reaper that concludes it. The fixtures over them (`ray_head`,
`sqlite_index`) are in tests/jobs/conftest.py.

A head takes 10-30 s to come up on two loaded cores, and idles at about 6% of a core. The
files whose tests leave it as they found it (no job of theirs left running: `ray_head`
checks) share one (tests/jobs/conftest.py's `shared_ray_head`), which a worker starts for
the first test that takes it and stops after the last; they are marked
`xdist_group("ray-head")`, so tests/conftest.py sends them to one xdist worker together
and the head starts once. A file that stops or breaks its head (test_ray_outage,
test_ray_refuses_for_now) has one of its own, with a module-scoped fixture:
tests/conftest.py hands such a file to one worker whole.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

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
# `ray start` exits when a port picked free was taken before it bound: started again.
START_TRIES = 3
# The no-op job `wait_ready` runs on a head before a test may use it.
READY_PROBE = "rayhelp-ready-probe"
# The head's session logs a failure message ends with.
HEAD_LOGS = ("dashboard.log", "dashboard.err", "dashboard_JobHead.log", "dashboard_agent.log",
             "raylet.out", "raylet.err", "runtime_env_agent.log")

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


class KeptHead:
    """A Ray head started when a test first needs it and kept for the next, until one
    stops it: `up()` is the head, started (`start`, on dashboard port `dashboard`, or a
    free one) where none runs; `down()` stops it."""

    def __init__(self, start: Callable[[int | None], RayHead] | None = None) -> None:
        self.head: RayHead | None = None
        self._start = start or start_head

    def up(self, dashboard: int | None = None) -> RayHead:
        if self.head is None:
            self.head = self._start(dashboard)
        return self.head

    def down(self) -> None:
        head, self.head = self.head, None
        if head is not None:
            stop_head(head)


def start_head(dashboard: int | None = None,
               ports: Callable[[], Callable[[], int]] = lambda: free_port) -> RayHead:
    """Start a Ray head on free loopback ports with its dashboard (on port `dashboard`, or a
    free one), two CPUs and its own temp folder (short: Ray's socket paths must fit), and
    wait until it takes a job and runs it (`wait_ready`); stop it, with everything it
    started, with `stop_head`. A `ray start` that exits first (a port picked free was taken
    before it bound) is started again on other free ports, up to START_TRIES times; each
    try picks its ports with a picker `ports()` makes (free_port)."""
    for tries in range(1, START_TRIES + 1):
        head = _launch(dashboard, pick=ports())
        try:
            if wait_ready(head, last=tries == START_TRIES):
                return head
        except BaseException:
            stop_head(head)
            raise
        stop_head(head)
    raise AssertionError("not reached: the last try fails the test")


def start_head_past_a_taken_port(dashboard: int | None = None) -> RayHead:
    """`start_head` as a loaded CI machine can have it start: a port a try picks free past
    the three it is told (GCS, dashboard, client server) is taken before Ray binds it. In
    CI the port picked for its dashboard agent was taken so: the agent lived on without
    its HTTP server, and the head, whose dashboard answered, refused every job ("No
    available agent to submit job") after 10 s, so each failed `could_not_start`. The
    agent now binds a port of its own choosing, and the head is used once it has run a
    job."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()

        def past_three() -> Callable[[], int]:
            picks: list[int] = []

            def pick() -> int:
                picks.append(free_port() if len(picks) < 3 else taken.getsockname()[1])
                return picks[-1]

            return pick

        return start_head(dashboard, ports=past_three)


def _launch(dashboard: int | None, agent_port: int = 0,
            pick: Callable[[], int] = free_port) -> RayHead:
    """`ray start --head --block` in a temp folder of its own, not waited for, on ports
    `pick` picks. The dashboard's agent binds a port of its own choosing (0): one picked
    free here could be taken before it binds (a loaded CI machine opens many connections),
    and an agent that cannot bind lives on without its HTTP server, so the head refuses
    every job (as one given `agent_port`, taken, does)."""
    temp = Path(tempfile.mkdtemp(prefix="rw-ray-", dir="/tmp"))
    log = temp / "head.log"
    dashboard = dashboard or pick()
    args = [str(RAY), "start", "--head", "--block", f"--port={pick()}",
            "--include-dashboard=true", "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard}", "--node-ip-address=127.0.0.1",
            f"--ray-client-server-port={pick()}",
            f"--dashboard-agent-listen-port={agent_port}", "--num-cpus=2",
            f"--temp-dir={temp}", "--disable-usage-stats"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    return RayHead(f"http://127.0.0.1:{dashboard}", proc, log)


def wait_ready(head: RayHead, *, last: bool) -> bool:
    """Wait until the head has run a no-op job (READY_PROBE) to its end: its dashboard
    answers before its dashboard agent, which Ray's job API hands each job to, has
    registered (a job submitted before then waits 10 s and is refused, "No available
    agent to submit job"), and the job also needs its raylet and a worker. True when it
    did; False when `ray start` exited first and this is not the `last` try; else the
    test fails with what Ray said and the head's logs."""
    from runwatch.jobs.ray_executor import RayUnavailable, connect

    submitted: list[bool] = []  # one once the head took the job
    said = ["its dashboard did not answer"]  # what the head said last
    status = [""]

    def ran() -> bool:
        if head.proc.poll() is not None:
            return True
        try:
            client = connect(head.address)
            if not submitted:
                try:
                    client.submit_job(entrypoint="true", submission_id=READY_PROBE)
                except RuntimeError as exc:  # taken by a try whose answer timed out
                    if "already exists" not in str(exc):
                        raise
                submitted.append(True)
            info = client.get_job_info(READY_PROBE)
        except (RayUnavailable, OSError, RuntimeError) as exc:
            said[0] = f"{type(exc).__name__}: {exc}"
            return False
        status[0] = str(getattr(info.status, "value", info.status))
        said[0] = f"Ray says the job is {status[0]}: {info.message or ''}".strip()
        return status[0] in ("SUCCEEDED", "FAILED", "STOPPED")

    with reported(head, lambda: f"last: {said[0]}"):
        wait_for(ran, what="the Ray head to run a no-op job", deadline=HEAD_DEADLINE_S,
                 interval=0.5)
    if head.proc.poll() is None:
        if status[0] != "SUCCEEDED":
            head_failed(head, f"the Ray head did not run a no-op job ({said[0]})")
        return True
    if last:
        head_failed(head, f"ray start exited {head.proc.returncode} before the head ran a "
                          f"job, {START_TRIES} times")
    return False


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


def head_logs(head: RayHead) -> str:
    """The ends of what the head wrote (`ray start`'s own log, and the logs under its
    session that say why a job was not taken, started or run), for a failure message."""
    session = head.log.parent / "session_latest" / "logs"
    logs = [head.log, *(session / name for name in HEAD_LOGS)]
    return "".join(f"\n--- {log.name} ends:\n{log.read_text(errors='replace')[-2000:]}"
                   for log in logs if log.is_file())


def head_failed(head: RayHead, why: str) -> NoReturn:
    """Fail the test saying `why`, whether `ray start` still runs, and the head's logs."""
    code = head.proc.poll()
    pytest.fail(f"{why}; `ray start` {'still runs' if code is None else f'exited {code}'}. "
                + head_logs(head), pytrace=False)


def head_gone(head: RayHead, exc: Exception) -> NoReturn:
    """Fail with what the shared Ray head left in its logs: its dashboard answered when it
    started, and no longer does."""
    head_failed(head, f"the shared Ray head stopped answering ({exc})")


@contextlib.contextmanager
def reported(head: RayHead, said: Callable[[], str]) -> Iterator[None]:
    """Where a wait inside gives up (`wait_for`'s failure), fail instead with what it
    waited for, what `said()` tells of it then, and the head's logs."""
    try:
        yield
    except pytest.fail.Exception as exc:
        head_failed(head, f"{exc.msg}: {said()}")


def told(head: RayHead, engine: Engine, *names: str) -> str:
    """What the index and Ray say of runs `names` (each attempt's Ray job: status, error
    type, message) and the end of their worker's log, for a failure message."""
    from runwatch.jobs.ray_executor import connect

    lines = []
    for name in names:
        try:
            row = run_row(engine, name)
        except Exception as exc:  # a report must not hide the failure
            lines.append(f"{name}: not in the index ({exc})")
            continue
        lines.append(f"{name}: {row.status} attempt {row.attempt} ({row.reason_code}: "
                     f"{row.reason})")
        for attempt in range(1, (row.attempt or 1) + 1):
            job_id = f"runwatch-{row.run_id}-{attempt}"
            try:
                info = connect(head.address).get_job_info(job_id)
                lines.append(f"  Ray job {job_id}: {getattr(info.status, 'value', info.status)}"
                             f" {getattr(info.error_type, 'value', info.error_type) or ''} "
                             f"{(info.message or '').strip()[:500]}")
            except Exception as exc:
                lines.append(f"  Ray job {job_id}: not known to Ray ({exc})")
        runs_dir = Path(row.dir).parent
        for log in sorted(runs_dir.parent.glob("worker-*.log")):
            lines.append(f"--- {log.name} ends:\n{log.read_text(errors='replace')[-2000:]}")
    return "\n".join(dict.fromkeys(lines))


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


def wait_ended(engine: Engine, name: str, head: RayHead | None = None) -> Any:
    """Wait until job `name` was concluded and its end indexed (the job is released just
    before the run folder is indexed); its runs row. Given the `head` it ran on, a wait
    that gives up says what the index, Ray and the worker say of it."""
    with (contextlib.nullcontext() if head is None
          else reported(head, lambda: told(head, engine, name))):
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
