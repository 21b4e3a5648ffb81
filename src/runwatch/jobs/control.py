"""Cancel and retry, the same for the CLI and the API (runwatch runs cancel|retry, POST
/api/runs/{run}/cancel|retry). A move the run cannot make raises
runwatch.jobs.lifecycle.TransitionError, whose message says what is possible (the API
answers it with 409); a run that is no longer in the index raises LookupError (404);
a run folder another process keeps locked raises runwatch.rundir.append.RunBusy.

Each answers an `Outcome`: the run's new phase and what happens to it next, in words
(what the CLI prints and the API sends as `next`).

Cancel: a QUEUED job is made unclaimable in the index and ends CANCELLED at once; if a
worker claimed it first, or the job is PREPARING or RUNNING, the index records the
request (jobs.cancel_requested_at, and the run CANCEL_REQUESTED) and the worker that
runs it stops its process. When that worker is lost (store.jobs.lost) nothing tells the
process to stop until a live worker that can reap the lost worker's jobs does
(runwatch.jobs.reaper); the outcome says which worker that is, or what it waits for
(executors.lost_cancel). A run started by hand (no job.json) is sent SIGTERM, which
its SDK records as CANCEL_REQUESTED then CANCELLED, when it runs on this host and still
holds its folder's lock; otherwise only its own user can stop it.

Retry: an ended job starts its next attempt (runwatch.jobs.attempts), QUEUED again; a
resume is a retry whose attempt continues from the run's last training checkpoint and
keeps the run's record up to it (runwatch.jobs.resume). Its run may have ended while
its process still runs (what follows the SDK's finish(), or the process exiting): the job
then stays its worker's until that process has gone, and only then can a worker claim the
new attempt. The process holds the run's folder until its
finish() is done, which after its end is recorded can take its sender's last send to a
team server (sdk.sender.FINISH_WAIT_S at most): a retry waits that long for the folder
(RETRY_WAIT_S), so a run that shows ended is not answered busy.

The commands the outcomes name (a worker to start) are rendered by the caller's `command`
(`Command`): the CLI's name the --db it was given.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, select, update

from runwatch.ingest.indexer import Indexer, IndexReport
from runwatch.jobs import lifecycle
from runwatch.jobs.attempts import last_event, start_attempt
from runwatch.jobs.executors import held_waits, lost_cancel
from runwatch.jobs.failures import CATALOGUE
from runwatch.jobs.lifecycle import TransitionError
from runwatch.jobs.reaper import cancelled_event
from runwatch.jobs.resume import INSTEAD as RESUME_INSTEAD
from runwatch.jobs.resume import resume_attempt
from runwatch.rundir import format as fmt
from runwatch.rundir.append import RunBusy, locked, write_events
from runwatch.rundir.jsonl import loads_line
from runwatch.sdk.lock import RunLock
from runwatch.sdk.sender import FINISH_WAIT_S
from runwatch.store import jobs as store_jobs
from runwatch.store import schema as s
from runwatch.store.db import writing

RunRef = int | Any  # a run's pk, or a row of `runs` (anything with .pk)
# Renders a runwatch command to print from its words (`command("worker", DIR)`): the CLI
# passes one that adds the --db it was given and names the program as it can be run
# (cli.output.runwatch_command), which job control, below the CLI, cannot know.
Command = Callable[..., str]


def plain_command(*words: str) -> str:
    """`runwatch WORDS…`, quoted: the rendering of a caller that passes none."""
    return shlex.join(["runwatch", *words])

# How long a retry waits for the ended attempt's process to let go of the run's folder:
# its last send, and a margin for the process to exit.
RETRY_WAIT_S = FINISH_WAIT_S + 5.0
# How long a cancel waits for the folder of a job no worker holds: job control holds it
# for moments; a process holding it longer records the run, resumed by hand with the SDK.
HELD_WAIT_S = 2.0

ENDED_AT_ONCE = "it had not started, so it ended at once"
TOLD_TO_STOP = "its process is told to stop; it ends CANCELLED then"  # by its live worker
# a QUEUED job a live worker holds: claimed and not started yet, or retried while the
# process of the attempt before still exits (retry), which is not the cancel's to stop
NOT_STARTED = ("its worker has not started it and will not: it ends CANCELLED without a "
               "process, once the process of the attempt before it has exited where that "
               "one still runs")
# a QUEUED job its live worker submitted to a cluster that has not started it (Ray PENDING)
WITHDRAWN = ("its worker gives up its job, which the cluster has not started, so its "
             "command never runs: it ends CANCELLED then")
SENT_SIGTERM = ("its process was sent SIGTERM; its SDK records CANCEL_REQUESTED, then "
                "CANCELLED as it stops")


@dataclass(frozen=True)
class Outcome:
    """What a cancel or retry did: the run's new phase, and what happens to it next."""

    phase: str
    next: str


