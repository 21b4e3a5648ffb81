"""Ending an attempt, whether its worker saw its process exit or the worker died.

`conclude` is the one way an attempt ends: under the run folder's lock it checks that
the job row still names the attempt and the worker that held it, keeps the end of an
output that did not succeed as a line of the run's logs, appends the verdict event
(phase, reason, `code`) unless the run's own process recorded a terminal event for
this attempt (or after the SUCCEEDED its process recorded, when its exit code then
failed it: the SDK's end stays, the verdict supersedes it), requeues the run as its next
attempt when the verdict is a failure other than a refusal, or than one after SUCCEEDED,
and attempts remain (attempt files moved to attempts/<n>/, then QUEUED n+1), and
releases the claim, stamping the worker that held it (`released`: a lost
worker's spend runs until its jobs are let go). An attempt its worker stopped because it
was told to stop (its note in attempts/<n>/, runwatch.rundir.stopnote) ends CANCELLED
`worker_stopped`, never requeued. Holding the lock while deciding makes it safe for two
workers to reap the same dead worker's job: the second finds the row changed.

`reap` is what every worker does each heartbeat: a job whose worker is lost (it has not
stamped it for longer than the heartbeat timeout that worker declared, store.jobs.lost;
the reaping worker's own timeout plays no part) is concluded once the reaping worker's
executor (runwatch.jobs.executors, `Executor.seen`) says nothing of its attempt still
runs, and no process records the run (its lock is free): for a process on this host,
once nothing of its process group is left; for a Ray job, once the cluster says it
ended. Only a worker whose executor can answer for the lost worker's
(`executors.REAPS`) reaps its jobs: a local worker leaves a lost Ray worker's jobs to a
Ray worker. A job that was cancelled is stopped meanwhile where the
executor can (`Executor.stop_lost`). It ends as that end was observed (Ray's report of
the job), or else as `stopped_early` (its exit status went with its worker), or
`cancelled` when a cancel was asked, unless its process recorded its own end.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, or_, update

from runwatch.jobs.attempts import last_event, move_attempt_files
from runwatch.jobs.executors import REAPS, Executor, LocalExecutor
from runwatch.jobs.failures import CATALOGUE, AttemptEnd, Verdict, classify
from runwatch.jobs.process import tail
from runwatch.rundir import format as fmt
from runwatch.rundir import stopnote
from runwatch.rundir.append import RunBusy, locked, write_events, write_records
from runwatch.rundir.reader import read_new
from runwatch.store import jobs as store_jobs
from runwatch.store import schema as s
from runwatch.store.db import writing
from runwatch.store.jobs import Claim

log = logging.getLogger(__name__)

# How long ending an attempt waits for the run folder's lock.
LOCK_WAIT_S = 0.5
# How long a lost worker's cancelled process has after SIGTERM (the workers' --grace-s).
GRACE_S = 10.0
# How much of an attempt's output that did not succeed goes into the run's logs.
OUTPUT_TAIL_LINES = 40
OUTPUT_TAIL_BYTES = 8 * 1024

IndexRun = Callable[[Path], None]


@dataclass(frozen=True)
class Recorded:
    """What a run's events say of one attempt: whether job control started it (the event
    its worker wrote as it started it, naming the worker: PREPARING, or QUEUED while it
    waits in its cluster's queue), the phase it is in now, the terminal event its process
    wrote, the one job control wrote after it, if any (its worker's end for a process that
    exited with an error after it recorded SUCCEEDED), and whether its process recorded
    any event of its own (its SDK attached: job control's events name their attempt, the
    SDK's do not)."""

    started: bool = False
    phase: str | None = None
    terminal: dict[str, Any] | None = None
    own: bool = False
    last_ts: float | None = None  # of its latest event
    superseded_by: dict[str, Any] | None = None

    @property
    def end(self) -> dict[str, Any] | None:
        """The terminal event the attempt ends with: job control's after its process's, if
        one followed, else its process's."""
        return self.superseded_by or self.terminal


def read_events(run_dir: Path, offset: int = 0, line_no: int = 0
                ) -> tuple[list[dict[str, Any]], int, int]:
    """The events of `run_dir` from byte `offset` (after `line_no` lines) to the end,
    with the offset and line count reached."""
    path = run_dir / fmt.EVENTS
    records: list[dict[str, Any]] = []
    while True:
        res = read_new(path, offset, line_no)
        records.extend(res.records)
        if res.offset == offset:
            return records, offset, line_no
        offset, line_no = res.offset, res.line_no


def recorded(run_dir: Path, attempt: int) -> Recorded:
    """What the events of `run_dir` say of attempt `attempt`, from the event a worker
    wrote when it started it (`start_event`)."""
    events, _, _ = read_events(run_dir)
    start = max((i for i, ev in enumerate(events)
                 if ev.get("attempt") == attempt and "worker" in ev), default=None)
    if start is None:
        return Recorded()
    phase, own, ts = events[start].get("phase"), False, events[start].get("ts")
    for i, ev in enumerate(events[start + 1:], start + 1):
        phase, ts = ev.get("phase"), ev.get("ts")
        own = own or "attempt" not in ev
        if phase in fmt.TERMINAL_PHASES:
            after = next((e for e in events[i + 1:i + 2] if e.get("attempt") == attempt
                          and e.get("phase") in fmt.TERMINAL_PHASES), None)
            if after is not None:
                phase, ts = after.get("phase"), after.get("ts")
            return Recorded(True, phase, ev, own, ts, after)
    return Recorded(True, phase, own=own, last_ts=ts)


def start_event(attempt: int, worker: str, queue: str | None) -> dict[str, Any]:
    """The event a worker writes as it starts attempt `attempt` (`recorded` finds it by
    the worker it names): PREPARING, the attempt holding its devices from now; or, for an
    executor whose attempts wait in a queue of their own first (`Executor.queue`, the
    stage it names), QUEUED until `record_start`."""
    if queue is None:
        return {"phase": "PREPARING", "attempt": attempt, "worker": worker}
    return {"phase": "QUEUED", "attempt": attempt, "worker": worker, "stage": queue}


def start_on_record(run_dir: Path, attempt: int) -> bool:
    """Whether the events of `run_dir` say attempt `attempt` has started: it is not (or no
    longer) QUEUED after its start event."""
    return recorded(run_dir, attempt).phase != "QUEUED"


def record_start(run_dir: Path, attempt: int) -> bool:
    """Record that attempt `attempt`, which waited QUEUED in its cluster's queue, has
    started, so that it holds its devices from now: PREPARING, written under the folder's
    lock unless its start is on record already (`start_on_record`: its process's own
    phase, or one written before). Whether it was written: not while the folder is busy (a
    process that attached to the run records its own phases; ask again later) or cannot
    be written to."""
    try:
        with locked(run_dir, 0.0):
            if start_on_record(run_dir, attempt):
                return False
            write_events(run_dir, [{"phase": "PREPARING", "attempt": attempt}])
            return True
    except RunBusy:
        return False
    except OSError as exc:
        log.warning("cannot record in %s that attempt %d started: %s", run_dir, attempt, exc)
        return False


def sdk_fields(now: Recorded) -> dict[str, Any]:
    """AttemptEnd's fields for what an attempt's process recorded: whether it recorded
    anything (a process that did and exits 0 with no end left before finish()), and the
    terminal event it wrote, if any."""
    terminal = now.terminal
    if terminal is None:
        return {"sdk_recorded": now.own}
    return {"sdk_recorded": now.own, "sdk_phase": terminal.get("phase"),
            "sdk_reason": terminal.get("reason"), "sdk_code": terminal.get("code")}


def verdict_event(verdict: Verdict, attempt: int, ended_at: float | None = None
                  ) -> dict[str, Any]:
    """The event that ends attempt `attempt` with `verdict`: dated `ended_at` when given
    (when its process ended, as its runner reported), else now."""
    event: dict[str, Any] = {"phase": verdict.phase, "attempt": attempt}
    if ended_at is not None:
        event["ts"] = ended_at
    if verdict.text:
        event["reason"] = verdict.text
    if verdict.code:
        event["code"] = verdict.code
    return event


def cancelled_event(attempt: int) -> dict[str, Any]:
    """The event that ends attempt `attempt` CANCELLED before any process of it started
    (a cancel of a queued job, or of one its worker had not started yet)."""
    return verdict_event(classify(AttemptEnd(cancel_requested=True)), attempt)


def output_log_line(run_dir: Path, attempt: int, phase: str) -> dict[str, Any] | None:
    """The log line that keeps the end of an attempt's output (attempts/<n>/output.log)
    in the run's logs when it did not succeed (None when it did, or printed nothing):
    an error for a failure, else info."""
    path = fmt.attempt_dir(run_dir, attempt) / fmt.OUTPUT_LOG
    lines = tail(path, OUTPUT_TAIL_BYTES).splitlines()[-OUTPUT_TAIL_LINES:]
    if phase == "SUCCEEDED" or not lines:
        return None
    rel = path.relative_to(run_dir).as_posix()
    return {"level": "error" if phase == "FAILED" else "info",
            "message": f"attempt {attempt} ended {phase}; the last "
                       f"{'line' if len(lines) == 1 else f'{len(lines)} lines'} of its "
                       f"output ({rel}):\n" + "\n".join(lines),
            "data": {"attempt": attempt, "output": rel}}


def conclude(engine: Engine, claim: Claim, holder: str, end: AttemptEnd, index: IndexRun, *,
             stale_before: float | None = None, wait_s: float = LOCK_WAIT_S
             ) -> Verdict | None:
    """End attempt `claim.attempt`, which worker `holder` held, from what was observed of
    its process (`end`, whose `ended_at` dates the verdict: a lost worker's Ray job is
    concluded at a reap after it ended, and its device time ends where it did) and what
    it recorded (read here, under the lock). Returns the
    verdict, or None when the job row names another attempt or worker now (someone else
    ended it), was stamped at or after `stale_before` (its worker lives), the run folder
    stayed busy for `wait_s` seconds (try again later), or is gone (the job is released).
    """
    run_dir = Path(claim.dir)
    try:
        with locked(run_dir, wait_s):
            with engine.connect() as conn:
                row = store_jobs.job_row(conn, claim.run_pk)
            if (row is not None and row["worker_id"] == holder
                    and row["attempt"] > claim.attempt and stale_before is None):
                # retried after its process recorded its end, before the process exited
                # (control.retry): its worker let it go only now, with the process gone;
                # a cancel asked of the new attempt meanwhile ends it, never started
                with engine.begin() as conn:
                    cancelled = _let_go(conn, run_dir, claim.run_pk, row["attempt"])
                    released(conn, holder, time.time())
                recorded_end = recorded(run_dir, claim.attempt).end or {}
                if cancelled:
                    index(run_dir)
                _log_let_go(claim, recorded_end, row["attempt"], cancelled)
                return None
            if (row is None or row["worker_id"] != holder or row["attempt"] != claim.attempt
                    or (stale_before is not None and (row["heartbeat_at"] or 0) >= stale_before)):
                return None
            now = recorded(run_dir, claim.attempt)
            # a stopping worker's note: its stop, not a failure, even when a reaper
            # concludes it (its group outlived the stop)
            end = replace(end, worker_lost=end.worker_lost and now.terminal is None,
                          worker_stopped=(end.worker_stopped
                                          or stopnote.written(run_dir, claim.attempt)),
                          **sdk_fields(now))
            verdict = classify(end)
            # dated when it ended (its devices were let go then): after its last event, and
            # not later than now (another machine's clock)
            ended_at = None if end.ended_at is None else min(
                max(end.ended_at, now.last_ts or 0.0), time.time())
            # the process's exit status undoes the SUCCEEDED it recorded (classify): the
            # worker's end follows the SDK's, which stays on record
            supersede = (now.terminal is not None and now.superseded_by is None
                         and now.terminal.get("phase") == "SUCCEEDED"
                         and verdict.phase != "SUCCEEDED")
            events = [verdict_event(verdict, claim.attempt, ended_at)] if now.started and (
                now.terminal is None or supersede) else []
            # a cancel asked after the worker last looked still keeps the next attempt
            # from being queued: the process failed on its own, and that stands; one that
            # failed after its run recorded SUCCEEDED is not queued either (its training
            # ended, and a next attempt would move it out of view and train again)
            again = (now.started and verdict.phase == "FAILED" and not supersede
                     and now.superseded_by is None
                     and not (verdict.reason and verdict.reason.refusal)
                     and claim.attempt < row["max_attempts"]
                     and row["cancel_requested_at"] is None)
            final = verdict_event(verdict, claim.attempt) if supersede else now.end
            ended = final["phase"] if final else verdict.phase
            said = output_log_line(run_dir, claim.attempt, ended) if now.started else None
            if said is not None:
                write_records(run_dir, fmt.LOGS, [said])
            if again:
                move_attempt_files(run_dir, claim.attempt)
                events.append({"phase": "QUEUED", "attempt": claim.attempt + 1})
            if events:
                write_events(run_dir, events)
            # indexed before the job is let go: whoever sees the job released (runs wait,
            # the web app) reads its end in the index, not the SDK's SUCCEEDED that the
            # process's exit status undid, nor a FAILED about to be queued again
            index(run_dir)
            cancelled = False
            with engine.begin() as conn:
                # a cancel that lands after the row was read: the new attempt, queued in
                # the folder, ends CANCELLED before it starts (the requeue would clear it)
                if not (again and store_jobs.requeue(conn, claim.run_pk, claim.attempt + 1,
                                                     unless_cancelled=True)):
                    unstarted = claim.attempt + 1 if again else (
                        None if now.started else claim.attempt)
                    cancelled = _let_go(conn, run_dir, claim.run_pk, unstarted)
                released(conn, holder, time.time())
            if cancelled:  # the end _let_go wrote
                index(run_dir)
    except RunBusy:
        return None
    except FileNotFoundError:  # the run folder was deleted: nothing to record, free the job
        with writing(engine) as conn:
            row = store_jobs.job_row(conn, claim.run_pk, lock=True)
            if row is not None and row["worker_id"] == holder:
                abandon(conn, claim.run_pk)
                released(conn, holder, time.time())
        log.warning("the folder of %s is gone; its job ended FAILED (%s)", claim.name, GONE)
        return None
    # what the run records: the end its process recorded wins over the worker's verdict,
    # but for a SUCCEEDED that its exit status undid
    code = final.get("code") if final else verdict.code
    log.info("%s attempt %d: %s%s%s", claim.name, claim.attempt, ended,
             f" ({code})" if code else "", ", queued again" if again else "")
    return verdict


def released(conn: Connection, holder: str, now: float) -> None:
    """Stamp on worker `holder` that job control let go of a job it held at `now`
    (workers.released_at, never moved back): a lost or stopped worker's jobs hold its
    devices until then, so its spend runs until then (runwatch.analysis.workers)."""
    w = s.workers.c
    conn.execute(update(s.workers).where(
        w.id == holder, or_(w.released_at.is_(None), w.released_at < now)
    ).values(released_at=now))


def _log_let_go(claim: Claim, ended: dict[str, Any], retried: int, cancelled: bool) -> None:
    """The worker's log lines for an attempt retried before its process exited, concluded
    once it has: the end it recorded, and what became of the next attempt."""
    code = ended.get("code")
    log.info("%s attempt %d: %s%s; its process has exited, so attempt %d, retried "
             "meanwhile, %s", claim.name, claim.attempt, ended.get("phase", "ended"),
             f" ({code})" if code else "", retried,
             "was cancelled before it started" if cancelled else "can start now")
    if cancelled:
        log.info("%s attempt %d: CANCELLED (cancelled) before it started", claim.name, retried)


def _let_go(conn: Connection, run_dir: Path, run_pk: int, unstarted: int | None) -> bool:
    """Release the job (in the caller's transaction, its folder locked); when attempt
    `unstarted`, which no process started, is the folder's next and a cancel was asked,
    end it CANCELLED. Whether it was.

    The release is written before the cancel is read, so the two cannot pass each other:
    a cancel committed before it is seen here; one after it finds no worker holding the
    job and ends the attempt itself (control.cancel)."""
    store_jobs.release(conn, run_pk)
    row = store_jobs.job_row(conn, run_pk)
    if unstarted is None or row is None or row["cancel_requested_at"] is None:
        return False
    last = last_event(run_dir) or {}
    if last.get("phase") in fmt.TERMINAL_PHASES:
        return False  # ended already (a worker's start saw the cancel and recorded it)
    write_events(run_dir, [cancelled_event(unstarted)])
    return True


# the catalogue's reason for a job whose run folder was deleted under it
GONE = "stopped_early"


def abandon(conn: Connection, run_pk: int) -> None:
    """End, in the index, the job of a run whose folder is gone (it cannot run again)."""
    reason = CATALOGUE[GONE]
    store_jobs.abandon(conn, run_pk, time.time(),
                       f"{reason.sentence}: its run folder was deleted", GONE,
                       fmt.TERMINAL_PHASES)


def reap(engine: Engine, worker_id: str, now: float, index: IndexRun,
         executor: Executor | None = None, grace_s: float = GRACE_S) -> int:
    """Conclude the jobs of lost workers (store.jobs.lost) whose attempts `executor`
    (this worker's; local processes by default) answers for and says have ended, and stop
    (within `grace_s`) those of them that still run after a cancel; how many were
    concluded."""
    executor = executor or LocalExecutor()
    with engine.connect() as conn:
        stale = store_jobs.stale_claims(conn, now)
        if not stale:
            return 0
        holders = {w["id"]: w for w in store_jobs.list_workers(conn)}
        rows = {c.run_pk: store_jobs.job_row(conn, c.run_pk) for c in stale}
    done = 0
    for claim in stale:
        row = rows[claim.run_pk]
        if row is None or row["worker_id"] in (None, worker_id):
            continue
        # a worker not in the index (none of runwatch's) counts as local, as old rows do
        holder = holders.get(row["worker_id"], {})
        if holder.get("executor", "local") not in REAPS[executor.name]:
            continue  # it cannot see that attempt: its surfaces say what the job waits for
        seen = executor.seen(claim, row, holder.get("host"))
        cancelled = row["cancel_requested_at"] is not None
        # one its cluster started after its worker died holds devices from now
        if (seen.started and not start_on_record(Path(claim.dir), claim.attempt)
                and record_start(Path(claim.dir), claim.attempt)):
            index(Path(claim.dir))
        if seen.running:
            # something of it still runs; its end is concluded once it has gone
            if cancelled:
                executor.stop_lost(claim, row, holder.get("host"), grace_s)
            continue
        end = seen.end or AttemptEnd(worker_lost=True, cancel_requested=cancelled)
        timeout_s = holder.get("heartbeat_timeout_s", store_jobs.HEARTBEAT_TIMEOUT_S)
        if _reap_one(engine, claim, row["worker_id"], end, timeout_s, now, index):
            done += 1
    return done


def _reap_one(engine: Engine, claim: Claim, holder: str, end: AttemptEnd, timeout_s: float,
              now: float, index: IndexRun) -> bool:
    verdict = conclude(engine, claim, holder, end, index, stale_before=now - timeout_s,
                       wait_s=0.0)
    if verdict is not None:
        log.warning("worker %s stopped heartbeating; its job %s ended %s", holder, claim.name,
                    verdict.phase)
    return verdict is not None
