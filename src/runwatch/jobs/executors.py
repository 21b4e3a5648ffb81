"""What runs a claimed attempt for a worker: an `Executor` starts it and hands back an
`Attempt` the worker polls, stops and reads the end of. `LocalExecutor` (the default)
runs it as a process on this machine (runwatch.jobs.process); the Ray executor
(runwatch.jobs.ray_executor) runs the same command as a Ray job.

Whatever runs it, an attempt gets the same command (`claim.argv` in `claim.cwd`), the
same environment for its SDK (`attempt_env`) and its output in attempts/<n>/output.log,
so the run's folder, its reason and its logs read the same either way.

An attempt holds its devices once its command runs. A local process runs at once; a Ray
job may wait in the cluster's own queue first (Ray keeps it PENDING while no node has
the devices it asks for free). An executor whose attempts wait so names that wait
(`Executor.queue`): its worker then records the attempt QUEUED at submission, and
PREPARING only once the attempt says it has started (`Attempt.started`), so that the
wait costs no device time and shows as the wait it is.

An executor also answers the reaper (runwatch.jobs.reaper) for an attempt whose worker
stopped heartbeating (`seen`): whether it still runs and, once it has ended, what was
observed of its end. The local one checks the attempt's process group where it ran on
this host; the Ray one asks the cluster for the job's status (a process a local worker
started, which has a pid, it checks as the local one does). So a worker reaps only the
attempts of lost workers whose executor it can answer for (`REAPS`): a local worker
cannot ask Ray whether a Ray job still runs, and concluding it unasked would queue the
next attempt beside it. `waits_for` says what such a job waits for when no live worker
can reap it (`held_waits` judges it from the workers' rows: what the workers view and the
run detail say alike). Of a lost worker's attempt that was cancelled, the executor stops what
still runs (`stop_lost`): the local one a process group of this host that carries the
attempt's RUNWATCH_* variables (SIGTERM, the grace, SIGKILL), the Ray one the Ray job;
`lost_cancel` says which live worker that will be, or what the cancel waits for.
"""

from __future__ import annotations

import logging
import signal
import socket
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Engine

from runwatch.jobs import process
from runwatch.jobs.attempts import last_event
from runwatch.jobs.failures import AttemptEnd, ending_signal
from runwatch.jobs.oom import OomWatch
from runwatch.rundir import format as fmt
from runwatch.rundir import stopnote
from runwatch.rundir.append import RunBusy, locked, write_events
from runwatch.store import jobs as store_jobs
from runwatch.store.jobs import Claim

log = logging.getLogger(__name__)

# The phases of an attempt whose command runs: the only ones a CANCEL_REQUESTED follows.
_STARTED = frozenset({"PREPARING", "RUNNING"})

# Which lost workers' attempts a worker of each executor answers for (`Executor.seen`), by
# the lost worker's executor: a local worker sees processes only; a Ray worker asks the
# cluster of a Ray job, and checks a local worker's process as a local worker does.
REAPS: dict[str, frozenset[str]] = {"local": frozenset({"local"}),
                                    "ray": frozenset({"local", "ray"})}
# Each executor's name in words, and how its workers are started (for `waits_for`).
SAID = {"local": ("local", "runwatch worker, or runwatch ui"),
        "ray": ("Ray", "runwatch worker --executor ray --address …")}


def waits_for(executor: str, live: Collection[str]) -> str | None:
    """What a job held by a lost (or stopped) worker of `executor` waits for, in words,
    when no worker of the `live` executors can reap it; None when one can."""
    if any(executor in REAPS.get(kind, ()) for kind in live):
        return None
    kind, how = SAID.get(executor, (executor, f"a worker whose executor is {executor}"))
    return (f"its {kind} worker no longer heartbeats, and no live worker can tell whether "
            f"it still runs: it waits for a {kind} worker ({how}) to reap it")


