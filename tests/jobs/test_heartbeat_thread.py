"""A worker's heartbeat does not wait for its loop: in `runwatch ui` the embedded worker
shares the index lock with the index loop, whose one pass can take longer than the
heartbeat timeout (a 2M-point run: ~30 s). Its stamps went stale meanwhile, and another
worker's reaper concluded the job "stopped_early" although its worker lived: here a
command that exits 0 while the lock is held would end FAILED instead of SUCCEEDED.

The test holds the worker's index lock itself (as a long index pass does); once the
worker's loop waits for it (its thread's stack is in Worker._index), the job exits and
a second `runwatch worker` process heartbeats well past the stale point.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from runwatch.ingest import Indexer
from runwatch.jobs.worker import Worker
from runwatch.store import jobs as store_jobs
from tests.jobs.stacks import runs_in
from tests.support.jobs import events, job, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import FAST, Workers, group_gone, workers

__all__ = ["workers"]  # the fixture

# Runs until a file named `go` appears in its folder (the runs folder), then exits 0
# without the SDK: only its worker's observation makes it SUCCEEDED.
GATED = ("import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.05)")


def _beat(engine: Engine, worker_id: str) -> float:
    with engine.connect() as conn:
        return max(float(w["heartbeat_at"] or 0) for w in store_jobs.list_workers(conn)
                   if w["id"] == worker_id)


def test_a_worker_blocked_on_the_index_lock_keeps_heartbeating(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers) -> None:
    run = submit_command(engine, runs_dir, "gated", GATED)
    lock = threading.Lock()
    worker = Worker(engine, runs_dir, indexer=Indexer(engine, runs_dir), index_lock=lock,
                    **FAST)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run_forever, args=(stop,), daemon=True)
    thread.start()
    try:
        held = wait_for(lambda: (row := job(engine, "gated")) and row["pid"] and row,
                        what="the job to start")
        assert held is not None
        assert held["worker_id"] == worker.id
        with lock:  # a long index pass: the worker's loop waits for it
            wait_for(lambda: runs_in(thread, Worker._index), what="the worker to wait for the lock")
            locked_at = time.time()
            (runs_dir / "go").touch()
            wait_for(lambda: group_gone(int(held["pid"])), what="the job to exit")
            other = workers.start(runs_dir, db_url)
            wait_for(lambda: any(w["id"] != worker.id for w in _workers(engine)),
                     what="the second worker to register")
            [other_id] = [w["id"] for w in _workers(engine) if w["id"] != worker.id]
            stale_at = locked_at + FAST["heartbeat_timeout_s"]
            wait_for(lambda: _beat(engine, other_id) > stale_at + 3 * FAST["heartbeat_s"],
                     what="the second worker to heartbeat past the stale point", deadline=60)
            # the blocked worker still stamps its job, so the reaper left it alone
            assert (job(engine, "gated") or {}).get("worker_id") == worker.id
            assert _beat(engine, worker.id) > stale_at
        wait_for(lambda: run_row(engine, "gated").status in ("SUCCEEDED", "FAILED"),
                 what="the job to end")
        assert run_row(engine, "gated").status == "SUCCEEDED"
        assert [ev.get("code") for ev in events(run.dir)] == [None, None, None]
        assert other.poll() is None
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
    # the stamps end with the worker: its row is not stamped after it stopped
    with engine.connect() as conn:
        [row] = [w for w in store_jobs.list_workers(conn) if w["id"] == worker.id]
    assert row["stopped_at"] is not None and row["heartbeat_at"] <= row["stopped_at"]


def _workers(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return store_jobs.list_workers(conn)