def _run(engine: Engine, run: RunRef) -> Any:
    pk = run if isinstance(run, int) else run.pk
    with engine.connect() as conn:
        row = conn.execute(select(s.runs).where(s.runs.c.pk == pk)).first()
    if row is None:
        raise LookupError(f"run {pk} is no longer in the index: list the runs again")
    return row


def _index(engine: Engine, run_dir: Path, runs_dir: Path | None) -> None:
    Indexer(engine, runs_dir or run_dir.parent).index_run(run_dir, IndexReport())


def cancel(engine: Engine, run: RunRef, runs_dir: Path | None = None) -> Outcome:
    """Cancel a run; its new phase is CANCELLED (a QUEUED job nobody had claimed) or
    CANCEL_REQUESTED (its process is to be stopped: the outcome says by whom, or what
    that waits for)."""
    row = _run(engine, run)
    try:
        lifecycle.cancel(row.status)  # raises for a run that ended or is already stopping
    except TransitionError:
        if row.status in fmt.TERMINAL_PHASES and row.dir is not None:
            with engine.connect() as conn:
                started_by_hand = store_jobs.job_row(conn, row.pk) is None
            if started_by_hand:  # retry, which the advice names, needs a job to run again
                raise TransitionError(
                    f"the run has already ended ({row.status}), so there is nothing to "
                    "cancel; it was started by hand (it has no job.json), so start its "
                    "script again to train again") from None
        raise
    if row.dir is None:
        raise TransitionError("this run was sent to the server over HTTP, so no folder or "
                              "process of it is here to stop: stop its process where it runs")
    run_dir = Path(row.dir)
    with writing(engine) as conn:
        if store_jobs.job_row(conn, row.pk, lock=True) is None:
            return Outcome(_stop_by_hand(run_dir), SENT_SIGTERM)
        now = time.time()
        unclaimed = store_jobs.request_cancel(conn, row.pk, now)
        job = store_jobs.job_row(conn, row.pk) or {}  # read after the write: current
        if not unclaimed:
            conn.execute(update(s.runs).where(
                s.runs.c.pk == row.pk, s.runs.c.status.not_in(fmt.TERMINAL_PHASES)
            ).values(status="CANCEL_REQUESTED"))
            return Outcome("CANCEL_REQUESTED", _who_stops(
                conn, job.get("worker_id"), now, started=row.status != "QUEUED",
                waiting=_in_cluster_queue(run_dir, job.get("attempt"))))
    # No worker holds the job and none will claim it now: it has no process to stop,
    # whatever phase the index still shows (a worker's requeue after a failure, not yet
    # indexed, reads RUNNING). The folder says whether it waits or has ended meanwhile.
    try:
        try:
            with locked(run_dir, HELD_WAIT_S):
                ended = (last_event(run_dir) or {}).get("phase")
                if ended not in fmt.TERMINAL_PHASES:
                    write_events(run_dir, [cancelled_event(job["attempt"])])
        except RunBusy:
            # a process holds the folder and no worker runs it: the job's run resumed by
            # hand with the SDK, which is stopped as a run started by hand is
            _forget_cancel(engine, row.pk)
            return Outcome(_stop_by_hand(run_dir), SENT_SIGTERM)
    except BaseException:
        # The run stays QUEUED: let workers claim it again rather than strand it, and let
        # the caller say why the cancel did not happen (a busy or vanished folder).
        _forget_cancel(engine, row.pk)
        raise
    _index(engine, run_dir, runs_dir)
    if ended in fmt.TERMINAL_PHASES:
        # it ended before the index showed it (a second cancel of a queued run, or a job
        # its worker concluded a moment ago); the mark stays, harmless on an ended job
        raise TransitionError(f"the run ended ({ended}) before this cancel came, so there is "
                              "nothing to stop: retry it to run it again")
    return Outcome(CATALOGUE["cancelled"].phase, ENDED_AT_ONCE)


