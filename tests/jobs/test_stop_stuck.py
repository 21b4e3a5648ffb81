"""A stopping worker concludes a job only once nothing of its process group is left.

SIGKILL ends a process only when it leaves the kernel: a training process's child that
is freeing device memory, or waits on a hung network filesystem, outlives it for as long
as that takes. A stopping worker used to SIGKILL the group, wait for the main process
alone (`kill_now`) and conclude the job at once: queued again as its next attempt, which
another worker could start beside the child still holding the devices. Now the worker
SIGKILLs what is left of all its jobs, waits for their whole groups together, and leaves
a job whose group outlives that to the reaper, which concludes it once its group has
gone (it checks the group on this host), as the worker's stop (its note): CANCELLED
`worker_stopped`, not queued again.

The stuck child is a real one: frozen with the cgroup v1 freezer, a process SIGKILLed
stays in the kernel (state D) until it is thawed, as a process in a driver's call does.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.ingest import Indexer
from runwatch.ingest.indexer import IndexReport
from runwatch.jobs import reaper
from runwatch.jobs import worker as worker_module
from runwatch.jobs.worker import Worker
from runwatch.store import jobs as store_jobs
from tests.support.jobs import events, job, run_row, submit_command
from tests.support.wait import DEADLINE_S, wait_for
from tests.support.workers import FAST, group_gone, pid_alive

FREEZER = Path("/sys/fs/cgroup/freezer")

# The job's main process starts a child in its own process group; the child writes its
# pid, and both sleep until stopped.
PARENT_AND_CHILD = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c",
    "import os, time; open('child.tmp', 'w').write(str(os.getpid())); "
    "os.rename('child.tmp', 'child'); time.sleep(300)"])
time.sleep(300)
"""


@contextlib.contextmanager
def frozen(pid: int) -> Iterator[None]:
    """Freeze process `pid` (cgroup v1 freezer) for the block; thawed after it, even when
    the block fails. Skips the test where no freezer cgroup can be made (not root, or
    cgroup v2 only, where a frozen process still dies of SIGKILL)."""
    group = FREEZER / f"runwatch-test-{secrets.token_hex(4)}"
    try:
        group.mkdir()
    except OSError as exc:
        pytest.skip(f"needs the cgroup v1 freezer, writable ({exc.strerror or exc})")
    try:
        (group / "cgroup.procs").write_text(str(pid))
        (group / "freezer.state").write_text("FROZEN")
        wait_for(lambda: (group / "freezer.state").read_text().strip() == "FROZEN",
                 what="the child to freeze")
        yield
    finally:
        (group / "freezer.state").write_text("THAWED")
        for member in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):  # it died meanwhile
                (FREEZER / "cgroup.procs").write_text(member)
        group.rmdir()


def test_a_job_whose_child_outlives_sigkill_is_concluded_only_once_the_child_has_gone(
        engine: Engine, runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the stop's waits (11 s) end with the child frozen however long they are: shortened
    monkeypatch.setattr(worker_module, "STOP_MARGIN_S", 0.0)
    monkeypatch.setattr(worker_module, "KILL_WAIT_S", 0.5)
    run = submit_command(engine, runs_dir, "stuck", PARENT_AND_CHILD, max_attempts=2)
    worker = Worker(engine, runs_dir, indexer=Indexer(engine, runs_dir), **FAST)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run_forever, args=(stop,), daemon=True)
    thread.start()
    try:
        child = int(wait_for(lambda: (runs_dir / "child").exists()
                             and (runs_dir / "child").read_text(), what="the child to start"))
        pgid = int((job(engine, "stuck") or {})["pid"])
        assert os.getpgid(child) == pgid
        with frozen(child):
            stop.set()
            thread.join(DEADLINE_S)
            assert not thread.is_alive(), "the worker did not stop"
            assert pid_alive(child), "the frozen child died of SIGKILL: no stuck process here"
            # the child runs on: the job is not concluded, no next attempt can start
            held = job(engine, "stuck")
            assert held is not None and (held["worker_id"], held["attempt"]) == (worker.id, 1)
            with engine.connect() as conn:
                assert store_jobs.queue_depth(conn) == 0
            assert "QUEUED" not in [ev["phase"] for ev in events(run.dir)[1:]]
            # nor does another worker's reaper conclude it while the group lives here
            later = time.time() + FAST["heartbeat_timeout_s"] + 1
            assert reaper.reap(engine, "other", later, lambda _: None) == 0
        wait_for(lambda: group_gone(pgid), what="the job's group to be gone")
        later = time.time() + FAST["heartbeat_timeout_s"] + 1
        indexer = Indexer(engine, runs_dir)

        def index(d: Path) -> None:
            indexer.index_run(d, IndexReport())

        assert reaper.reap(engine, "other", later, index) == 1
        assert [(ev["phase"], ev.get("code")) for ev in events(run.dir)][-1] == (
            "CANCELLED", "worker_stopped")
        assert run_row(engine, "stuck").status == "CANCELLED"
    finally:
        stop.set()
        thread.join(DEADLINE_S)
