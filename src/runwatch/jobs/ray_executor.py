"""Running a worker's jobs on a Ray cluster: each attempt's command (the one a local
worker would start, in the job's folder, with the same RUNWATCH_* variables) is submitted
as a Ray job through Ray's job submission API, at the cluster's dashboard address.

The worker claims, heartbeats, indexes and concludes as it does for local processes
(runwatch.jobs.worker); here is what differs:
- claim: only while the cluster answers (`unavailable`, asked before each claim, and
  every PROBE_S while it does not): a job claimed while it does not would fail
  `could_not_start` at once and spend its attempts.
- start: `submit_job` with the entrypoint `cd CWD && exec ARGV` (run only while the
  attempt's GIVEN_UP note is absent, see below), the attempt's
  environment (plus RUNWATCH_SERVER, RUNWATCH_TOKEN and RUNWATCH_PROJECT where the
  worker has them) as the runtime environment's env_vars, and the job's devices as
  entrypoint CPUs (cpu profile) or GPUs, so Ray places it. Its submission id is
  `runwatch-<run id>-<attempt>`.
- wait: Ray keeps a job PENDING until a node has the devices it asks for free, and then
  sets it RUNNING and starts its entrypoint. Meanwhile it holds no devices: the worker
  records the attempt QUEUED at submission (`queue`, the stage) and PREPARING once Ray
  says the job left PENDING (`RayAttempt.started`), so its device time starts then and
  the wait shows as queue wait; the job's startup timeout bounds the wait as it does
  preparing.
- stop: `stop_job` (Ray sends SIGTERM, then SIGKILL after the cluster's
  RAY_JOB_STOP_WAIT_TIME_S); a kill is the same, Ray has no other. Ray takes a stop of a
  job it has not started (PENDING: no node has the CPUs or GPUs it asks for free) and
  does nothing with it until its own start timeout (RAY_JOB_START_TIMEOUT_SECONDS, 900 s),
  so a stop first writes attempts/<n>/GIVEN_UP, whose presence makes the entrypoint exit
  at once without running the command, and an attempt Ray still reports PENDING after
  that ends there and then (`observed_end`: the cluster had no devices for it); Ray sets
  a job RUNNING before it starts its entrypoint, so one read PENDING after the note was
  written can never run its command.
- output: Ray keeps what the job prints; the worker copies it to attempts/<n>/output.log
  while the job prepares and when it has ended, so the run's logs and its reason read it.
- end: Ray's status, error type and exit code map to `AttemptEnd` (`observed_end`), which
  the failure catalogue classifies like any other attempt's end.
- a dead worker's jobs: a worker that dies leaves its Ray jobs running, and they run on.
  Only a Ray worker's reaper takes them (`executors.REAPS`: a local worker cannot ask Ray); it
  stops a cancelled one at once (`stop_lost`), asks the cluster (`seen`, Ray's status at
  most every POLL_S a job) and concludes such an attempt only once Ray says it ended,
  from Ray's report as its own worker would (a job Ray no longer knows, or a cluster
  silent for UNREACHABLE_S, ends `stopped_early`); so no next attempt starts beside it.
  Each worker's `sweep` (each heartbeat, at most every SWEEP_S) stops the Ray jobs of
  attempts that no worker holds any more or that were cancelled after their worker died
  (`orphaned`), and `start` stops the run's earlier attempts still running (the reaper
  gave one up) and waits, up to EARLIER_WAIT_S, for Ray to say they ended before it
  submits the next one; of these, one Ray has not started is given up (`_forgo`: its
  GIVEN_UP note), not stopped or waited for.

The job writes its run folder itself: on one machine, or where every node sees the runs
folder at the same path (a shared filesystem); see docs/team.md, "Jobs on Ray".
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shlex
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from runwatch.jobs.cost import CPU
from runwatch.jobs.executors import (
    LocalExecutor,
    Seen,
    StartError,
    StartLater,
    note,
    note_cancel,
)
from runwatch.jobs.failures import RAY_HOST_OOM, AttemptEnd
from runwatch.jobs.process import tail
from runwatch.rundir import format as fmt
from runwatch.rundir.atomic import write_atomic
from runwatch.rundir.jsonl import dumps_line
from runwatch.store import jobs as store_jobs
from runwatch.store import schema as s
from runwatch.store.jobs import Claim

log = logging.getLogger(__name__)

# What a job's SDK reads to stream to a team server; forwarded when the worker has them.
FORWARDED_ENV = ("RUNWATCH_SERVER", "RUNWATCH_TOKEN", "RUNWATCH_PROJECT")
# How often a job's status is asked for, and its output copied while it prepares.
POLL_S = 0.5
OUTPUT_EVERY_S = 2.0
# A job whose cluster does not answer for this long (or, once a stop was sent, for the
# stop's grace plus STOP_MARGIN_S) is given up: it ends `stopped_early`.
UNREACHABLE_S = 120.0
STOP_MARGIN_S = 10.0
# How often a worker looks for Ray jobs of attempts no worker holds (one list_jobs).
SWEEP_S = 10.0
# While the cluster does not answer, a worker claims nothing and asks again this often.
PROBE_S = 5.0
# While the cluster refuses jobs for now (StartLater), a worker claims nothing new for
# this long, or until a job it holds is taken.
REFUSED_S = 30.0
# What Ray's job API says of a refusal that passes: its dashboard answers while the agent
# that takes jobs has not registered ("No available agent to submit job, please try again
# later"), or a proxy before it answers 502-504.
RETRY_LATER = ("try again later", "status code 502", "status code 503", "status code 504")
# attempts/<n>/GIVEN_UP: runwatch gave the attempt up; its entrypoint, if Ray ever starts
# it, exits at once without running the command.
GIVEN_UP = "ray_given_up.json"
# How long `start` waits for a run's earlier attempts it stopped to end on Ray (Ray sends
# SIGKILL after its RAY_JOB_STOP_WAIT_TIME_S, 3 s by default) before it gives up starting.
EARLIER_WAIT_S = 30.0
PREFIX = "runwatch-"
# The most one request to the dashboard may take (Ray's client sets none): a dashboard that
# takes connections and never answers would hold the worker's loop.
REQUEST_TIMEOUT_S = 15.0
INSTALL_HINT = ("install the ray extra, which brings Ray's job submission API: "
                "pip install 'runwatch[ray]'")

TERMINAL = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
# Ray's error types (ray.job_submission.JobErrorType) by what they mean for the attempt.
_NOT_STARTED = frozenset({"RUNTIME_ENV_SETUP_FAILURE", "JOB_SUPERVISOR_ACTOR_START_FAILURE",
                          "JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE",
                          "JOB_ENTRYPOINT_COMMAND_START_ERROR"})
_NO_DEVICES = frozenset({"JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE",
                         "JOB_SUPERVISOR_ACTOR_START_TIMEOUT"})
_NODE_LOST = "JOB_SUPERVISOR_ACTOR_DIED"
# The shell running the entrypoint could not enter the folder or run the program:
# "/bin/sh: 1: exec: prog: not found", "... cd: can't cd to DIR" (exit 127, 126 or 2).
_SHELL_REFUSED = re.compile(r"^(?:/bin/)?sh: .*?\b(?:exec|cd): ", re.MULTILINE)
_SHELL_CODES = frozenset({2, 126, 127})


class RayUnavailable(Exception):
    """The Ray executor cannot be used; the message says why and what to do."""


class RayTimeout(OSError):
    """A request to the Ray dashboard got no answer within the client's timeout."""