def _forget_cancel(engine: Engine, run_pk: int) -> None:
    """Take back a cancel's mark on a job no worker holds (the cancel did not end it)."""
    with engine.begin() as conn:
        conn.execute(update(s.jobs).where(s.jobs.c.run_pk == run_pk,
                                          s.jobs.c.worker_id.is_(None))
                     .values(cancel_requested_at=None))


def _who_stops(conn: Connection, holder: str | None, now: float, started: bool = True,
               waiting: bool = False) -> str:
    """What stops the process of a job worker `holder` holds, once a cancel was asked: the
    worker itself while it lives, else a live worker that reaps its jobs. A job not
    `started` (QUEUED in the index) has no process of its attempt to stop; one `waiting`
    in its cluster's queue is given up there."""
    workers = store_jobs.list_workers(conn)
    row = next((w for w in workers if w["id"] == holder), None)
    if holder is None or (row is not None and store_jobs.live(row, now)):
        return TOLD_TO_STOP if started else WITHDRAWN if waiting else NOT_STARTED
    live = [(w["executor"], w["host"]) for w in workers if store_jobs.live(w, now)]
    if row is None:  # a holder no worker row names: a local process, on a host unknown
        return lost_cancel(holder, "local", None, live)
    return lost_cancel(holder, row["executor"], row["host"], live)


def _in_cluster_queue(run_dir: Path, attempt: Any) -> bool:
    """Whether attempt `attempt` of the run in `run_dir` waits QUEUED in its cluster's
    queue: its worker's start event is the folder's last (reaper.start_event)."""
    try:
        last = last_event(run_dir) or {}
    except OSError:
        return False
    return last.get("phase") == "QUEUED" and "worker" in last and last.get("attempt") == attempt


def _stop_by_hand(run_dir: Path) -> str:
    """SIGTERM the process recording a run started by hand, if that can be done here."""
    try:
        manifest = loads_line((run_dir / fmt.MANIFEST).read_bytes())
        pid, host = int(manifest["pid"]), str(manifest["host"])
    except (OSError, ValueError, KeyError, TypeError):
        raise TransitionError("this run was started by hand and its manifest names no process "
                              "to stop: stop its process yourself") from None
    if host != socket.gethostname():
        raise TransitionError(f"this run was started by hand on {host} (pid {pid}), not by a "
                              f"runwatch worker: stop its process there yourself")
    try:
        RunLock(run_dir).release()
    except fmt.RunDirError:
        pass  # held: a live process records the run
    else:
        raise TransitionError("no process records this run any more (it ended without "
                              "recording how), so there is nothing to cancel")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        raise TransitionError(f"process {pid}, which started this run, is gone; another "
                              "process records the run now: stop it yourself") from None
    except PermissionError:
        raise TransitionError(f"process {pid}, which records this run, belongs to another "
                              "user: stop it yourself") from None
    return "CANCEL_REQUESTED"


