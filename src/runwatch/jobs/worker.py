"""The worker: claims queued jobs from the index and runs each as a process of its own.

One loop (`Worker.tick`, every TICK_S) does everything but the stamp:
- every `heartbeat_s`, from a thread of its own that lives as long as `run_forever`: stamp
  the worker and its jobs, while the loop has moved within `stall_timeout_s`. A tick can
  take long (indexing a big run; in `runwatch ui` the index lock it shares with the index
  loop, whose one pass over a 2M-point run takes ~30 s), and a stamp behind it went stale:
  another worker's reaper concluded the job "stopped_early" although its worker lived (a
  command that had exited 0 ended FAILED; a Ray job, with no pid here, could be concluded
  while it ran). But a loop that never moves again (a database call that never returns,
  a filesystem that stopped answering) must not look alive: its jobs' ends would never be
  concluded, nor its claims given back. So each step of the loop marks its progress, and
  a loop that has not moved for `stall_timeout_s` (STALL_TIMEOUT_S, far past any step of a
  healthy loop) gets no more stamps: the worker shows lost, and the others reap its jobs
  as a dead worker's. Once its loop moves again it stamps again and lets go of what was
  concluded meanwhile; it starts no claim it no longer holds. `tick` stamps only when no
  such thread runs (a caller that ticks by hand);
- every `heartbeat_s`, in the loop: read whether it was told to drain, and reap the jobs of
  lost workers (runwatch.jobs.reaper): each is lost once its last heartbeat is older than
  the `heartbeat_timeout_s` it declared as it registered, as this one declares its own;
- for each running job: see whether its process group has ended; stop it (the cancel's
  note, runwatch.rundir.stopnote, so that its SDK records a cancel rather than a stop
  from outside; SIGTERM, the grace period, SIGKILL to the whole group) when a cancel was
  asked; SIGKILL the group
  when it stayed PREPARING with no new event and no new output for its startup timeout
  (it made no progress, so it has nothing to flush, and the SDK would record a SIGTERM
  as CANCELLED, not the timeout); conclude it once it has ended (reaper.conclude: the
  verdict event unless the process recorded its own end, a requeue when attempts
  remain, the claim released);
- index the folders of its runs, so every surface sees their progress at once;
- claim jobs of its runs folder and device profile while it has free devices, is not
  draining and its executor can start them (a job that asks for another profile waits for
  a worker of that one; a Ray worker claims nothing while its cluster does not answer,
  since each start would fail and spend an attempt of the job), and start each:
  PREPARING {attempt, worker} appended under the folder's lock, then the
  process, in a session of its own, with RUNWATCH_RUN_DIR, RUNWATCH_RUN_ID and
  RUNWATCH_ATTEMPT set and its output in attempts/<n>/output.log (an attempt that resumes
  the run from its checkpoint gets where to resume too: runwatch.jobs.resume). A job holds
  devices of its own: except for the cpu profile, its CUDA_VISIBLE_DEVICES names them
  (`device_ids`).
  An executor whose attempts wait in a queue of their own (a Ray cluster's) gets QUEUED
  {attempt, worker, stage} instead, and PREPARING once the attempt has started
  (reaper.record_start): the wait holds no devices, and its startup timeout covers it.

What starts a job is the worker's executor (runwatch.jobs.executors): a process of this
machine by default, or the same command as a Ray job (runwatch.jobs.ray_executor), which
the worker watches, stops and concludes the same way.

Draining (`runwatch resources` / the API): claim nothing more, finish the running jobs,
then exit. Stopping (SIGTERM or Ctrl-C, `stop_event`): claim nothing more and stop the
running jobs as a cancel would, at once, each after leaving the note that its worker
stopped it (runwatch.rundir.stopnote); each ends CANCELLED `worker_stopped` (its SDK reads
the note and records it so; for a plain command the worker does) and is not queued again,
whatever attempts remain: a next attempt would move the one that trained out of view and
start it over, while the run as it stands can be retried or resumed from its checkpoint
(a job that finished or failed on its own before the stop took effect ends as it
recorded). One whose process group outlives its SIGKILL (a process stuck in the kernel)
is left to the reaper, which concludes it the same way once the group has gone. A worker
that dies (SIGKILL, a lost machine) leaves its jobs to the others' reaper after its
heartbeat timeout.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from runwatch.ingest.indexer import Indexer, IndexReport
from runwatch.jobs import reaper
from runwatch.jobs.cost import CPU, ProfileError, read_profiles
from runwatch.jobs.executors import (
    Attempt,
    Executor,
    LocalExecutor,
    StartError,
    StartLater,
    attempt_env,
    note,
    note_cancel,
)
from runwatch.jobs.failures import AttemptEnd
from runwatch.jobs.resume import restore, resumed
from runwatch.rundir import format as fmt
from runwatch.rundir import stopnote
from runwatch.rundir.append import RunBusy, locked, write_events
from runwatch.store import jobs as store_jobs
from runwatch.store.jobs import Claim, WorkerRow

log = logging.getLogger(__name__)

TICK_S = 0.2
VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
# A stopping worker SIGKILLs what is left this long after its jobs' grace period.
STOP_MARGIN_S = 5.0
# ... and then waits this long for what it SIGKILLed to be gone (a stop takes at most
# grace_s + STOP_MARGIN_S + KILL_WAIT_S, and the concluding).
KILL_WAIT_S = 5.0
# How long a stopping worker waits for the folder of a job it never started, to record its
# cancel there
GIVE_BACK_LOCK_S = 2.0
# A loop whose steps have not moved for this long is taken for hung, and its worker stops
# heartbeating. Ten times the ~30 s a healthy step can take (one index pass over a
# 2M-point run, or the ui's index loop holding the index lock for one), so a loaded
# machine is not taken for a hung one.
STALL_TIMEOUT_S = 300.0
# The phases a job's startup timeout covers: waiting in its cluster's queue, and preparing.
STARTING = ("QUEUED", "PREPARING")


@dataclass
class Job:
    """A job this worker holds: its claim and, once started, its attempt."""

    claim: Claim
    slots: tuple[int, ...] = ()  # which of the worker's devices it holds
    proc: Attempt | None = None
    startup_timeout_s: float | None = None
    cancel: bool = False  # a cancel was asked, and the stop sent
    worker_stopped: bool = False  # stopped because this worker was told to stop
    startup_timed_out: bool = False
    start_error: str | None = None  # why its start event could not be written (tried again)
    # what its executor was asked to start, which its cluster refused for now (StartLater):
    # asked again at a heartbeat once the executor would start jobs, its start event written
    later: tuple[Claim, dict[str, str], Path, int | None] | None = None
    end: AttemptEnd | None = None  # what was observed of its end, once it has ended
    # Its events as read so far (offset and line), its phase, its output's size, and
    # when it last showed progress (a new event or output).
    events_at: tuple[int, int] = (0, 0)
    phase: str = "PREPARING"
    # its start is on record, holding devices from then (False while it waits QUEUED in
    # its cluster's queue: reaper.record_start once it has started)
    start_recorded: bool = True
    output_size: int = 0
    last_event: float = field(default_factory=time.monotonic)

    @property
    def run_dir(self) -> Path:
        return Path(self.claim.dir)


class Worker:
    """Runs the queued jobs of `runs_dir` from `engine`'s index on `devices` devices of
    `device_profile`.

    A job's folder is where the index says (runs.dir), and a worker claims only the jobs
    whose folder is in its `runs_dir`: on an index several machines share, a worker never
    claims a folder it cannot see (workers meant to share jobs see the runs folder at the
    same path: one machine, or a shared filesystem)."""

    def __init__(self, engine: Engine, runs_dir: Path, devices: int = 1,
                 device_profile: str = "cpu", heartbeat_s: float = 2.0,
                 heartbeat_timeout_s: float = store_jobs.HEARTBEAT_TIMEOUT_S,
                 grace_s: float = reaper.GRACE_S,
                 startup_timeout_s: float | None = 600.0, *, indexer: Indexer,
                 index_lock: threading.Lock | None = None,
                 device_ids: Sequence[str] | None = None,
                 executor: Executor | None = None,
                 stall_timeout_s: float = STALL_TIMEOUT_S) -> None:
        if devices < 1:
            raise ValueError(f"a worker needs at least one device, not {devices}")
        if heartbeat_timeout_s <= heartbeat_s:
            raise ValueError(f"a heartbeat timeout of {heartbeat_timeout_s:g} s would call "
                             f"the worker lost between two of its heartbeats, "
                             f"{heartbeat_s:g} s apart: make it longer than that")
        self.engine = engine
        self.runs_dir = str(Path(runs_dir).resolve())
        self._rate_problem = ""  # the profiles' problem last warned of (_rate)
        self.devices = devices
        self.device_profile = device_profile
        self.heartbeat_s = heartbeat_s
        # how long it may go without a heartbeat before it is lost (store.jobs.lost): it
        # declares it as it registers, and the other workers reap its jobs by it
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.grace_s = grace_s
        self.startup_timeout_s = startup_timeout_s
        self.stall_timeout_s = stall_timeout_s
        self.executor: Executor = executor or LocalExecutor()
        # The ids a job's CUDA_VISIBLE_DEVICES names for the devices it holds (None: the
        # worker sets none), see `device_ids`.
        if device_ids is not None and len(device_ids) < devices:
            raise ValueError(f"{devices} devices need as many device ids, not {device_ids}")
        self.device_ids = None if device_ids is None else list(device_ids)
        self._free_slots = set(range(devices))
        # The composition root's indexer (with its hooks), maybe shared (the ui's): every
        # use of it holds `index_lock`.
        self.indexer = indexer
        self.index_lock = index_lock or threading.Lock()
        host = socket.gethostname()
        self.id = f"{host[:40]}:{os.getpid()}:{secrets.token_hex(3)}"
        self.jobs: dict[int, Job] = {}
        self.draining = False
        self.stopping = False
        self._beat_at = 0.0
        self._beating = False  # a stamp thread runs (`_stamp_forever`)
        self._unavailable: str | None = None  # what its row says (`store.jobs.set_unavailable`)
        # When the loop last finished a step (monotonic), and the thread it runs on: what
        # the stamp thread reads to stamp only a loop that moves.
        self._moved_at = time.monotonic()
        self._loop_thread = 0
        with engine.begin() as conn:
            store_jobs.register_worker(conn, WorkerRow(
                id=self.id, host=host, pid=os.getpid(), devices=devices,
                device_profile=device_profile, started_at=time.time(),
                executor=self.executor.name, heartbeat_timeout_s=heartbeat_timeout_s,
                runs_dir=self.runs_dir, hourly_rate=self._rate()))

    @property
    def free_devices(self) -> int:
        return len(self._free_slots)

    def _drop(self, job: Job) -> None:
        """The job is no longer this worker's: its devices are free again."""
        if self.jobs.pop(job.claim.run_pk, None) is not None:
            self._free_slots.update(job.slots)

    def run_forever(self, stop_event: threading.Event) -> None:
        """Tick until drained, or until `stop_event` is set (then stop the running jobs,
        see the module docstring); the worker is marked stopped either way. Its stamps
        come from a thread of its own, while the loop moves, and end with this call."""
        self._loop_thread = threading.get_ident()
        self._moved()
        stamped = threading.Event()
        stop_stamps = threading.Event()
        stamper = threading.Thread(target=self._stamp_forever, args=(stop_stamps, stamped),
                                   name=f"{threading.current_thread().name}-heartbeat",
                                   daemon=True)
        self._beating = True
        stamper.start()
        try:
            stamped.wait()  # the first stamp, before anything is claimed
            while not stop_event.is_set():
                self._safe_tick()
                if self.draining and not self.jobs:
                    return
                stop_event.wait(TICK_S)
            self.stop_jobs()
        finally:
            stop_stamps.set()
            stamper.join()
            self._beating = False
            with self.engine.begin() as conn:
                store_jobs.stop_worker(conn, self.id, time.time())

    def stop_jobs(self) -> None:
        """Claim nothing more; stop every running job (the note that its worker stopped
        it, then SIGTERM, the grace, SIGKILL) and conclude each; give back the jobs not
        started yet."""
        self.stopping = True
        deadline = time.monotonic() + self.grace_s + STOP_MARGIN_S
        for job in self.jobs.values():
            if job.proc is None or job.proc.stop_started is not None or job.proc.poll():
                continue  # not started, stopping already, or ended on its own
            if self._cancel_asked(job):  # before this stop: the user's cancel, as asked
                job.cancel = True
                self._stop_cancelled(job)
                continue
            job.worker_stopped = True
            try:
                stopnote.write(job.run_dir, job.claim.attempt, self.id)
            except OSError as exc:  # its end is still this stop's, from job.worker_stopped
                log.error("cannot note in %s that worker %s stops it: %s", job.run_dir,
                          self.id, exc)
            job.proc.stop(self.grace_s)
        # until the started ones have ended (one not started yet is not started now)
        while (any(job.proc is not None for job in self.jobs.values())
               and time.monotonic() < deadline):
            self._safe_tick()
            time.sleep(TICK_S / 4)
        left: list[Job] = []
        for job in list(self.jobs.values()):
            if job.proc is None:  # not started: back to the queue, or ended if cancelled
                self._give_back(job)
                continue
            job.proc.kill()
            left.append(job)
        # Concluded only once nothing of it runs: a member of its group stuck in the kernel
        # outlives SIGKILL, and a job concluded then would be queued again (or its devices
        # offered) beside it. All of them are waited for together.
        deadline = time.monotonic() + KILL_WAIT_S
        while left and time.monotonic() < deadline:
            for job in [job for job in left if job.proc is not None and job.proc.poll()]:
                left.remove(job)
                self._finish(job)
            time.sleep(TICK_S / 4)
        for job in list(self.jobs.values()):  # still running, or its folder stayed busy
            log.warning("worker %s stops with %s unconcluded; another worker's reaper ends "
                        "it after this worker's heartbeat timeout, once its process has gone",
                        self.id, job.claim.name)
            self._drop(job)

    def _give_back(self, job: Job) -> None:
        """A job this stopping worker claimed and never started: back to the queue, or,
        when a cancel was asked of it, ended CANCELLED as its start would have ended it (no
        worker claims a job a cancel was asked of, so back in the queue it would wait
        there for ever)."""
        if self._cancel_asked(job):
            try:
                with locked(job.run_dir, GIVE_BACK_LOCK_S):
                    # under the lock a reaper concludes under, as _start: a claim reaped
                    # meanwhile is another worker's now, and its run is not ended here
                    if _still_ours(self.engine, job.claim, self.id):
                        write_events(job.run_dir, [reaper.cancelled_event(job.claim.attempt)])
                        with self.engine.begin() as conn:
                            store_jobs.release(conn, job.claim.run_pk, self.id)
            except (RunBusy, OSError) as exc:
                # left held: the reaper of another worker ends it once this one's heartbeat
                # is old (back in the queue, no worker would claim it, nothing would end it)
                log.error("cannot record in %s that %s was cancelled before it started (%s); "
                          "a live worker's reaper ends it", job.run_dir, job.claim.name, exc)
                self._drop(job)
                return
            self._drop(job)
            self._index(job.run_dir)
            return
        with self.engine.begin() as conn:
            store_jobs.release(conn, job.claim.run_pk, self.id)
        self._drop(job)

    def _cancel_asked(self, job: Job) -> bool:
        """Whether a cancel of `job`'s attempt was asked that this worker has not acted on
        yet (asked since its last tick); False when the index cannot say (its stop is this
        stop's)."""
        try:
            with self.engine.connect() as conn:
                return store_jobs.cancel_requested(conn, job.claim.run_pk, job.claim.attempt)
        except SQLAlchemyError as exc:
            log.error("cannot read whether %s was cancelled: %s", job.claim.name, exc)
            return False

    def _safe_tick(self) -> None:
        try:
            self.tick()
        except Exception:  # a database or disk hiccup must not end the worker
            log.exception("worker %s: a pass failed; retrying", self.id)
            time.sleep(1.0)

    def tick(self) -> None:
        """One pass: heartbeat (and reap) when due, watch the jobs, index, claim. Each
        step marks the loop's progress (what the stamp thread waits for)."""
        self._moved()
        mono = time.monotonic()
        beat = mono - self._beat_at >= self.heartbeat_s
        if beat:
            self._heartbeat()
            self._beat_at = mono
            self._moved()
        for job in list(self.jobs.values()):
            self._watch(job, beat)
            self._moved()
        for job in self.jobs.values():
            self._index(job.run_dir)
            self._moved()
        if not (self.draining or self.stopping):
            self._claim()

    def _moved(self) -> None:
        self._moved_at = time.monotonic()

    def _stamp_forever(self, stop: threading.Event, stamped: threading.Event) -> None:
        """Stamp the worker and its jobs every heartbeat_s until `stop` is set, while the
        loop has moved within stall_timeout_s (`stamped` is set after the first try)."""
        stalled = False
        while True:
            still_s = time.monotonic() - self._moved_at
            if still_s <= self.stall_timeout_s:
                if stalled:
                    log.warning("worker %s: its loop moves again; it heartbeats again",
                                self.id)
                stalled = False
                try:
                    with self.engine.begin() as conn:
                        store_jobs.heartbeat(conn, self.id, time.time())
                except Exception:  # a database hiccup: the next stamp tries again
                    log.exception("worker %s: a heartbeat failed; retrying", self.id)
            elif not stalled:
                stalled = True
                log.error("worker %s: its loop has not moved for %.0f s, so it stops "
                          "heartbeating and other workers reap its jobs as a dead worker's; "
                          "the loop waits in:\n%s", self.id, still_s, self._loop_stack())
            stamped.set()
            if stop.wait(self.heartbeat_s):
                return

    def _loop_stack(self) -> str:
        """Where the loop's thread is now (for the log of a loop that stopped moving)."""
        frame = sys._current_frames().get(self._loop_thread)
        return "".join(traceback.format_stack(frame)) if frame is not None else "(gone)"

    def _heartbeat(self) -> None:
        now = time.time()
        with self.engine.begin() as conn:
            if not self._beating:
                store_jobs.heartbeat(conn, self.id, now)
            self.draining = store_jobs.draining(conn, self.id)
        # jobs an executor still runs for attempts no worker holds (a dead worker's Ray jobs)
        self.executor.sweep(self.engine, now)
        why = self.executor.found_unavailable()
        if why != self._unavailable:  # for resources and submit: whether it starts jobs
            with self.engine.begin() as conn:
                store_jobs.set_unavailable(conn, self.id, why)
            self._unavailable = why
        reaper.reap(self.engine, self.id, now, self._index, executor=self.executor,
                    grace_s=self.grace_s)

    def _index(self, run_dir: Path) -> None:
        try:
            with self.index_lock:
                self.indexer.index_run(run_dir, IndexReport())
        except Exception:
            log.exception("indexing %s failed", run_dir)

    def _claim(self) -> None:
        while self.free_devices > 0:
            with self.engine.connect() as conn:
                if store_jobs.queue_depth(conn, self.device_profile, self.runs_dir,
                                          fitting=self.free_devices) == 0:
                    return
            # asked only when a job would be claimed: a queued job too big for the free
            # devices does not have a Ray worker ask its cluster at every tick
            if self.executor.unavailable() is not None:  # it says so in the log
                return
            with self.engine.begin() as conn:
                claim = store_jobs.claim(conn, self.id, self.free_devices, time.time(),
                                         self.device_profile, self.runs_dir)
            if claim is None:
                return
            self._moved()
            lost = self.jobs.get(claim.run_pk)
            if lost is not None:  # reaped while the loop stood still, and queued again
                self._drop(lost)
            timeout = claim.startup_timeout_s
            slots = tuple(sorted(self._free_slots)[:claim.devices])
            self._free_slots.difference_update(slots)
            job = self.jobs[claim.run_pk] = Job(claim, slots, startup_timeout_s=(
                self.startup_timeout_s if timeout is None else timeout))
            self._start(job)

    def _rate(self) -> float | None:
        """The rate per device-hour of this worker's profile now, for the worker and each
        attempt it starts to keep (a later change of the profiles does not re-price them);
        None when the profiles file cannot be read (priced at the profile's rate when it
        is read)."""
        try:
            return read_profiles(Path(self.runs_dir)).get(self.device_profile).hourly_rate
        except ProfileError as exc:
            if str(exc) != self._rate_problem:  # once a problem: _start is tried again
                self._rate_problem = str(exc)
                log.warning("the rate is not recorded: %s", exc)
            return None

    def _start(self, job: Job) -> None:
        """Record its start (reaper.start_event) and start the job's process. A folder
        still busy is tried again next tick; a job cancelled meanwhile ends CANCELLED
        without a process; a claim reaped meanwhile (the loop stood still past
        stall_timeout_s) is let go."""
        claim = job.claim
        with self.engine.connect() as conn:
            cancelled = store_jobs.cancel_requested(conn, claim.run_pk)
        first = reaper.start_event(claim.attempt, self.id, self.executor.queue)
        resume = None
        rate = self._rate()
        if rate is not None:
            first["hourly_rate"] = rate
        try:
            with locked(job.run_dir, 0.0):
                # under the lock a reaper concludes under: a claim reaped while the loop
                # stood still is not started beside the worker that took it next, and one
                # not reaped yet is stamped fresh before its process starts
                if not _still_ours(self.engine, claim, self.id, stamp=True):
                    log.warning("%s attempt %d is no longer this worker's (its claim was "
                                "reaped while the loop stood still); not started",
                                claim.name, claim.attempt)
                    self._drop(job)
                    return
                if cancelled:
                    write_events(job.run_dir, [reaper.cancelled_event(claim.attempt)])
                else:
                    # a resumed attempt gets the run's record back before it starts
                    resume = resumed(reaper.read_events(job.run_dir)[0], claim.attempt)
                    if resume is not None:
                        restore(job.run_dir, resume)
                    write_events(job.run_dir, [first])
                    _, offset, line_no = reaper.read_events(job.run_dir)
        except RunBusy:
            return
        except OSError as exc:  # the folder went away, or the disk refused the write
            if not job.run_dir.exists():
                # nothing can record an attempt: end the job in the index, never claim it again
                with self.engine.begin() as conn:
                    reaper.abandon(conn, claim.run_pk)
                log.error("cannot start %s: its folder %s is gone; its job ended FAILED",
                          claim.name, job.run_dir)
                self._drop(job)
                return
            if job.start_error is None:
                log.error("cannot start %s: %s; trying again each heartbeat", claim.name, exc)
            job.start_error = str(exc)
            return
        if cancelled:
            with self.engine.begin() as conn:
                store_jobs.release(conn, claim.run_pk)
            self._drop(job)
            self._index(job.run_dir)
            return
        job.events_at = (offset, line_no)
        job.last_event = time.monotonic()
        job.phase = str(first["phase"])
        job.start_recorded = job.phase != "QUEUED"
        output = fmt.attempt_dir(job.run_dir, claim.attempt) / fmt.OUTPUT_LOG
        env = attempt_env(claim)
        if self.device_ids is not None:
            env[VISIBLE_DEVICES] = ",".join(self.device_ids[slot] for slot in job.slots)
        started = claim
        if resume is not None:  # the process is told where to resume (jobs.resume)
            with self.engine.connect() as conn:
                kind = (store_jobs.job_row(conn, claim.run_pk) or {}).get("kind")
            more, resume_env = resume.args(job.run_dir, kind, claim.name)
            started = replace(claim, argv=[*claim.argv, *more])
            env.update(resume_env)
        self._execute(job, (started, env, output, None if resume is None else resume.step))

    def _execute(self, job: Job, what: tuple[Claim, dict[str, str], Path, int | None]) -> None:
        """Ask the executor to start the attempt (its start event is written): a refusal
        its cluster says will pass (StartLater) keeps the claim, to be asked again
        (`_start_later`); any other failure ends the attempt `could_not_start`."""
        started, env, output, resumed_at = what
        claim = job.claim
        try:
            job.proc = self.executor.start(started, env, output)
        except StartLater as exc:
            if job.later is None:
                log.warning("cannot start %s attempt %d now: %s; asked again until its "
                            "startup timeout", claim.name, claim.attempt, exc)
            job.later = what
            return
        except (OSError, StartError) as exc:
            why = (exc.strerror if isinstance(exc, OSError) else None) or exc
            note(output, f"runwatch: could not start {claim.argv[0] if claim.argv else '?'}"
                          f" in {claim.cwd}: {why}\n")
            job.later = None
            self._finish(job, AttemptEnd(start_failed=True))
            return
        job.later = None
        pid = job.proc.pid
        if pid is not None:
            with self.engine.begin() as conn:
                store_jobs.set_pid(conn, claim.run_pk, pid, self.id)
        log.info("started %s attempt %d (%s executor%s)%s", claim.name, claim.attempt,
                 self.executor.name, "" if pid is None else f", pid {pid}",
                 "" if resumed_at is None else f", resuming from step {resumed_at}")
        self._index(job.run_dir)

    def _start_later(self, job: Job) -> None:
        """A start its cluster refused for now, at a heartbeat: a cancel ends it CANCELLED,
        a stopping worker ends it `worker_stopped`, its startup timeout `could_not_start`
        (saying what the cluster answered), and otherwise the executor is asked again once
        it says it would start jobs (`Executor.unavailable`: a refusal holds it a while)."""
        assert job.later is not None
        claim, output = job.claim, job.later[2]
        with self.engine.connect() as conn:
            cancelled = store_jobs.cancel_requested(conn, claim.run_pk, claim.attempt)
        if cancelled:
            self._finish(job, AttemptEnd(cancel_requested=True))
        elif self.stopping:
            self._finish(job, AttemptEnd(worker_stopped=True))
        elif (job.startup_timeout_s is not None
              and time.monotonic() - job.last_event > job.startup_timeout_s):
            note(output, f"runwatch: its cluster did not take {claim.name} attempt "
                         f"{claim.attempt} within its startup timeout "
                         f"({job.startup_timeout_s:g} s): "
                         f"{self.executor.found_unavailable() or 'it refused it'}\n")
            self._finish(job, AttemptEnd(start_failed=True))
        elif self.executor.unavailable() is None:
            # asked again once the executor would start jobs again (a refusal holds it for
            # a while): each refusal holds this loop as long as the cluster takes to answer
            self._execute(job, job.later)

    def _watch(self, job: Job, beat: bool) -> None:
        if job.end is not None:  # ended, and its folder was busy: conclude it again
            self._finish(job)
            return
        if job.proc is None:
            if job.later is not None:
                if beat:
                    self._start_later(job)
            elif not self.stopping and (beat or job.start_error is None):
                self._start(job)
            return
        if job.proc.poll():
            self._finish(job)
            return
        if not job.start_recorded and job.proc.started:  # its cluster started it
            job.start_recorded = self._record_start(job)
        if job.proc.stop_started is None:
            # a cancel of this attempt only: one of the next attempt, retried while this
            # attempt's process exits after recording its end (its work after finish()), is
            # carried out once this process has gone (reaper.conclude), never by signalling it
            with self.engine.connect() as conn:
                job.cancel = store_jobs.cancel_requested(conn, job.claim.run_pk,
                                                         job.claim.attempt)
            job.startup_timed_out = not job.cancel and self._preparing_too_long(job)
            if job.startup_timed_out:
                job.proc.kill()  # no SIGTERM: the SDK would record it CANCELLED
            elif job.cancel:
                self._stop_cancelled(job)
            elif self.stopping:
                job.proc.stop(self.grace_s)
        if beat:
            job.proc.observe()

    def _record_start(self, job: Job) -> bool:
        """Record that the job, which waited in its cluster's queue, has started
        (reaper.record_start); whether its start is on record now."""
        if reaper.record_start(job.run_dir, job.claim.attempt):
            self._index(job.run_dir)
            return True
        return reaper.start_on_record(job.run_dir, job.claim.attempt)

    def _stop_cancelled(self, job: Job) -> None:
        """Stop a cancelled job: the cancel's note and, for a command that does not use
        the SDK, CANCEL_REQUESTED first (executors.note_cancel), then SIGTERM."""
        assert job.proc is not None
        note_cancel(job.claim, self.id)
        job.proc.stop(self.grace_s)

    def _preparing_too_long(self, job: Job) -> bool:
        """Whether the job is still starting (QUEUED in its cluster's queue, or PREPARING)
        and showed no progress for its startup timeout: no new event, and no new output (a
        command that does not use the SDK never leaves PREPARING, so what it prints is its
        only sign of progress)."""
        if job.startup_timeout_s is None or job.phase not in STARTING or job.proc is None:
            return False
        offset, line_no = job.events_at
        events, offset, line_no = reaper.read_events(job.run_dir, offset, line_no)
        if events:
            job.events_at = (offset, line_no)
            job.phase = str(events[-1].get("phase"))
        size = job.proc.output_size()
        if events or size != job.output_size:
            job.output_size = size
            job.last_event = time.monotonic()
        return (job.phase in STARTING
                and time.monotonic() - job.last_event > job.startup_timeout_s)

    def _finish(self, job: Job, end: AttemptEnd | None = None) -> None:
        """Conclude a job whose attempt has ended (or never started: `end` says why); it
        stays held, and is concluded again next tick, while its folder is busy."""
        if end is not None:
            job.end = end
        if job.end is None:
            assert job.proc is not None
            if not job.start_recorded and job.proc.started:  # it ran between two polls
                job.start_recorded = self._record_start(job)
            with self.engine.connect() as conn:  # a cancel asked while it was stopping
                cancel = job.cancel or store_jobs.cancel_requested(conn, job.claim.run_pk,
                                                                   job.claim.attempt)
            job.end = replace(job.proc.end(cancel_requested=cancel,
                                           startup_timed_out=job.startup_timed_out),
                              worker_stopped=job.worker_stopped)
        verdict = reaper.conclude(self.engine, job.claim, self.id, job.end, self._index)
        if verdict is not None or not _still_ours(self.engine, job.claim, self.id):
            self._drop(job)


