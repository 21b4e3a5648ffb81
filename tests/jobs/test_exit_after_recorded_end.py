"""A job whose process exits non-zero after its run recorded SUCCEEDED failed: the worker
records FAILED `failed` after the SDK's end, with the exit code in the reason, and the
index, `runs list` and the run detail read it; the SDK's end stays in events.jsonl, the
job is not queued again (its training ended: a next attempt would move it out of view),
and a retry is allowed. Exit 0 after SUCCEEDED stays SUCCEEDED; a run the SDK ended FAILED
or CANCELLED keeps its own reason, whatever the exit code.

Found in a session's review: an evaluate-only script under the Hugging Face callback that
ended with `sys.exit(3)` (or a `with runwatch.init()` block done, then a failed upload)
read SUCCEEDED: `classify` took the SDK's SUCCEEDED over the worker's exit code 3.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.ingest import Indexer, IndexReport
from runwatch.jobs import control, reaper
from runwatch.jobs.failures import AttemptEnd, classify
from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line
from runwatch.store import jobs as store_jobs
from tests.support.cli import cli_here
from tests.support.jobs import events, job, record_attempt, run_row, submit_command
from tests.support.wait import first_line, rest_of_output, wait_for
from tests.support.workers import Workers, workers

__all__ = ["workers"]  # the fixture

# What the job's script does after its run started: how the SDK ends it, then the exit.
PREFIX = "import atexit, sys, runwatch\n"
UPLOAD_FAILS = "print('the upload failed', file=sys.stderr)\nsys.exit(3)"
WITH_BLOCK = "with runwatch.init(project='t') as run:\n    run.log({'loss': 1.0}, step=0)\n"
JOBS = {  # name: (script, the phases of its terminal events, the code the run ends with)
    "with-exit-3": (WITH_BLOCK + UPLOAD_FAILS, ["SUCCEEDED", "FAILED"], "failed"),
    # as RunwatchCallback ends a job's run held open past train(): at the process's exit
    "at-exit-3": ("run = runwatch.init(project='t')\nrun.log({'loss': 1.0}, step=0)\n"
                  "atexit.register(run.finish)\n" + UPLOAD_FAILS, ["SUCCEEDED", "FAILED"],
                  "failed"),
    "with-exit-0": (WITH_BLOCK + "sys.exit(0)", ["SUCCEEDED"], None),
    "failed-exit-3": ("run = runwatch.init(project='t')\nrun.fail('bad shard')\nsys.exit(3)",
                      ["FAILED"], None),
    "cancelled-exit-3": ("run = runwatch.init(project='t')\nrun.finish('CANCELLED')\n"
                         "sys.exit(3)", ["CANCELLED"], "cancelled"),
}


def _logs(run_dir: Path) -> list[dict[str, object]]:
    path = run_dir / fmt.LOGS
    return [loads_line(line) for line in path.read_bytes().splitlines() if line.strip()]


def test_a_job_that_exits_non_zero_after_its_run_succeeded_failed(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers) -> None:
    # two attempts each: one whose training succeeded is not queued again all the same (a
    # run the SDK ended FAILED would be: one attempt for it)
    runs = {name: submit_command(engine, runs_dir, name, PREFIX + script,
                                 max_attempts=1 if name == "failed-exit-3" else 2)
            for name, (script, _, _) in JOBS.items()}
    workers.start(runs_dir, db_url, devices=len(JOBS))
    # concluded: the worker has let go of each job (its row names no worker)
    wait_for(lambda: all(run_row(engine, n).status in fmt.TERMINAL_PHASES
                         and (job(engine, n) or {}).get("worker_id") is None for n in JOBS),
             what="the jobs to end and their worker to let them go")

    for name, (_, ends, code) in JOBS.items():
        evs = events(runs[name].dir)
        assert [e["phase"] for e in evs if e["phase"] in fmt.TERMINAL_PHASES] == ends, name
        row = run_row(engine, name)
        assert (row.status, row.attempt) == (ends[-1], 1), name  # never queued again
        if name == "failed-exit-3":
            assert (row.reason, evs[-1]["reason"]) == ("bad shard", "bad shard")
        else:
            assert row.reason_code == code, name

    for name in ("with-exit-3", "at-exit-3"):
        last = events(runs[name].dir)[-1]
        assert (last["attempt"], last["code"]) == (1, "failed")
        assert "exited with code 3 after its run recorded SUCCEEDED" in last["reason"]
        assert run_row(engine, name).reason == last["reason"]
        # the end of its output is in the run's logs, as for any attempt that failed
        assert any(rec["level"] == "error" and "attempt 1 ended FAILED" in str(rec["message"])
                   and "the upload failed" in str(rec["message"])
                   for rec in _logs(runs[name].dir)), name

    listed = json.loads(cli_here("runs", "list", "--dir", str(runs_dir), "--db", db_url,
                                 "-o", "json").stdout)
    assert {r["name"]: r["status"] for r in listed} == {n: e[-1] for n, (_, e, _) in
                                                        JOBS.items()}
    detail = json.loads(cli_here("runs", "get", "with-exit-3", "--dir", str(runs_dir),
                                 "--db", db_url, "-o", "json").stdout)
    assert detail["failure"]["code"] == "failed" and detail["failure"]["what_to_do"]
    assert "exited with code 3" in detail["failure"]["reason"]

    # the job failed, so it may be retried (as attempt 2)
    assert control.retry(engine, runs["with-exit-3"].run_pk).phase == "QUEUED"
    # its first event (the worker, still running, may start it at once: not the last one)
    queued = next(e for e in events(runs["with-exit-3"].dir) if e.get("attempt") == 2)
    assert (queued["phase"], queued["attempt"]) == ("QUEUED", 2)


@pytest.mark.parametrize(("end", "phase"), [
    (AttemptEnd(exit_code=3), "FAILED"),
    (AttemptEnd(exit_code=139), "FAILED"),  # over 128, but no stop signal's: the program's
    (AttemptEnd(exit_code=0), "SUCCEEDED"),
    (AttemptEnd(exit_code=137), "SUCCEEDED"),  # a shell's SIGKILL: a kill in teardown
    (AttemptEnd(signal=signal.SIGKILL, oom_killed=True), "SUCCEEDED"),
    (AttemptEnd(signal=signal.SIGSEGV), "SUCCEEDED"),
    (AttemptEnd(exit_code=1, cancel_requested=True), "SUCCEEDED"),  # stopped as asked
    (AttemptEnd(exit_code=1, worker_stopped=True), "SUCCEEDED"),
    (AttemptEnd(worker_lost=True), "SUCCEEDED"),  # its exit status went with its worker
])
def test_what_undoes_a_recorded_success(end: AttemptEnd, phase: str) -> None:
    """Only an exit code of the program's own fails a run that recorded SUCCEEDED."""
    verdict = classify(AttemptEnd(**{**end.__dict__, "sdk_phase": "SUCCEEDED",
                                     "sdk_recorded": True}))
    assert verdict.phase == phase
    if phase == "FAILED":
        assert verdict.code == "failed" and verdict.text is not None
        assert verdict.text.endswith(f"exited with code {end.exit_code} after its run "
                                     "recorded SUCCEEDED")
    else:
        assert (verdict.code, verdict.text) == (None, None)