def retry(engine: Engine, run: RunRef, runs_dir: Path | None = None, *,
          wait_s: float = RETRY_WAIT_S, resume: bool = False,
          command: Command = plain_command) -> Outcome:
    """Start the next attempt of an ended job, QUEUED: from step 0, or with `resume` from
    the run's last training checkpoint, keeping its record up to that step
    (runwatch.jobs.resume). RunBusy when a process still holds the run's folder after
    `wait_s` seconds; TransitionError, saying what to do instead, for a run that cannot
    be resumed (no checkpoint, or a recipe that cannot resume). `command` renders the
    commands the outcome names (who_starts)."""
    row = _run(engine, run)
    with engine.connect() as conn:
        job = store_jobs.job_row(conn, row.pk)
    # what can never be retried is said first, not "wait for it to end, then retry"
    if row.dir is None:
        raise TransitionError("this run was sent to the server over HTTP, so no folder of it "
                              "is here to start again: retry it where it ran")
    if job is None:
        raise TransitionError("this run was started by hand (it has no job.json), so runwatch "
                              "cannot start it again: run its command again, or submit it "
                              "with `runwatch submit` so it can be retried")
    lifecycle.retry(row.status)  # raises unless the run has ended
    if resume and job["kind"] == "recipe":
        # imported here: the recipes' settings (and Typer, which lists them) load only for
        # the one caller that needs them
        from runwatch.jobs.settings import resume_refusal

        why = resume_refusal(str(job["recipe"]), job["argv"], row.name)
        if why is not None:
            raise TransitionError(f"its {job['recipe']} recipe cannot resume it ({why}): "
                                  f"{RESUME_INSTEAD}")
    attempt = max(row.attempt, job["attempt"]) + 1
    run_dir = Path(row.dir)
    resumed = None
    # The folder's lock is held over both steps: the worker that ran the old attempt
    # concludes it under the same lock (reaper.conclude), so it either lets the job go
    # before the row is read here, or sees the new attempt after it is written.
    with locked(run_dir, wait_s):
        if resume:
            resumed = resume_attempt(run_dir, attempt)
        else:
            start_attempt(run_dir, attempt)
        with writing(engine) as conn:
            held = store_jobs.job_row(conn, row.pk, lock=True)
            # before the run is QUEUED in the index, so no worker claims the old attempt
            store_jobs.requeue(conn, row.pk, attempt)
            if held is not None and held["worker_id"] is not None:
                # The old attempt's process recorded its end but has not exited (its
                # worker still holds the job): the worker keeps holding it until the
                # process has gone, then lets it go (reaper.conclude), so no new attempt
                # starts beside it.
                conn.execute(update(s.jobs).where(s.jobs.c.run_pk == row.pk).values(
                    worker_id=held["worker_id"], claimed_at=held["claimed_at"],
                    heartbeat_at=held["heartbeat_at"], pid=held["pid"]))
    _index(engine, run_dir, runs_dir)
    with engine.connect() as conn:
        starts = who_starts(conn, job["device_profile"], time.time(), str(run_dir),
                            job["devices"], command)
    where = "" if resumed is None else f", resuming from step {resumed.step}"
    return Outcome("QUEUED", f"attempt {attempt}{where}: {starts}")


def who_starts(conn: Connection, device_profile: str, now: float,
               run_dir: str | None = None, devices: int = 1,
               command: Command = plain_command) -> str:
    """Who starts a QUEUED job of `device_profile` in folder `run_dir` (absolute) that asks
    for `devices`, in words: the workers that would claim it, or, when none would, why and
    what to do (`nobody_starts`: else the job would wait with nobody to run it)."""
    ids = store_jobs.starters(conn, device_profile, now, run_dir, devices)
    if len(ids) == 1:
        return f"worker {ids[0]} will start it when its devices are free"
    if ids:  # one of them: the first whose devices are free
        return (f"one of the workers {', '.join(ids)} will start it when its devices are "
                "free")
    return _nobody_starts(conn, device_profile, now, run_dir, devices, command)