def held_waits(workers: Sequence[dict[str, Any]], holder: str, now: float) -> str | None:
    """What a job worker `holder` holds waits for, given every worker (rows of
    store.jobs.list_workers), as `waits_for` says it: None while its holder lives, or
    when a live worker can reap it. A holder no worker row names counts as a local
    worker, as the reaper counts it. What the workers view says of each job and the run
    detail's `job.waits_for` (jobs.control.queued_waits) alike."""
    row = next((w for w in workers if w["id"] == holder), None)
    if row is not None and store_jobs.live(row, now):
        return None
    running = {str(w["executor"]) for w in workers if store_jobs.live(w, now)}
    return waits_for("local" if row is None else str(row["executor"]), running)


def lost_cancel(worker: str, executor: str, host: str | None,
                live: Collection[tuple[str, str]]) -> str:
    """What becomes of a cancelled job whose worker `worker` (of `executor`, on `host`) is
    lost, in words, given the live workers' (executor, host): a worker that reaps it
    (`REAPS`) stops it where `stop_lost` can, a Ray job from anywhere and a process from
    its own host only."""
    kind, how = SAID.get(executor, (executor, f"a worker whose executor is {executor}"))
    what = "Ray job" if executor == "ray" else "process"
    reapers = [(e, h) for e, h in live if executor in REAPS.get(e, ())]
    where = "" if executor == "ray" else f" on {host or 'the host it ran on'}"
    stoppers = [h for _, h in reapers if executor == "ray" or h == host]
    lost = f"its worker {worker} no longer heartbeats"
    if stoppers:
        return (f"{lost}: a live worker{where} stops its {what} as it reaps that worker's "
                "jobs; it ends CANCELLED then")
    if reapers:  # a process of another host: a worker here can end the job, not stop it
        return (f"{lost} and no live worker runs{where}, so nothing can tell its {what} to "
                f"stop: stop it there yourself, or start a worker there ({how}), which "
                "stops it; it ends CANCELLED once no process records the run")
    return (f"{lost}, so nothing can tell its {what} to stop yet: it waits for a {kind} "
            f"worker ({how}){where}, which stops it as it reaps that worker's jobs; it "
            "ends CANCELLED then")


class StartError(Exception):
    """An attempt could not be started; the message says why, in the job's own terms."""


class StartLater(StartError):
    """An attempt could not be started now, for a cause its cluster says will pass (a Ray
    head whose dashboard answers but whose job agent is not up yet): the worker keeps the
    claim and asks again, without spending the attempt, until its startup timeout."""


@dataclass(frozen=True)
class Seen:
    """What an executor can tell of an attempt whose worker stopped heartbeating."""

    running: bool  # something of it still runs (or may: asked again next heartbeat)
    # its command has started (it holds its devices, or held them): what the reaper
    # records of an attempt that waited in its cluster's queue (reaper.record_start)
    started: bool = False
    # once it has ended, what was observed of its end; None: only that nothing of it is
    # left (its exit status went with its worker), or that it cannot be seen from here
    end: AttemptEnd | None = None


def seen_here(job: Mapping[str, Any], host: str | None) -> Seen:
    """A process a worker on this host started (the job's `pid`, its process group's
    leader): running while anything of its group is left. An attempt with no pid, or
    one started on another host, cannot be seen from here: taken as ended."""
    pid = job.get("pid")
    if pid and host == socket.gethostname():
        return Seen(running=process.group_alive(int(pid)))
    return Seen(running=False)