def test_wait_exit_status_is_the_jobs_end_not_the_success_its_run_recorded_first(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, tmp_path: Path) -> None:
    # `runs wait --exit-status` exited 0 as soon as the index showed SUCCEEDED, before the
    # worker failed the job for its exit code
    gate = tmp_path / "gate"
    script = (WITH_BLOCK + "import os, time\n"
              f"while not os.path.exists({str(gate)!r}):\n    time.sleep(0.05)\n"
              + UPLOAD_FAILS)
    submit_command(engine, runs_dir, "gated", PREFIX + script, max_attempts=1)
    workers.start(runs_dir, db_url)
    wait_for(lambda: run_row(engine, "gated").status == "SUCCEEDED",
             what="the run to record SUCCEEDED while its process waits")
    wait = subprocess.Popen([sys.executable, "-m", "runwatch", "runs", "wait", "gated",
                             "--exit-status", "--interval", "0.1", "--timeout", "120",
                             "--dir", str(runs_dir), "--db", db_url],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        said = first_line(wait, what="the wait's first look")
        assert "SUCCEEDED" in said
        assert wait.poll() is None  # the process has not exited: the job has not ended
        gate.touch()
        out = rest_of_output(wait, what="the wait to end", deadline=120)
    finally:
        if wait.poll() is None:
            wait.kill()
            wait.communicate()
    told = " ".join((said + out).split())
    assert wait.returncode == 1, told  # FAILED's
    assert "gated recorded SUCCEEDED: waiting for its process to exit and its worker to " \
        "conclude the job" in told
    assert "exited with code 3 after its run recorded SUCCEEDED" in told


@pytest.mark.parametrize(("recorded", "exit_code", "max_attempts", "status"), [
    ("SUCCEEDED", 3, 1, "FAILED"),  # the exit status undoes the SDK's SUCCEEDED
    ("FAILED", 1, 2, "QUEUED"),  # queued again: attempt 2
])
def test_the_job_is_let_go_only_once_its_end_is_in_the_index(
        engine: Engine, runs_dir: Path, recorded: str, exit_code: int, max_attempts: int,
        status: str) -> None:
    """Seen in CI (`runs wait --exit-status`): the worker let the job go, then indexed the
    run, so a look between the two saw the job released and the SDK's SUCCEEDED still in
    the index, and exited 0 for a job its worker failed. Whoever sees the job let go now
    reads its end: the worker indexes the run first."""
    run = submit_command(engine, runs_dir, "ordered", max_attempts=max_attempts)
    with engine.begin() as conn:
        claim = store_jobs.claim(conn, "w", 1, time.time())
    assert claim is not None
    record_attempt(run.dir, 1, recorded)  # what its SDK wrote; the process has exited
    indexer = Indexer(engine, runs_dir)
    indexer.index_once()
    assert run_row(engine, "ordered").status == recorded

    seen: list[tuple[object, str]] = []  # at each index of the run: (holder, status after)

    def index(run_dir: Path) -> None:
        holder = (job(engine, "ordered") or {}).get("worker_id")
        indexer.index_run(run_dir, IndexReport())
        seen.append((holder, run_row(engine, "ordered").status))

    assert reaper.conclude(engine, claim, "w", AttemptEnd(exit_code=exit_code), index)
    assert seen and seen[0] == ("w", status), seen
    after = job(engine, "ordered")
    assert after is not None and after["worker_id"] is None
    assert run_row(engine, "ordered").status == status