def nobody_starts(conn: Connection, device_profile: str, now: float,
                  run_dir: str | None = None, devices: int = 1,
                  command: Command = plain_command) -> str | None:
    """`who_starts`'s words when no worker would start the job (why, and what to do), else
    None: what a submit's `next` and the run detail's `job.waits_for` say alike."""
    if store_jobs.starters(conn, device_profile, now, run_dir, devices):
        return None
    return _nobody_starts(conn, device_profile, now, run_dir, devices, command)


def queued_waits(conn: Connection, job: dict[str, Any] | None, status: str,
                 run_dir: str | None, now: float, command: Command = plain_command
                 ) -> str | None:
    """What a run's job (its jobs row) waits for with nothing to move it on, in words, or
    None: a QUEUED job no worker would start (`nobody_starts`: why, and what to do), or one
    held by a lost or stopped worker that no live worker can reap (`held_waits`, the words
    the workers view says of it). The one judgement of the run detail's `job.waits_for`
    (CLI and API alike) and of `runs wait`."""
    if job is None:
        return None
    if job.get("worker_id") is not None:
        return held_waits(store_jobs.list_workers(conn), str(job["worker_id"]), now)
    if status != "QUEUED":
        return None
    return nobody_starts(conn, str(job["device_profile"]), now, run_dir,
                         int(job.get("devices") or 1), command)


def _nobody_starts(conn: Connection, device_profile: str, now: float,
                   run_dir: str | None, devices: int, command: Command) -> str:
    """Why no worker starts the job, first that applies: the running workers of its profile
    that claim its folder's jobs and offer its devices start no job now (`unavailable`);
    they offer fewer devices than it asks for; those that claim jobs claim other folders'
    only; those of its folder all drain; none runs. The commands it names (a worker that
    would start the job) are `command`'s renderings."""
    running = [w for w in store_jobs.list_workers(conn)
               if w["device_profile"] == device_profile and store_jobs.live(w, now)]
    here = [w for w in running
            if run_dir is None or store_jobs.holds(w.get("runs_dir"), run_dir)]
    folder = None if run_dir is None else str(Path(run_dir).parent)
    on = [folder] if folder else []
    start = command("worker", *on, "--device-profile", device_profile)
    if silent := [w for w in here if not w["draining"] and w.get("unavailable")
                  and int(w["devices"]) >= devices]:
        said = "; ".join(f"{w['id']}: {w['unavailable']}" for w in silent)
        return (f"the workers that would start it start no job now ({said}): it waits "
                "until one can (a Ray worker asks its cluster again every few seconds)")
    if claiming := [w for w in here if not w["draining"]]:
        most = max(int(w["devices"]) for w in claiming)
        offering = command("worker", *on, "--device-profile", device_profile, "--devices",
                           str(devices))
        return (f"no running worker of profile {device_profile} offers {devices} devices "
                f"(the most one offers is {most}), so none will start it: start a worker "
                f"that offers them ({offering}), or cancel it and submit "
                f"it again with --devices {most} or fewer")
    # the folders of the workers of the profile that run: their jobs only are claimed
    elsewhere = sorted({str(w["runs_dir"]) for w in store_jobs.claimers(conn, device_profile, now)
                        if w.get("runs_dir")})
    if folder is not None and elsewhere:
        return (f"no worker of profile {device_profile} runs the jobs of {folder}: the "
                f"running ones claim jobs of {', '.join(elsewhere)} only; submit it there "
                f"(--dir), or start a worker on this folder ({start})")
    if here:
        return (f"every running worker of profile {device_profile} that claims this "
                f"folder's jobs is draining ({', '.join(w['id'] for w in here)}): a "
                "draining worker claims no more jobs and exits once its own have ended; "
                f"start another ({start})")
    return (f"no worker of profile {device_profile} is running on this index; start one "
            f"({start}, or {command('ui', *on)}, which runs one of the default profile)")
