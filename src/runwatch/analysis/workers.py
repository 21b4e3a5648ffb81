"""The workers view: each worker with its devices, profile, executor, hourly rate,
running jobs, status and estimated spend so far, and the queue's depth, as both
`runwatch resources -o json` and `GET /api/workers` send it (see docs/api.md). A worker
is lost once its last heartbeat is older than the heartbeat timeout it declared
(store.jobs.lost, as the reaper judges it). A job held by a lost or stopped worker that
no live worker can reap says what it waits for (`waits_for`, runwatch.jobs.executors).

A worker is a resource that costs while it is up, busy or not: its **spend** so far is
its devices × its hourly rate × the hours from its start to its stop (or now); its rate is
its profile's when it registered (a later change of the profile prices the workers started
after it, and the attempts any worker starts after it), else, for a worker registered
without one, its profile's now.
A lost (or stopped) worker's spend runs on while it still holds jobs: the jobs it left (a
local process outlives its worker, a Ray job runs on the cluster) hold its devices until a
reaper concludes them, which stamps when it let go of the last (workers.released_at). Then
it stops there, or where the worker was found lost (its last heartbeat plus its heartbeat
timeout) or stopped, whichever is later (`spend_until`): the figure never goes down. A
job's device time is in its run's cost as well, as a run's own spend always is.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from runwatch.jobs.cost import Profiles
from runwatch.jobs.executors import held_waits
from runwatch.store import jobs as store_jobs


def worker_status(row: dict[str, Any], now: float) -> str:
    """A worker's status (a row of store.jobs.list_workers): stopped, lost (no heartbeat
    for its heartbeat timeout: the other workers reap its jobs), draining or active."""
    if row["stopped_at"] is not None:
        return "stopped"
    if store_jobs.lost(row["heartbeat_at"], row["heartbeat_timeout_s"], now):
        return "lost"
    return "draining" if row["draining"] else "active"


def spend_until(row: dict[str, Any], status: str, now: float) -> float:
    """Until when a worker (a row of store.jobs.list_workers, in `status`) has cost: now
    while it is up, or while it is lost or stopped and still holds jobs (they run on,
    holding its devices, until a reaper concludes them); else the later of when it went
    (its stop, or the moment it was found lost: its last heartbeat and its timeout) and
    when its last job was let go (workers.released_at, reaper.released). So its spend so
    far never goes down."""
    if status in ("active", "draining") or row["jobs"]:
        return now
    gone = row["stopped_at"]
    if gone is None:
        gone = row["heartbeat_at"] + row["heartbeat_timeout_s"]
    released = row.get("released_at")
    return min(now, gone if released is None else max(gone, released))


def worker_entry(row: dict[str, Any], profiles: Profiles | None, now: float
                 ) -> dict[str, Any]:
    """One worker (a row of store.jobs.list_workers) as the view shows it; its rate and
    spend are None when it recorded no rate and `profiles` is None or lacks its profile."""
    profile = profiles.by_name.get(row["device_profile"]) if profiles is not None else None
    rate = row.get("hourly_rate")
    if rate is None:
        rate = profile.hourly_rate if profile is not None else None
    stopped = row["stopped_at"]
    age = max(0.0, now - row["heartbeat_at"])
    status = worker_status(row, now)
    hours = max(0.0, spend_until(row, status, now) - row["started_at"]) / 3600
    return {
        "id": row["id"], "host": row["host"], "pid": row["pid"], "devices": row["devices"],
        "devices_used": row["devices_used"], "device_profile": row["device_profile"],
        "executor": row["executor"], "hourly_rate": rate, "started_at": row["started_at"],
        "heartbeat_at": row["heartbeat_at"], "heartbeat_age_s": age,
        "heartbeat_timeout_s": row["heartbeat_timeout_s"],
        "draining": row["draining"], "stopped_at": stopped, "status": status,
        # why a live worker starts no job now (its Ray cluster does not answer)
        "unavailable": row.get("unavailable") if status in ("active", "draining") else None,
        "spend": None if rate is None else hours * row["devices"] * rate,
        "jobs": [{"run_id": j["run_id"], "name": j["name"], "status": j["status"],
                  "devices": j["devices"], "attempt": j["attempt"],
                  "claimed_at": j["claimed_at"], "waits_for": None} for j in row["jobs"]],
    }


def workers_view(conn: Connection, profiles: Profiles | None, now: float) -> dict[str, Any]:
    """Every worker, newest first (stopped ones too), and how many jobs wait."""
    rows = store_jobs.list_workers(conn)
    workers = [worker_entry(w, profiles, now) for w in rows]
    for worker in workers:
        if worker["status"] in ("lost", "stopped"):
            # the run detail's job.waits_for says the same (jobs.control.queued_waits)
            held = held_waits(rows, worker["id"], now)
            for job in worker["jobs"]:
                job["waits_for"] = held
    return {"queue_depth": store_jobs.queue_depth(conn), "workers": workers}