def device_ids(profile: str, devices: int, environ: Mapping[str, str]) -> list[str] | None:
    """The ids of the devices a worker of `profile` hands its jobs (CUDA_VISIBLE_DEVICES
    names a job's share): those the worker's own CUDA_VISIBLE_DEVICES names, else 0..N-1;
    None for the built-in cpu profile. Raises ValueError when the worker's own list
    names fewer than `devices`."""
    if profile == CPU.name:
        return None
    own = environ.get(VISIBLE_DEVICES)
    if own is None:
        return [str(i) for i in range(devices)]
    ids = [d.strip() for d in own.split(",") if d.strip()]
    if len(ids) < devices:
        raise ValueError(f"the worker offers {devices} devices but {VISIBLE_DEVICES} names "
                         f"{len(ids)} ({own!r}): offer fewer devices (--devices) or name "
                         "more in it")
    return ids


def _still_ours(engine: Engine, claim: Claim, worker_id: str, *, stamp: bool = False) -> bool:
    """Whether the job row still names `claim`'s attempt and `worker_id` (with `stamp`,
    the worker's heartbeat is stamped in the same transaction if so)."""
    with engine.begin() as conn:
        row = store_jobs.job_row(conn, claim.run_pk)
        ours = (row is not None and row["worker_id"] == worker_id
                and row["attempt"] == claim.attempt)
        if ours and stamp:
            store_jobs.heartbeat(conn, worker_id, time.time())
    return ours
