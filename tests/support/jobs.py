"""Jobs for tests: submit a command into a runs folder, read a run's events and job row.

`submit_command(engine, runs, "name", "print(1)")` submits `python -c "print(1)"` (or
any argv) through the real runwatch.jobs.submit, so the run is QUEUED on disk and in
the index; `events(run_dir)` reads events.jsonl back; `job(engine, name)` is the run's
jobs row; `run_row(engine, name)` its runs row; `claim_race(url)` has processes and
threads claim from one database at once and returns every claim; `record_attempt`
writes what an attempt's worker and process leave in the folder (events, metrics, a
checkpoint, samples), so control and ingest can be tested without starting one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from runwatch.jobs.spec import command_spec
from runwatch.jobs.submit import SubmittedRun, submit
from runwatch.rundir import format as fmt
from runwatch.rundir.append import locked, write_events
from runwatch.rundir.jsonl import loads_line
from runwatch.store import jobs as store_jobs
from runwatch.store import schema as s
from runwatch.store.db import open_engine
from tests.support.wait import DEADLINE_S


def submit_command(engine: Engine, runs: Path, name: str, code: str | list[str] = "pass",
                   **fields: Any) -> SubmittedRun:
    """Submit run `name`: `python -c code` (a string) or `code` itself (an argv list), run
    from `runs`; `fields` are JobSpec fields (devices, priority, max_attempts…)."""
    argv = code if isinstance(code, list) else [sys.executable, "-c", code]
    return submit(engine, runs, command_spec(argv, cwd=Path(runs).resolve(), **fields), name)


def events(run_dir: Path) -> list[dict[str, Any]]:
    """The records of a run folder's events.jsonl, in file order."""
    path = Path(run_dir) / fmt.EVENTS
    return [loads_line(line) for line in path.read_bytes().splitlines() if line.strip()]


def run_row(engine: Engine, name: str) -> Any:
    """The runs row of run `name` (status, attempt, reason, reason_code…)."""
    with engine.connect() as conn:
        return conn.execute(select(s.runs).where(s.runs.c.name == name)).one()


def job(engine: Engine, name: str) -> dict[str, Any] | None:
    """The jobs row of run `name` (store.jobs.job_row), or None if it is not a job."""
    with engine.connect() as conn:
        return store_jobs.job_row(conn, run_row(engine, name).pk)


def claim_race(url: str, processes: int = 4, threads: int = 3) -> list[int]:
    """Run `processes` processes of `threads` threads each that claim jobs from database
    `url` until none is left (each thread its own worker id); return every run pk any of
    them claimed, in no particular order."""
    root = Path(__file__).resolve().parents[2]
    procs = [subprocess.Popen(
        [sys.executable, "-c", "import sys; from tests.support.jobs import _claim_all; "
         "_claim_all(sys.argv[1], sys.argv[2], int(sys.argv[3]))", url, f"p{i}", str(threads)],
        cwd=root, stdout=subprocess.PIPE, text=True, start_new_session=True)
        for i in range(processes)]
    claimed: list[int] = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=DEADLINE_S)
            assert proc.returncode == 0, f"a claiming process failed ({proc.returncode})"
            claimed += json.loads(out)
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return claimed


def _claim_all(url: str, name: str, threads: int) -> None:
    """One claiming process of claim_race: prints the run pks its threads claimed."""
    engine = open_engine(url, migrate=False)
    got: list[int] = []
    start = threading.Barrier(threads)

    def claimer(worker_id: str) -> None:
        start.wait()
        while True:
            with engine.begin() as conn:
                claim = store_jobs.claim(conn, worker_id, 1, time.time())
            if claim is None:
                return
            got.append(claim.run_pk)

    pool = [threading.Thread(target=claimer, args=(f"{name}-{i}",)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    print(json.dumps(got))


def record_attempt(run_dir: Path, attempt: int, end: str | None = "FAILED", steps: int = 5,
                   code: str | None = "failed") -> None:
    """Write what attempt `attempt` of a job leaves in its folder when its process ends
    in phase `end`: PREPARING (by a worker "w"), RUNNING and `end` events (with `code`
    unless it SUCCEEDED), `steps` metric records, a checkpoint, one samples file and an
    engine config, the way the SDK writes them. Pass end=None to leave it RUNNING."""
    ts = time.time()
    with locked(run_dir):
        evs: list[dict[str, Any]] = [{"phase": "PREPARING", "attempt": attempt, "worker": "w"},
                                     {"phase": "RUNNING"}]
        if end is not None:
            evs.append({"phase": end, **({"code": code, "reason": f"ended {code}"}
                                        if end != "SUCCEEDED" else {})})
        write_events(run_dir, evs)
        metrics = [{"seq": i, "ts": ts, "step": i, "loss": 1.0 / (i + attempt)}
                   for i in range(steps)]
        (run_dir / fmt.METRICS).write_text("".join(json.dumps(m) + "\n" for m in metrics))
        (run_dir / fmt.CHECKPOINTS).write_text(json.dumps(
            {"seq": 0, "ts": ts, "step": steps - 1, "kind": "training", "id": f"a{attempt}"})
            + "\n")
        (run_dir / fmt.sample_file_name(1, "train")).write_text(json.dumps(
            [{"prompt": f"attempt {attempt}", "completion": "c", "reward": 1.0}]))
        (run_dir / fmt.ENGINE_CONFIG).write_text(json.dumps({"attempt": attempt}))
