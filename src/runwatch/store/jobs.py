"""The queue's claim state: which worker runs which job, and the workers themselves.

A job is a run with a job.json; its row in `jobs` holds the spec (written by the indexer
from job.json, `upsert_spec`) and the claim (written by workers and job control). A job
can be claimed while its run is QUEUED, no worker holds it and no cancel was asked. The
job's attempt is in the folder too (its events name it), and a row no worker holds
follows them as they are indexed (`follow_events`): an index made again from the folder,
or a second index over it, starts the attempt the folder is at. Whether the attempt has
started, is being stopped or has ended is the run's status, which the same events set.

`claim` is atomic across processes: on SQLite one conditional UPDATE … RETURNING (the
statement takes the database's write lock before it reads, so two workers never pick
the same row); on PostgreSQL `SELECT … FOR UPDATE SKIP LOCKED`, then the UPDATE. Call
it at the start of a transaction (`with engine.begin() as conn: claim(conn, …)`): on
SQLite a transaction that read first may be refused the write lock. A transaction that
reads a job row and then writes on what it read (a cancel, a retry's requeue beside the
old holder, a reaper letting go of a job whose folder is gone) is taken with
`store.db.writing` and reads the row with `job_row(…, lock=True)`: on SQLite the
transaction holds the database's write lock from its start, on PostgreSQL the row lock
holds that row until it commits.

A worker is **lost** when its own last heartbeat is older than the heartbeat timeout it
declared as it registered (`lost`; workers.heartbeat_timeout_s): the workers view says so,
and the other workers reap its jobs then (`stale_claims`), whichever of them looks.

Every function takes a Connection first and leaves the transaction to the caller; all
times are float seconds since the epoch.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, func, insert, literal, select, update

from runwatch.store import schema as s
from runwatch.store.dialect import conflict_insert

j = s.jobs.c
r = s.runs.c
w = s.workers.c

# The heartbeat timeout a worker declares unless told otherwise, and the one of a worker
# registered before workers recorded theirs (or of a holder no worker row names).
HEARTBEAT_TIMEOUT_S = 30.0

# job.json's fields as stored in the row (runwatch.jobs.spec writes them)
SPEC_COLUMNS = ("kind", "recipe", "argv", "cwd", "devices", "device_profile", "priority",
                "max_attempts", "startup_timeout_s", "submitted_at")


@dataclass(frozen=True)
class Claim:
    """A job a worker holds: what to start, where, and on how many devices."""

    run_pk: int
    run_id: str
    name: str
    dir: str
    attempt: int
    argv: list[str]
    cwd: str
    devices: int
    device_profile: str
    startup_timeout_s: float | None


@dataclass(frozen=True)
class WorkerRow:
    """A worker as it registers: its id, where it runs, the devices it offers, what runs
    its jobs (its executor's name: local, ray), and how long it may go without a
    heartbeat before it is lost."""

    id: str
    host: str
    pid: int
    devices: int
    device_profile: str
    started_at: float
    executor: str = "local"
    heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT_S
    runs_dir: str | None = None  # absolute: it claims the jobs whose folder is inside
    hourly_rate: float | None = None  # its profile's rate when it registered


def lost(heartbeat_at: float | None, heartbeat_timeout_s: float, now: float) -> bool:
    """Whether a worker whose last heartbeat was at `heartbeat_at` and that declared
    `heartbeat_timeout_s` is lost at `now` (`stale_claims` asks the same in SQL)."""
    return (heartbeat_at or 0.0) < now - heartbeat_timeout_s


_CLAIM_COLUMNS = (j.run_pk, r.run_id, r.name, r.dir, j.attempt, j.argv, j.cwd, j.devices,
                  j.device_profile, j.startup_timeout_s)


def _claim(row: Any) -> Claim:
    return Claim(run_pk=row.run_pk, run_id=row.run_id, name=row.name, dir=row.dir or "",
                 attempt=row.attempt, argv=list(orjson.loads(row.argv)), cwd=row.cwd,
                 devices=row.devices, device_profile=row.device_profile,
                 startup_timeout_s=row.startup_timeout_s)


def upsert_spec(conn: Connection, run_pk: int, spec: dict[str, Any]) -> None:
    """Insert the job row of `run_pk` from its spec fields (SPEC_COLUMNS; `argv` a list), at
    the attempt its run's row holds (the one its indexed events name), or refresh those
    fields of an existing row; the claim fields are left as they are."""
    values = {name: spec[name] for name in SPEC_COLUMNS}
    values["argv"] = orjson.dumps(values["argv"]).decode()
    find = select(*(j[name] for name in SPEC_COLUMNS)).where(j.run_pk == run_pk)
    current = conn.execute(find).first()
    if current is None:
        attempt = conn.execute(select(r.attempt).where(r.pk == run_pk)).scalar() or 1
        # another indexer (`runwatch submit`'s, a server's) may insert the row first
        conn.execute(conflict_insert(conn.dialect.name, s.jobs)
                     .values(run_pk=run_pk, attempt=attempt, **values).on_conflict_do_nothing())
        current = conn.execute(find).one()
    if tuple(current) != tuple(values[name] for name in SPEC_COLUMNS):
        conn.execute(update(s.jobs).where(j.run_pk == run_pk).values(**values))


def follow_events(conn: Connection, run_pk: int, attempt: int) -> None:
    """The run's events name `attempt` as its current one: a job row no worker holds that
    names an older attempt moves to it, with no cancel mark (one asked of the older
    attempt), as `requeue` moves it. A row a worker holds is left to that worker and job
    control (a retry queues the next attempt beside the holder of the ended one, which lets
    it go once its process has gone), and no row moves back to an older attempt. The
    events never set a cancel mark: it is job control's request, which no event records
    (a CANCEL_REQUESTED event makes the run's status so, and a run in it is not claimed)."""
    conn.execute(update(s.jobs).where(j.run_pk == run_pk, j.worker_id.is_(None),
                                      j.attempt < attempt)
                 .values(attempt=attempt, cancel_requested_at=None))


def claim(conn: Connection, worker_id: str, free_devices: int, now: float,
          device_profile: str | None = None, runs_dir: str | None = None) -> Claim | None:
    """Claim for `worker_id` the first claimable job that fits `free_devices` (and, when
    given, asks for `device_profile` and has its folder in `runs_dir`, an absolute path):
    highest priority first, then oldest, then first indexed; None when there is none."""
    q = s.jobs.alias("q")
    qr = s.runs.alias("qr")
    pick = (select(q.c.run_pk).select_from(q.join(qr, qr.c.pk == q.c.run_pk))
            .where(qr.c.status == "QUEUED", q.c.worker_id.is_(None),
                   q.c.cancel_requested_at.is_(None), q.c.devices <= free_devices,
                   *_fits(q.c.device_profile, qr.c.dir, device_profile, runs_dir))
            .order_by(q.c.priority.desc(), q.c.submitted_at, q.c.run_pk).limit(1))
    held = {"worker_id": worker_id, "claimed_at": now, "heartbeat_at": now, "pid": None}
    if conn.dialect.name == "postgresql":
        run_pk = conn.execute(pick.with_for_update(skip_locked=True, of=q)).scalar()
        if run_pk is None:
            return None
        conn.execute(update(s.jobs).where(j.run_pk == run_pk).values(**held))
    else:
        run_pk = conn.execute(
            update(s.jobs).where(j.run_pk == pick.scalar_subquery(), j.worker_id.is_(None))
            .values(**held).returning(j.run_pk)).scalar()
        if run_pk is None:
            return None
    row = conn.execute(select(*_CLAIM_COLUMNS).join(s.runs, r.pk == j.run_pk)
                       .where(j.run_pk == run_pk)).one()
    return _claim(row)


def live(worker: dict[str, Any], now: float) -> bool:
    """Whether a worker (a row of `list_workers`) runs at `now`: not stopped, nor lost."""
    return worker["stopped_at"] is None and not lost(worker["heartbeat_at"],
                                                     worker["heartbeat_timeout_s"], now)


def starters(conn: Connection, device_profile: str, now: float,
             run_dir: str | None = None, devices: int = 1) -> list[str]:
    """The ids of the workers that would claim a queued job of `device_profile` that asks
    for `devices` now: `claimers` that offer that many, can start jobs (`unavailable`
    null), and (given the job's `run_dir`, absolute) whose runs folder holds it (a worker
    registered without one counts)."""
    return [w["id"] for w in claimers(conn, device_profile, now)
            if w["devices"] >= devices and not w.get("unavailable")
            and (run_dir is None or holds(w.get("runs_dir"), run_dir))]


def claimers(conn: Connection, device_profile: str, now: float) -> list[dict[str, Any]]:
    """The workers (rows of `list_workers`) that claim queued jobs of `device_profile` now,
    of whatever runs folder: live, not draining, of that profile."""
    return [w for w in list_workers(conn) if live(w, now) and not w["draining"]
            and w["device_profile"] == device_profile]


def holds(runs_dir: str | None, run_dir: str) -> bool:
    """Whether a worker of `runs_dir` (None: not known) claims the job of folder `run_dir`,
    as `claim` asks (`_fits`)."""
    return runs_dir is None or run_dir.startswith(runs_dir.rstrip("/") + "/")


def register_worker(conn: Connection, worker: WorkerRow) -> None:
    """Record a worker as started (again, if its id was seen before)."""
    values = {"host": worker.host, "pid": worker.pid, "devices": worker.devices,
              "device_profile": worker.device_profile, "started_at": worker.started_at,
              "heartbeat_at": worker.started_at, "draining": False, "stopped_at": None,
              "executor": worker.executor, "heartbeat_timeout_s": worker.heartbeat_timeout_s,
              "runs_dir": worker.runs_dir, "hourly_rate": worker.hourly_rate,
              "unavailable": None}
    if conn.execute(update(s.workers).where(w.id == worker.id).values(**values)).rowcount == 0:
        conn.execute(insert(s.workers).values(id=worker.id, **values))


def heartbeat(conn: Connection, worker_id: str, now: float) -> None:
    """A worker is alive: its row and the jobs it holds are stamped `now`."""
    conn.execute(update(s.workers).where(w.id == worker_id).values(heartbeat_at=now))
    conn.execute(update(s.jobs).where(j.worker_id == worker_id).values(heartbeat_at=now))


def set_pid(conn: Connection, run_pk: int, pid: int, holder: str) -> None:
    """The process id of a claimed job's process (its process group's leader), written
    while worker `holder` still holds the job (a worker stalled past its heartbeat may
    have had it reaped and claimed by another)."""
    conn.execute(update(s.jobs).where(j.run_pk == run_pk, j.worker_id == holder)
                 .values(pid=pid))


def release(conn: Connection, run_pk: int, holder: str | None = None) -> None:
    """No worker holds the job any more (its process ended, or it never started); given
    `holder`, only while that worker still holds it."""
    cond = [j.run_pk == run_pk] + ([j.worker_id == holder] if holder is not None else [])
    conn.execute(update(s.jobs).where(*cond).values(
        worker_id=None, claimed_at=None, heartbeat_at=None, pid=None))


def abandon(conn: Connection, run_pk: int, now: float, reason: str, code: str,
            ended: Collection[str]) -> None:
    """A job whose run folder is gone: no worker holds it, and it is never claimed again
    (there is no folder to record an attempt in), so the index alone says how it ended;
    a run already in one of the `ended` phases keeps its end."""
    release(conn, run_pk)
    conn.execute(update(s.runs).where(r.pk == run_pk, r.status.not_in(sorted(ended))).values(
        status="FAILED", reason=reason, reason_code=code, ended_at=now, updated_at=now))


def requeue(conn: Connection, run_pk: int, attempt: int, *,
            unless_cancelled: bool = False) -> bool:
    """Make the job claimable again as attempt `attempt` (retry, or a worker's requeue):
    no worker, no cancel request. The caller has appended the QUEUED event. With
    `unless_cancelled` (a worker's own requeue after a failure) a job a cancel was asked
    of is left as it is; whether it was requeued."""
    cond = [j.run_pk == run_pk]
    if unless_cancelled:
        cond.append(j.cancel_requested_at.is_(None))
    done = conn.execute(update(s.jobs).where(*cond).values(
        attempt=attempt, worker_id=None, claimed_at=None, heartbeat_at=None, pid=None,
        cancel_requested_at=None))
    return done.rowcount > 0


def request_cancel(conn: Connection, run_pk: int, now: float) -> bool:
    """Ask for the job to be cancelled: no worker claims it from now on, and the worker
    that holds it stops it. True when no worker held it, so the caller ends the run
    itself; False when a worker holds it (or the run has no job row)."""
    conn.execute(update(s.jobs).where(j.run_pk == run_pk, j.cancel_requested_at.is_(None))
                 .values(cancel_requested_at=now))
    row = conn.execute(select(j.worker_id).where(j.run_pk == run_pk)).first()
    return row is not None and row.worker_id is None


def cancel_requested(conn: Connection, run_pk: int, attempt: int | None = None) -> bool:
    """Whether a cancel was asked of the job (a worker polls this while it runs it); given
    `attempt`, of that attempt: a job retried while the process of its ended attempt still
    exits names the next attempt (its worker holds it until that process has gone), and a
    cancel then is of the next attempt, which no process runs (jobs.control.retry)."""
    cond = [j.run_pk == run_pk, j.cancel_requested_at.is_not(None)]
    if attempt is not None:
        cond.append(j.attempt == attempt)
    return conn.execute(select(j.run_pk).where(*cond)).first() is not None


def holder_timeout() -> Any:
    """The heartbeat timeout of a job's holder, as a column of a select joined to
    `workers` on `jobs.worker_id` (outer: a holder with no row declared the default)."""
    return func.coalesce(w.heartbeat_timeout_s, literal(HEARTBEAT_TIMEOUT_S))


def stale_claims(conn: Connection, now: float) -> list[Claim]:
    """Jobs held by a lost worker: one that has not stamped them for longer than its own
    heartbeat timeout (`lost`)."""
    rows = conn.execute(
        select(*_CLAIM_COLUMNS).join(s.runs, r.pk == j.run_pk)
        .outerjoin(s.workers, w.id == j.worker_id)
        .where(j.worker_id.is_not(None), j.heartbeat_at < now - holder_timeout())
        .order_by(j.run_pk))
    return [_claim(row) for row in rows]


def set_draining(conn: Connection, worker_id: str, draining: bool) -> bool:
    """Tell a worker to claim no more jobs (or to claim again); False for an unknown id."""
    return conn.execute(update(s.workers).where(w.id == worker_id).values(
        draining=draining)).rowcount > 0


def set_unavailable(conn: Connection, worker_id: str, why: str | None) -> None:
    """Why the worker cannot start jobs now, in words (its executor's: a Ray cluster that
    does not answer); None when it can."""
    conn.execute(update(s.workers).where(w.id == worker_id).values(unavailable=why))


def draining(conn: Connection, worker_id: str) -> bool:
    """Whether the worker was told to drain."""
    return bool(conn.execute(select(w.draining).where(w.id == worker_id)).scalar())


def stop_worker(conn: Connection, worker_id: str, now: float) -> None:
    """The worker has stopped (its jobs were released or ended before)."""
    conn.execute(update(s.workers).where(w.id == worker_id).values(stopped_at=now))


def list_workers(conn: Connection) -> list[dict[str, Any]]:
    """Every worker, newest first, with `jobs` (the runs it holds: run_pk, run_id, name,
    status, devices, attempt, claimed_at) and `devices_used`."""
    held: dict[str, list[dict[str, Any]]] = {}
    for row in conn.execute(select(j.worker_id, j.run_pk, r.run_id, r.name, r.status,
                                   j.devices, j.attempt, j.claimed_at)
                            .join(s.runs, r.pk == j.run_pk)
                            .where(j.worker_id.is_not(None)).order_by(j.claimed_at, j.run_pk)):
        job = dict(row._mapping)
        held.setdefault(job.pop("worker_id"), []).append(job)
    out = []
    for row in conn.execute(select(s.workers).order_by(w.started_at.desc(), w.id)):
        worker = dict(row._mapping)
        worker["draining"] = bool(worker["draining"])
        worker["jobs"] = held.get(worker["id"], [])
        worker["devices_used"] = sum(job["devices"] for job in worker["jobs"])
        out.append(worker)
    return out


def queue_depth(conn: Connection, device_profile: str | None = None,
                runs_dir: str | None = None, projects: Iterable[str] | None = None,
                fitting: int | None = None) -> int:
    """How many jobs wait for a worker (of `device_profile`, on `runs_dir`, of `projects`,
    asking for at most `fitting` devices, when given)."""
    only: list[Any] = [] if projects is None else [r.project.in_(sorted(projects))]
    if fitting is not None:
        only.append(j.devices <= fitting)
    return int(conn.execute(
        select(func.count()).select_from(s.jobs.join(s.runs, r.pk == j.run_pk))
        .where(r.status == "QUEUED", j.worker_id.is_(None), j.cancel_requested_at.is_(None),
               *_fits(j.device_profile, r.dir, device_profile, runs_dir), *only)
    ).scalar() or 0)


def _fits(profile_column: Any, dir_column: Any, device_profile: str | None,
          runs_dir: str | None) -> list[Any]:
    """The conditions that a job asks for `device_profile` and lives in `runs_dir`."""
    out = [] if device_profile is None else [profile_column == device_profile]
    if runs_dir is not None:
        out.append(dir_column.startswith(runs_dir.rstrip("/") + "/", autoescape=True))
    return out


def job_row(conn: Connection, run_pk: int, *, lock: bool = False) -> dict[str, Any] | None:
    """The job row of a run (argv as a list), or None for a run started by hand. With
    `lock`, the row is locked until the transaction ends (`SELECT … FOR UPDATE` on
    PostgreSQL; SQLite's `store.db.writing` already holds the whole database)."""
    stmt = select(s.jobs).where(j.run_pk == run_pk)
    row = conn.execute(stmt.with_for_update() if lock else stmt).first()
    if row is None:
        return None
    out = dict(row._mapping)
    out["argv"] = list(orjson.loads(out["argv"]))
    return out