class Attempt(Protocol):
    """A started attempt, seen from the worker that holds it. Nothing here blocks long:
    the worker calls it once a tick."""

    output: Path  # attempts/<n>/output.log: what the attempt printed

    @property
    def stop_started(self) -> float | None:
        """When a stop (or kill) was sent (monotonic), None before."""

    @property
    def pid(self) -> int | None:
        """Its process group on this machine (what the reaper checks), or None."""

    @property
    def started(self) -> bool:
        """Whether its command has started, holding its devices (a job its cluster keeps
        queued has not); once True, True for good."""

    def poll(self) -> bool:
        """Whether it has ended and nothing of it is left running."""

    def stop(self, grace_s: float) -> None:
        """Ask it to stop (SIGTERM), and kill it after `grace_s` seconds; asking again
        changes nothing."""

    def kill(self) -> None:
        """End it now with no SIGTERM first where its runner allows (a stuck start)."""

    def observe(self) -> None:
        """Called each heartbeat while it runs (evidence of how it may end)."""

    def output_size(self) -> int:
        """How much it has printed so far (progress while it prepares)."""

    def end(self, *, cancel_requested: bool, startup_timed_out: bool) -> AttemptEnd:
        """What was observed of its end, once `poll` said it ended."""


class Executor(Protocol):
    """Starts attempts. `start` raises OSError or StartError when it cannot."""

    name: str
    # None: an attempt it starts runs at once, holding its devices (PREPARING from its
    # start); else the stage of the QUEUED event in which its attempts wait in a queue of
    # their own (a Ray cluster's) until `Attempt.started`
    queue: str | None

    def start(self, claim: Claim, env: dict[str, str], output: Path) -> Attempt: ...

    def unavailable(self) -> str | None:
        """Why it cannot start an attempt now, in words (a Ray cluster that does not
        answer), so that its worker claims nothing meanwhile; None when it can."""

    def found_unavailable(self) -> str | None:
        """What `unavailable` or a sweep last found, without asking again: for the
        worker's row, which `runwatch resources` and a submit read."""

    def sweep(self, engine: Engine, now: float) -> None:
        """Called each heartbeat: stop what is left running of attempts that no live worker
        holds any more (their worker died), where the reaper cannot see it."""

    def seen(self, claim: Claim, job: Mapping[str, Any], host: str | None) -> Seen:
        """For the reaper: attempt `claim.attempt`, whose worker (on `host`, None when
        unknown) stopped heartbeating, from its jobs row `job` (pid,
        cancel_requested_at): whether it still runs, and how it ended once it has."""

    def stop_lost(self, claim: Claim, job: Mapping[str, Any], host: str | None,
                  grace_s: float) -> bool:
        """For the reaper, each heartbeat while `seen` says so: stop what still runs of
        a lost worker's attempt that was cancelled (SIGTERM, then SIGKILL after
        `grace_s`, or the runner's own way). False when it cannot be stopped from here
        (another host, or nothing proves the process is the attempt's)."""


def attempt_env(claim: Claim) -> dict[str, str]:
    """What an attempt's `runwatch.init()` reads to attach to its run and attempt."""
    return {fmt.ENV_RUN_DIR: str(Path(claim.dir)), fmt.ENV_RUN_ID: claim.run_id,
            fmt.ENV_ATTEMPT: str(claim.attempt)}


def note(output: Path, text: str) -> None:
    """Append `text` (what runwatch has to say of the attempt, such as why it could not
    start) to an attempt's output file, where possible; else log it."""
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        with open(output, "a", encoding="utf-8") as f:
            f.write(text)
    except OSError:
        log.warning("%s", text.strip())


class LocalAttempt:
    """An attempt running as a process group of this machine, watched for the OOM killer."""

    def __init__(self, proc: process.JobProcess) -> None:
        self.proc = proc
        self.output = proc.output
        self.oom = OomWatch(proc.pid)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def started(self) -> bool:
        return True  # a process of this machine runs from its start

    @property
    def stop_started(self) -> float | None:
        return self.proc.stop_started

    def poll(self) -> bool:
        return self.proc.poll() is not None

    def stop(self, grace_s: float) -> None:
        self.proc.stop(grace_s)

    def kill(self) -> None:
        self.proc.kill()  # no SIGTERM: the SDK would record it CANCELLED

    def observe(self) -> None:
        self.oom.observe()

    def output_size(self) -> int:
        try:
            return self.output.stat().st_size
        except OSError:
            return 0

    def end(self, *, cancel_requested: bool, startup_timed_out: bool) -> AttemptEnd:
        rc = self.proc.popen.returncode  # set once its main process was reaped
        if rc is None:  # it outlived SIGKILL (stuck in the kernel): count it killed
            rc = -signal.SIGKILL
        return AttemptEnd.from_returncode(
            rc, oom_killed=self.oom.killed(ending_signal(rc)), stderr_tail=self.proc.output_tail(),
            cancel_requested=cancel_requested, startup_timed_out=startup_timed_out)


