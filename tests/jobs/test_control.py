"""Cancel and retry (runwatch.jobs.control) on real folders and a real SQLite index: a
queued job is cancelled at once and never claimed, even when a worker races for it; a
running one is asked to stop; retry starts attempt n+1; a move the run cannot make is
refused with what is possible; a run started by hand is stopped only where it can be."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine, update

from runwatch.ingest import Indexer
from runwatch.jobs import control
from runwatch.jobs.lifecycle import TransitionError
from runwatch.rundir import format as fmt
from runwatch.store import jobs as q
from runwatch.store import queries as q_runs
from runwatch.store import schema as s
from tests.support import first_line, wait_for, write_manifest
from tests.support.jobs import events, job, record_attempt, run_row, submit_command


def test_a_queued_job_is_cancelled_at_once_and_never_claimed(engine: Engine,
                                                            runs_dir: Path) -> None:
    run = submit_command(engine, runs_dir, "nope")
    assert control.cancel(engine, run.run_pk).phase == "CANCELLED"
    row = run_row(engine, "nope")
    assert (row.status, row.reason_code, row.reason) == \
        ("CANCELLED", "cancelled_before_start", "the training job was cancelled before it started")
    last = events(run.dir)[-1]
    assert (last["phase"], last["attempt"], last["code"]) == (
        "CANCELLED", 1, "cancelled_before_start")
    with engine.begin() as conn:
        assert q.claim(conn, "w", 8, 0.0) is None
        assert q.queue_depth(conn) == 0
    with pytest.raises(TransitionError, match=r"already ended \(CANCELLED\).*retry it"):
        control.cancel(engine, run.run_pk)


def race(engine: Engine, pk: int) -> dict[str, object]:
    """Claim (worker "w") and cancel run `pk` from two threads at the same instant:
    {"claim": the Claim or None, "phase": what cancel answered}."""
    start = threading.Barrier(2)
    got: dict[str, object] = {}

    def claimer() -> None:
        start.wait()
        with engine.begin() as conn:
            got["claim"] = q.claim(conn, "w", 1, 0.0)

    def canceller() -> None:
        start.wait()
        got["phase"] = control.cancel(engine, pk).phase

    threads = [threading.Thread(target=claimer), threading.Thread(target=canceller)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return got


def test_cancel_racing_a_claim_either_ends_the_job_or_stops_the_claimed_one(
        engine: Engine, runs_dir: Path) -> None:
    """Cancel and claim at the same instant, 15 times: a job a worker won is asked to stop
    (CANCEL_REQUESTED), one it did not win is CANCELLED and stays unclaimed; never both."""
    for i in range(15):
        run = submit_command(engine, runs_dir, f"race{i}")
        got = race(engine, run.run_pk)
        claimed = got["claim"] is not None
        assert got["phase"] == ("CANCEL_REQUESTED" if claimed else "CANCELLED"), i
        assert run_row(engine, f"race{i}").status == got["phase"]
        row = job(engine, f"race{i}")
        assert row is not None and row["cancel_requested_at"] is not None
        assert (row["worker_id"] == "w") == claimed
        if claimed:
            with engine.begin() as conn:
                q.release(conn, run.run_pk)


def test_a_running_job_is_asked_to_stop_and_cannot_be_asked_twice(engine: Engine,
                                                                  runs_dir: Path) -> None:
    run = submit_command(engine, runs_dir, "busy")
    with engine.begin() as conn:
        assert q.claim(conn, "w", 1, 0.0) is not None
    record_attempt(run.dir, 1, end=None)
    Indexer(engine, runs_dir).index_once()
    assert control.cancel(engine, run.run_pk).phase == "CANCEL_REQUESTED"
    with engine.connect() as conn:
        assert q.cancel_requested(conn, run.run_pk)
    assert events(run.dir)[-1]["phase"] == "RUNNING", "the folder is the worker's to write"
    with pytest.raises(TransitionError, match="already stopping"):
        control.cancel(engine, run.run_pk)
    with pytest.raises(TransitionError, match=r"only an ended run can be retried.*wait for it"):
        control.retry(engine, run.run_pk)


def test_retry_after_a_cancel_queues_attempt_two_claimable_again(engine: Engine,
                                                                 runs_dir: Path) -> None:
    run = submit_command(engine, runs_dir, "back")
    with pytest.raises(TransitionError, match="only an ended run can be retried and this one "
                                              "is QUEUED: cancel it or wait"):
        control.retry(engine, run.run_pk)
    control.cancel(engine, run.run_pk)
    assert control.retry(engine, run_row(engine, "back")).phase == "QUEUED"
    row = job(engine, "back")
    assert row is not None and (row["attempt"], row["cancel_requested_at"]) == (2, None)
    with engine.begin() as conn:
        claim = q.claim(conn, "w", 1, 0.0)
    assert claim is not None and (claim.name, claim.attempt) == ("back", 2)
    assert [(e["phase"], e.get("attempt")) for e in events(run.dir)] == \
        [("QUEUED", 1), ("CANCELLED", 1), ("QUEUED", 2)]


def test_a_retried_run_waiting_in_the_queue_is_not_shown_as_a_dead_process(
        engine: Engine, runs_dir: Path) -> None:
    """Attempt 1's process (the one the manifest, kept across attempts, names) has exited;
    attempt 2 has no process yet, so the QUEUED run is not "process gone" (the web app
    showed "Queued (process gone)", and `runwatch runs logs --follow` stopped at it)."""
    run = submit_command(engine, runs_dir, "again")
    record_attempt(run.dir, 1, "FAILED")
    exited = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                            capture_output=True, text=True, check=True)
    manifest = json.loads((run.dir / fmt.MANIFEST).read_text())
    manifest.update(pid=int(exited.stdout), host=socket.gethostname())
    (run.dir / fmt.MANIFEST).write_text(json.dumps(manifest))
    Indexer(engine, runs_dir).index_once()
    assert control.retry(engine, run.run_pk).phase == "QUEUED"
    row = run_row(engine, "again")
    assert row.status == "QUEUED" and not q_runs.process_gone(row)
    assert not q_runs.process_here(row)
    # nor once its worker has started attempt 2, until that attempt's process attaches:
    # the runs list and `runs wait` called it gone ("PREPARING (process gone)", exit 1)
    for status in ("PREPARING", "RUNNING"):
        with engine.begin() as conn:
            conn.execute(update(s.runs).where(s.runs.c.pk == row.pk).values(status=status))
        assert not q_runs.process_gone(run_row(engine, "again"))
    # the manifest attempt 2's SDK wrote (it names its attempt) is judged: its process died
    manifest["attempt"] = 2
    with engine.begin() as conn:
        conn.execute(update(s.runs).where(s.runs.c.pk == row.pk).values(
            manifest=json.dumps(manifest)))
    assert q_runs.process_gone(run_row(engine, "again"))


def hand_run(runs_dir: Path, name: str, **manifest: object) -> None:
    """The folder of a RUNNING run started by hand (no job.json), with `manifest` fields."""
    run_dir = write_manifest(runs_dir / name, **manifest)
    (run_dir / fmt.EVENTS).write_text(json.dumps({"seq": 0, "ts": 1.0, "phase": "RUNNING"})
                                      + "\n")


def test_a_run_started_by_hand_is_refused_what_runwatch_cannot_do(engine: Engine,
                                                                   runs_dir: Path) -> None:
    hand_run(runs_dir, "elsewhere", pid=1, host="another-host")
    hand_run(runs_dir, "gone", pid=os.getpid(), host=socket.gethostname())
    Indexer(engine, runs_dir).index_once()
    with pytest.raises(TransitionError, match=r"started by hand on another-host.*yourself"):
        control.cancel(engine, run_row(engine, "elsewhere"))
    with pytest.raises(TransitionError, match="no process records this run"):
        control.cancel(engine, run_row(engine, "gone"))
    # still running: it was told to "wait for it to end, then retry", and then refused
    with pytest.raises(TransitionError, match=r"started by hand.*runwatch submit"):
        control.retry(engine, run_row(engine, "gone"))
    with (runs_dir / "gone" / fmt.EVENTS).open("a") as f:
        f.write(json.dumps({"seq": 1, "ts": 2.0, "phase": "FAILED"}) + "\n")
    Indexer(engine, runs_dir).index_once()
    with pytest.raises(TransitionError, match=r"started by hand.*runwatch submit"):
        control.retry(engine, run_row(engine, "gone"))
    with engine.begin() as conn:  # as a run sent over HTTP (POST /api/ingest) is
        conn.execute(update(s.runs).where(s.runs.c.name == "elsewhere").values(dir=None))
    with pytest.raises(TransitionError, match=r"sent to the server over HTTP.*where it runs"):
        control.cancel(engine, run_row(engine, "elsewhere"))


def test_a_run_started_by_hand_here_gets_sigterm(engine: Engine, runs_dir: Path) -> None:
    """A live process on this host that holds the run's folder lock is sent SIGTERM."""
    run_dir = runs_dir / "mine"
    run_dir.mkdir()
    code = ("import json, os, socket, sys, time\n"
            "from pathlib import Path\n"
            "from runwatch.sdk.lock import RunLock\n"
            "d = Path(sys.argv[1]); lock = RunLock(d)\n"
            "(d / 'manifest.json').write_text(json.dumps({'schema_version': 1, "
            "'run_id': 'mine', 'name': 'mine', 'created_at': 1.0, 'pid': os.getpid(), "
            "'host': socket.gethostname()}))\n"
            "(d / 'events.jsonl').write_text(json.dumps({'seq': 0, 'ts': 1.0, "
            "'phase': 'RUNNING'}) + '\\n')\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(run_dir)], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        assert first_line(proc, what="the run's process to start") == "ready"
        Indexer(engine, runs_dir).index_once()
        assert control.cancel(engine, run_row(engine, "mine")).phase == "CANCEL_REQUESTED"
        wait_for(lambda: proc.poll() is not None, what="the run's process to end")
        assert proc.returncode == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_cancel_that_cannot_write_leaves_the_job_queued_and_claimable(
        engine: Engine, runs_dir: Path) -> None:
    """A queued job whose CANCELLED cannot be written (its folder is gone or stays busy)
    is not stranded: the cancel says why, and a worker may still claim the job."""
    import shutil

    run = submit_command(engine, runs_dir, "gone")
    shutil.rmtree(run.dir)
    with pytest.raises(OSError):
        control.cancel(engine, run.run_pk)
    assert run_row(engine, "gone").status == "QUEUED"
    with engine.begin() as conn:
        assert q.claim(conn, "w", 1, 0.0) is not None