def connect(address: str, timeout: float = REQUEST_TIMEOUT_S) -> Any:
    """A job submission client of the Ray cluster whose dashboard is at `address`
    (http://HOST:PORT), each of whose requests raises RayTimeout past `timeout` seconds.
    Raises RayUnavailable when Ray's job API is not installed or nothing answers there."""
    try:
        import requests
        from ray.job_submission import JobSubmissionClient
    except ImportError:
        raise RayUnavailable(f"Ray is not installed here: {INSTALL_HINT}") from None
    if not address.startswith(("http://", "https://")):
        raise RayUnavailable(f"--address {address!r} is not a dashboard URL: pass the Ray "
                             "dashboard's address, such as http://127.0.0.1:8265")

    class Client(JobSubmissionClient):
        def _do_request(self, method: str, endpoint: str, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", timeout)  # passed on to requests.request
            try:
                return super()._do_request(method, endpoint, **kwargs)
            except requests.Timeout:
                raise RayTimeout(f"the Ray dashboard at {address} did not answer {method} "
                                 f"{endpoint} within {timeout:g} s") from None

    try:
        return Client(address)
    except RayTimeout as exc:
        raise RayUnavailable(f"{exc}: is the cluster's head overloaded, or is something "
                             "other than a Ray dashboard listening there? pass the "
                             "dashboard's address with --address") from None
    except (OSError, RuntimeError) as exc:
        if "ray[default]" in str(exc):
            raise RayUnavailable(f"Ray's job submission API is missing: {INSTALL_HINT}") from None
        raise RayUnavailable(f"no Ray dashboard answers at {address} ({exc}): start the "
                             "cluster with its dashboard (ray start --head "
                             "--include-dashboard=true) or pass its dashboard's address with "
                             "--address") from None


def entrypoint(argv: list[str], cwd: str, given_up: Path) -> str:
    """The shell command Ray runs for an attempt: its command, in its folder, unless the
    attempt's `given_up` note exists (runwatch gave it up before Ray started it)."""
    return (f"if [ -e {shlex.quote(str(given_up))} ]; then echo 'runwatch: this attempt "
            "was given up before Ray started it, so its command does not run' >&2; exit 1; "
            f"fi; cd {shlex.quote(cwd)} && exec {shlex.join(argv)}")


def given_up_path(run_dir: Path, attempt: int) -> Path:
    """attempts/<attempt>/GIVEN_UP of the run in `run_dir`."""
    return fmt.attempt_dir(run_dir, attempt) / GIVEN_UP


def give_up(path: Path, job_id: str) -> bool:
    """Write the note `path` (`given_up_path`) that keeps Ray job `job_id` from running
    its command if Ray starts it from now on; False (logged) when the disk refused it or
    the run's folder is gone (it is not made again)."""
    try:
        if not path.parents[2].is_dir():
            raise FileNotFoundError(f"the run's folder {path.parents[2]} is gone")
        write_atomic(path, dumps_line({"ts": time.time(), "job": job_id}))
    except OSError as exc:
        log.warning("Ray job %s: cannot write %s (%s); were Ray to start it, it would run "
                    "its command", job_id, path, exc)
        return False
    return True


def submission_id(claim: Claim) -> str:
    """The Ray job of an attempt: `ray job status|logs|stop` take it."""
    return f"{PREFIX}{claim.run_id}-{claim.attempt}"


def parse_submission_id(job_id: str) -> tuple[str, int] | None:
    """(run id, attempt) of a Ray job runwatch submitted; None for any other job."""
    run_id, _, attempt = job_id.removeprefix(PREFIX).rpartition("-")
    if not job_id.startswith(PREFIX) or not run_id or not attempt.isdigit():
        return None
    return run_id, int(attempt)


def job_status(info: Any) -> str:
    """Ray's status of a job (JobDetails.status, an enum or its name) as its name."""
    return str(getattr(info.status, "value", info.status))


def unknown_job(exc: Exception) -> bool:
    """Whether a failed request to the dashboard says Ray knows no such job."""
    return " 404" in str(exc) or "does not exist" in str(exc)


def orphaned(attempt: int, row: Any, now: float) -> str | None:
    """Why the Ray job of `attempt` runs with no worker to watch it (so it is to be
    stopped), from its run's row (runs.status + the jobs row + its holder's
    heartbeat_timeout_s); None while a live worker holds it, or when the run is not this
    index's (`row` None)."""
    if row is None:
        return None
    if row.attempt != attempt:
        return f"attempt {row.attempt} of its run is the current one"
    lost = store_jobs.lost(row.heartbeat_at, row.heartbeat_timeout_s, now)
    held = row.worker_id is not None and not lost
    if row.status in fmt.TERMINAL_PHASES and not held:
        # a live holder watches its job to the process's exit: what runs after the SDK's
        # finish() (saving a checkpoint, an evaluation after &&) is left to end
        return f"its run ended {row.status}"
    if row.worker_id is None:
        return "no worker holds it"
    if row.cancel_requested_at is not None and lost:
        return f"it was cancelled and worker {row.worker_id}, which held it, stopped heartbeating"
    return None


class RayExecutor:
    """Starts attempts as jobs of the Ray cluster `client` talks to (see `connect`)."""

    name = "ray"
    queue: str | None = "waiting for the Ray cluster to start it"

    def __init__(self, client: Any, address: str,
                 environ: Mapping[str, str] | None = None) -> None:
        self.client = client
        self.address = address
        self._here = LocalExecutor()  # what answers for a local worker's processes
        source = os.environ if environ is None else environ
        self.forwarded = {k: source[k] for k in FORWARDED_ENV if source.get(k)}
        self._swept_at: float | None = None
        # why the cluster did not answer its last request (None: it did), and when asked
        self._silent: str | None = None
        self._heard_at = 0.0
        # why the cluster refuses jobs for now, and since when (StartLater)
        self._refused: tuple[str, float] | None = None
        # the Ray jobs of dead workers' attempts the reaper asks about, by submission id
        self._reaped: dict[str, RayAttempt] = {}

    def _running(self) -> list[tuple[str, str, int, str]]:
        """(submission id, run id, attempt, Ray's status) of the Ray jobs runwatch
        submitted that have not ended."""
        found = []
        for info in self.client.list_jobs():
            status = job_status(info)
            parsed = parse_submission_id(info.submission_id or "")
            if parsed is not None and status not in TERMINAL:
                found.append((info.submission_id, *parsed, status))
        return found

    def _heard(self, exc: Exception | None) -> None:
        """Whether the cluster answered a request (`exc` None) or not; said in the log
        once as it stops answering and once as it answers again."""
        self._heard_at = time.monotonic()
        if exc is None:
            if self._silent is not None:
                log.warning("the Ray cluster at %s answers again: this worker claims jobs "
                            "again", self.address)
            self._silent = None
            return
        if self._silent is None:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            log.warning("the Ray cluster at %s does not answer (%s): this worker claims no "
                        "job until it does, and asks it again every %g s", self.address,
                        first, PROBE_S)
        self._silent = f"its Ray cluster at {self.address} does not answer"

    def unavailable(self) -> str | None:
        """Why no job can be started now: the cluster refused one for now within
        REFUSED_S (its dashboard answers then, so it is not asked), or did not answer
        (asked each call while it answers, every PROBE_S while it does not); None when it
        answers."""
        if self._refused is not None and time.monotonic() - self._refused[1] < REFUSED_S:
            return self._refused[0]
        if self._silent is not None and time.monotonic() - self._heard_at < PROBE_S:
            return self._silent
        try:
            self.client.get_version()
        except (OSError, RuntimeError) as exc:
            self._heard(exc)
            return self._silent
        self._heard(None)
        return None

    def found_unavailable(self) -> str | None:
        """Why the cluster could not start jobs when last asked (by `unavailable` before a
        claim, or a sweep, every SWEEP_S); None when it answered."""
        if self._refused is not None and time.monotonic() - self._refused[1] < REFUSED_S:
            return self._refused[0]
        return self._silent

    def _forgo(self, job_id: str, note_path: Path, why: str) -> bool:
        """Make sure Ray job `job_id`, PENDING when listed, never runs its command: its
        GIVEN_UP note, then Ray asked again. True when it was still PENDING (Ray sets a
        job RUNNING before it starts its entrypoint, which will find the note; a stop is
        sent too); False when it started meanwhile or the note could not be written:
        stop it as a running job."""
        if not note_path.exists():
            if not give_up(note_path, job_id):
                return False
            log.warning("Ray job %s has not started (Ray says PENDING) and no worker watches "
                        "it (%s): given up, so were Ray to start it, it would exit at once "
                        "without running its command", job_id, why)
        try:
            pending = job_status(self.client.get_job_info(job_id)) == "PENDING"
        except (OSError, RuntimeError):
            return False
        if pending:
            with contextlib.suppress(OSError, RuntimeError):
                self.client.stop_job(job_id)
        return pending

    def _stop(self, job_id: str, why: str) -> None:
        try:
            self.client.stop_job(job_id)
        except (OSError, RuntimeError) as exc:
            log.warning("Ray job %s: %s, but the stop was not taken (%s); asked again at "
                        "the next sweep", job_id, why, exc)
            return
        log.warning("Ray job %s was still running with no worker watching it (%s): "
                    "stopped", job_id, why)

    def sweep(self, engine: Engine, now: float) -> None:
        """Stop the Ray jobs of this index's runs whose attempt no live worker holds
        (see `orphaned`); at most every SWEEP_S. A cluster that does not answer is asked
        again at the next sweep."""
        mono = time.monotonic()
        if self._swept_at is not None and mono - self._swept_at < SWEEP_S:
            return
        self._swept_at = mono
        try:
            running = self._running()
        except (OSError, RuntimeError) as exc:
            self._heard(exc)  # asked again at the next sweep
            return
        self._heard(None)
        if not running:
            return
        with engine.connect() as conn:
            rows = {row.run_id: row for row in conn.execute(
                select(s.runs.c.run_id, s.runs.c.status, s.runs.c.dir, s.jobs.c.attempt,
                       s.jobs.c.worker_id,
                       s.jobs.c.heartbeat_at, s.jobs.c.cancel_requested_at,
                       store_jobs.holder_timeout().label("heartbeat_timeout_s"))
                .join(s.jobs, s.jobs.c.run_pk == s.runs.c.pk)
                .outerjoin(s.workers, s.workers.c.id == s.jobs.c.worker_id)
                .where(s.runs.c.run_id.in_({run_id for _, run_id, _, _ in running})))}
        for job_id, run_id, attempt, status in running:
            row = rows.get(run_id)
            why = orphaned(attempt, row, now)
            if row is None or why is None:
                continue
            # a job Ray has not started takes no stop: it is given up instead
            if status != "PENDING" or not self._forgo(
                    job_id, given_up_path(Path(row.dir), attempt), why):
                self._stop(job_id, why)

    def seen(self, claim: Claim, job: Mapping[str, Any], host: str | None) -> Seen:
        """For the reaper: what Ray says of the attempt's job (asked as its worker would,
        `RayAttempt.poll`): running until Ray reports its end, then that end; a job Ray
        does not know (its worker died before submitting it, or the head was restarted)
        or a cluster silent for UNREACHABLE_S ends as lost. An attempt with a pid is a
        process a local worker started: its process group is checked (`seen_here`)."""
        if job.get("pid"):
            return self._here.seen(claim, job, host)
        job_id = submission_id(claim)
        attempt = self._reaped.setdefault(job_id, RayAttempt(
            self.client, job_id, fmt.attempt_dir(Path(claim.dir), claim.attempt)
            / fmt.OUTPUT_LOG, header=f"runwatch: Ray job {job_id} at {self.address}\n"))
        if not attempt.poll():
            return Seen(running=True, started=attempt.started)
        del self._reaped[job_id]
        return Seen(running=False, started=attempt.started, end=attempt.end(
            cancel_requested=job.get("cancel_requested_at") is not None,
            startup_timed_out=False))

    def stop_lost(self, claim: Claim, job: Mapping[str, Any], host: str | None,
                  grace_s: float) -> bool:
        """A lost worker's cancelled Ray job is stopped (`stop_job`, sent again while not
        taken; Ray SIGKILLs it after its own stop wait), at once rather than at the next
        sweep; a process a local worker started, as the local executor stops it."""
        if job.get("pid"):
            return self._here.stop_lost(claim, job, host, grace_s)
        attempt = self._reaped.get(submission_id(claim))
        if attempt is None:
            return False
        note_cancel(claim)
        attempt.stop(grace_s)
        return True

    def _wait_ended(self, job_ids: list[str], claim: Claim) -> None:
        """Wait, up to EARLIER_WAIT_S, until Ray says each of `job_ids` (earlier attempts
        of the run, just stopped) ended; raise StartError when one still runs then (or
        the cluster did not say), so no attempt runs beside an earlier one."""
        deadline = time.monotonic() + EARLIER_WAIT_S
        left = list(job_ids)
        while left:
            for job_id in list(left):
                try:
                    info = self.client.get_job_info(job_id)
                except (OSError, RuntimeError) as exc:
                    if unknown_job(exc):
                        left.remove(job_id)  # Ray no longer knows it: nothing of it runs
                    continue
                if job_status(info) in TERMINAL:
                    left.remove(job_id)
            if not left:
                return
            if time.monotonic() >= deadline:
                raise StartError(f"Ray job {left[0]}, an earlier attempt of this run, still "
                                 f"ran {EARLIER_WAIT_S:g} s after it was stopped: attempt "
                                 f"{claim.attempt} was not started beside it")
            time.sleep(POLL_S)

    def start(self, claim: Claim, env: dict[str, str], output: Path) -> RayAttempt:
        job_id = submission_id(claim)
        try:  # an earlier attempt still running (its worker died) must not run beside it
            listed = [(j, n, status) for j, run_id, n, status in self._running()
                      if run_id == claim.run_id and n < claim.attempt]
        except (OSError, RuntimeError) as exc:  # the sweep stops them once it can
            self._heard(exc)
            listed = []
        earlier = []
        for old, n, status in listed:
            why = f"attempt {claim.attempt} of its run starts"
            # one Ray has not started, given up, cannot run: it is not waited for
            if status != "PENDING" or not self._forgo(
                    old, given_up_path(Path(claim.dir), n), why):
                self._stop(old, why)
                earlier.append(old)
        self._wait_ended(earlier, claim)
        devices: dict[str, float] = (
            {"entrypoint_num_cpus": claim.devices} if claim.device_profile == CPU.name
            else {"entrypoint_num_gpus": claim.devices})
        try:
            self.client.submit_job(
                entrypoint=entrypoint(claim.argv, claim.cwd,
                                      given_up_path(Path(claim.dir), claim.attempt)),
                submission_id=job_id,
                runtime_env={"env_vars": {**self.forwarded, **env}},
                metadata={"runwatch_run": claim.name, "runwatch_attempt": str(claim.attempt)},
                **devices)
        except (OSError, RuntimeError) as exc:
            if isinstance(exc, RayTimeout):  # it may have been taken: nothing runs untracked
                give_up(given_up_path(Path(claim.dir), claim.attempt), job_id)
                with contextlib.suppress(OSError, RuntimeError):
                    self.client.stop_job(job_id)
            if isinstance(exc, OSError):  # no claim until the cluster answers again
                self._heard(exc)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if not isinstance(exc, OSError) and any(words in str(exc) for words in RETRY_LATER):
                if self._refused is None:
                    log.warning("the Ray cluster at %s refuses jobs for now (%s): this worker "
                                "asks again for the jobs it holds, and claims no other for "
                                "%g s", self.address, first, REFUSED_S)
                self._refused = (f"its Ray cluster at {self.address} refuses jobs for now "
                                 f"({first})", time.monotonic())
                raise StartLater(f"the Ray cluster at {self.address} cannot take the job now "
                                 f"({first})") from None
            raise StartError(f"the Ray cluster at {self.address} did not take the job "
                             f"({first})") from None
        if self._refused is not None:
            log.warning("the Ray cluster at %s takes jobs again", self.address)
            self._refused = None
        log.info("%s attempt %d is Ray job %s", claim.name, claim.attempt, job_id)
        return RayAttempt(self.client, job_id, output,
                          header=f"runwatch: Ray job {job_id} at {self.address}\n")


@dataclass
class RayAttempt:
    """One attempt running as a Ray job; `poll` asks Ray at most every POLL_S."""

    client: Any
    job_id: str
    output: Path
    header: str = ""
    status: str = "PENDING"
    info: Any = None  # Ray's JobDetails once it has ended
    lost: str | None = None  # why its end is unknown (the cluster lost it or stopped answering)
    stop_started: float | None = None
    grace_s: float = 0.0
    _stop_sent: bool = False
    _given_up: bool = False  # its GIVEN_UP note is written
    _ran: bool = False  # Ray was seen to start it (`started`)
    _asked_at: float = 0.0
    _copied_at: float = 0.0
    _size: int = 0
    _unanswered_since: float | None = None

    @property
    def pid(self) -> None:
        return None  # its processes are Ray's, maybe on another machine

    @property
    def started(self) -> bool:
        """Whether Ray started its entrypoint: it was seen RUNNING, or it ended as only a
        job that ran does (SUCCEEDED, or with its entrypoint's exit code). One stopped or
        failed while PENDING never ran."""
        return self._ran

    def poll(self) -> bool:
        if self.info is not None or self.lost is not None:
            return True  # it ended (or was given up) at an earlier poll
        now = time.monotonic()
        if now - self._asked_at < POLL_S:
            return False
        self._asked_at = now
        if self.stop_started is not None:
            # the note before the status is read: a job read PENDING after it cannot run
            self._given_up = self._given_up or give_up(self.given_up, self.job_id)
            if not self._stop_sent:
                self._send_stop()
        try:
            info = self.client.get_job_info(self.job_id)
        except (OSError, RuntimeError) as exc:
            if unknown_job(exc):
                return self._give_up("the Ray cluster no longer knows the job (its head was "
                                     "restarted, or the job was deleted)")
            return self._unanswered(now, exc)
        self._unanswered_since = None
        self.status = job_status(info)
        if self.status == "PENDING" and (self._given_up or self.given_up.exists()):
            return self._not_started(info)
        self._ran = self._ran or self.status == "RUNNING" or self.status == "SUCCEEDED" or (
            self.status in TERMINAL and getattr(info, "driver_exit_code", None) is not None)
        if self.status not in TERMINAL:
            return False
        self.info = info
        self._copy_output(final=True)
        return True

    @property
    def given_up(self) -> Path:
        """Its GIVEN_UP note, beside its output (attempts/<n>/)."""
        return self.output.parent / GIVEN_UP

    def _not_started(self, info: Any) -> bool:
        """It was stopped (or given up by a worker that died) while Ray had not started it:
        Ray keeps it PENDING, stop or not, until its own start timeout, and its GIVEN_UP
        note keeps it from running its command should Ray start it later, so it ends
        here (`observed_end`: no devices for it)."""
        self.info = info
        self._copy_output(final=True)
        note(self.output, f"runwatch: Ray had not started job {self.job_id} (PENDING) when "
                          "runwatch stopped it, and a stop does not end such a job on Ray; it "
                          "was given up here, and would exit at once, without running its "
                          "command, were Ray to start it later\n")
        return True

    def _unanswered(self, now: float, exc: Exception) -> bool:
        if self._unanswered_since is None:
            self._unanswered_since = now
            log.warning("Ray job %s: the cluster did not answer (%s); asking again",
                        self.job_id, exc)
        limit = UNREACHABLE_S if self.stop_started is None else self.grace_s + STOP_MARGIN_S
        if now - self._unanswered_since < limit:
            return False
        return self._give_up(f"the Ray cluster did not answer for {limit:g} s; the job may "
                             f"still run there: stop it with `ray job stop {self.job_id}`")

    def _give_up(self, why: str) -> bool:
        self.lost = why
        note(self.output, f"runwatch: {why}\n")
        return True

    def stop(self, grace_s: float) -> None:
        if self.stop_started is not None:
            return
        self.stop_started = time.monotonic()
        self.grace_s = grace_s
        self._given_up = give_up(self.given_up, self.job_id)
        self._send_stop()

    def _send_stop(self) -> None:
        try:
            self.client.stop_job(self.job_id)
        except (OSError, RuntimeError) as exc:
            log.warning("Ray job %s: the stop was not taken (%s); asking again",
                        self.job_id, exc)
            return
        self._stop_sent = True

    def kill(self) -> None:
        self.stop(0.0)  # Ray stops a job with SIGTERM, then SIGKILL after its own wait

    def observe(self) -> None:
        """Nothing to watch between polls: Ray reports how its job ended."""

    def output_size(self) -> int:
        if time.monotonic() - self._copied_at >= OUTPUT_EVERY_S:
            self._copy_output()
        return self._size

    def _copy_output(self, final: bool = False) -> None:
        """Copy what Ray kept of the job's output to `output` (and, at its end, Ray's
        word on how it ended when that is not in the output already)."""
        self._copied_at = time.monotonic()
        try:
            text = self.client.get_job_logs(self.job_id)
        except (OSError, RuntimeError) as exc:
            log.warning("Ray job %s: its output could not be read (%s)", self.job_id, exc)
            return
        said = ""
        if final and self.status != "SUCCEEDED" and self.info is not None:
            message = (getattr(self.info, "message", None) or "").strip()
            state = f"ended {self.status}" if self.status in TERMINAL else f"is {self.status}"
            if message and message.splitlines()[0] not in text:
                said = f"runwatch: Ray says the job {state}: {message}\n"
        body = f"{self.header}{text}{said}"
        try:
            self.output.parent.mkdir(parents=True, exist_ok=True)
            self.output.write_text(body, encoding="utf-8")
        except OSError as exc:
            log.warning("Ray job %s: cannot write %s (%s)", self.job_id, self.output, exc)
            return
        self._size = len(body)

    def end(self, *, cancel_requested: bool, startup_timed_out: bool) -> AttemptEnd:
        return observed_end(self.status, self.info, self.lost, tail(self.output),
                            cancel_requested=cancel_requested,
                            startup_timed_out=startup_timed_out)


def observed_end(status: str, info: Any, lost: str | None, output_tail: str, *,
                 cancel_requested: bool, startup_timed_out: bool) -> AttemptEnd:
    """What a worker observed of a Ray job's end, for the failure catalogue:
    - SUCCEEDED, or FAILED by its command's exit code: that exit code (a negative one is
      the signal that ended it); a shell that could not enter the folder or run the
      program (126, 127, its own words in the output) did not start it;
    - STOPPED: stopped by runwatch (a cancel, a startup timeout) or else from outside
      (`ray job stop`), as SIGTERM;
    - PENDING: runwatch stopped it (a cancel, its worker's stop, the startup timeout)
      before Ray started it: the cluster had no devices for it in time;
    - Ray could not set up, schedule or start the job: could not start, or the cluster
      had no devices for it in time;
    - the job's supervisor died (its node was lost) or Ray lost the job: it stopped
      early, unless Ray says its memory ran out (host memory).
    An ended job's end is dated as Ray reports it (`end_time`), when it was seen later.
    """
    end_ms = getattr(info, "end_time", None) if status in TERMINAL else None
    seen: dict[str, Any] = {"stderr_tail": output_tail, "cancel_requested": cancel_requested,
                            "startup_timed_out": startup_timed_out,
                            "ended_at": end_ms / 1000 if isinstance(end_ms, int | float)
                            and not isinstance(end_ms, bool) else None}
    if lost is not None:
        return AttemptEnd(worker_lost=True, **seen)
    error = str(getattr(getattr(info, "error_type", None), "value",
                        getattr(info, "error_type", None)) or "")
    code = getattr(info, "driver_exit_code", None)
    message = str(getattr(info, "message", None) or "")
    if status == "PENDING":
        return AttemptEnd(devices_timed_out=True, **seen)
    if status == "STOPPED":
        return AttemptEnd(signal=signal.SIGTERM, **seen)
    if status == "SUCCEEDED":
        return AttemptEnd(exit_code=0 if code is None else code, **seen)
    if error in _NOT_STARTED:
        return AttemptEnd(start_failed=True, **seen)
    if error in _NO_DEVICES:
        return AttemptEnd(devices_timed_out=True, **seen)
    if error == _NODE_LOST:
        oom = bool(RAY_HOST_OOM.search(message))
        return AttemptEnd(oom_killed=oom, worker_lost=not oom, **seen)
    if code is None:
        return AttemptEnd(**seen)
    started = not (code in _SHELL_CODES and _SHELL_REFUSED.search(output_tail))
    return AttemptEnd.from_returncode(code, start_failed=not started, **seen)