def note_cancel(claim: Claim, by: str = "reaper") -> None:
    """What job control writes before a cancel's SIGTERM: the cancel's note in the
    attempt's folder (runwatch.rundir.stopnote), so that its SDK records the end as a
    cancel, not a stop from outside; and, for a process that does not record with the
    SDK (the folder is not held), CANCEL_REQUESTED, so that the grace it stops in is not
    counted as PREPARING; not once the attempt has ended (an SDK that finished while its
    process exits), nor while it has not started (QUEUED in its cluster's queue: it holds
    no devices, and ends CANCELLED from there)."""
    run_dir = Path(claim.dir)
    try:
        stopnote.write_cancel(run_dir, claim.attempt, by)
    except OSError as exc:  # its end is still a cancel, from the index's request
        log.error("cannot note in %s that it is cancelled: %s", claim.dir, exc)
    try:
        with locked(run_dir, 0.0):
            last = last_event(run_dir)
            if last is not None and last.get("phase") in _STARTED \
                    and last.get("attempt", claim.attempt) == claim.attempt:
                write_events(run_dir, [{"phase": "CANCEL_REQUESTED",
                                        "attempt": claim.attempt}])
    except (RunBusy, OSError):
        pass  # held: its SDK records its own


class LocalExecutor:
    """Runs each attempt as a process in a session of its own on this machine, with the
    worker's environment plus the attempt's (runwatch.jobs.process.start)."""

    name = "local"
    queue: str | None = None

    def __init__(self) -> None:
        # lost workers' cancelled attempts being stopped: when SIGTERM went to each group
        self._stopping: dict[tuple[int, int], float] = {}

    def start(self, claim: Claim, env: dict[str, str], output: Path) -> LocalAttempt:
        return LocalAttempt(process.start(claim.argv, Path(claim.cwd), env, output))

    def unavailable(self) -> None:
        """Nothing: this machine starts its processes (a failed start is the job's)."""

    def found_unavailable(self) -> None:
        """Nothing, as `unavailable`."""

    def sweep(self, engine: Engine, now: float) -> None:
        """Nothing: a dead worker's processes on this host are the reaper's (it waits for
        their process group to be gone)."""

    def seen(self, claim: Claim, job: Mapping[str, Any], host: str | None) -> Seen:
        seen = seen_here(job, host)
        if not seen.running:
            self._stopping.pop((claim.run_pk, claim.attempt), None)
        return seen

    def stop_lost(self, claim: Claim, job: Mapping[str, Any], host: str | None,
                  grace_s: float) -> bool:
        """SIGTERM the attempt's process group, and SIGKILL it once `grace_s` has passed,
        when it runs on this host and one of its processes carries the attempt's
        environment (`attempt_env`): a pid the system gave again to another process
        after the attempt's group had gone is never signalled."""
        pid = job.get("pid")
        if not pid or host != socket.gethostname():
            return False
        if not process.group_carries(int(pid), attempt_env(claim)):
            return False
        key = (claim.run_pk, claim.attempt)
        if key not in self._stopping:
            log.warning("%s attempt %d was cancelled after its worker stopped heartbeating: "
                        "its process group %d is stopped here", claim.name, claim.attempt, pid)
            self._stopping[key] = time.monotonic()
            note_cancel(claim)
            process.signal_group(int(pid), signal.SIGTERM)
        elif time.monotonic() - self._stopping[key] >= grace_s:
            process.signal_group(int(pid), signal.SIGKILL)
        return True
