"""One `runwatch worker` process running real jobs: the phases a job goes through, its
output and environment, the reasons a worker gives (could not start, startup timeout,
a failure requeued while attempts remain), draining, a worker stopped by SIGTERM (its
jobs end CANCELLED worker_stopped, not requeued: tests/jobs/test_worker_stop.py), a
deleted run folder, each job's own devices; and `runwatch ui` with its embedded worker."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.jobs.submit import SubmittedRun
from runwatch.jobs.worker import VISIBLE_DEVICES
from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line
from runwatch.server.runner import free_port
from runwatch.store import jobs as store_jobs
from tests.support.cli import cli_here, run_cli
from tests.support.jobs import events, job, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, group_gone, phases, workers

__all__ = ["workers"]  # the fixture

# A job script that uses the SDK: attaches to its run, reports its preparation, trains
# two steps, finishes.
TRAIN = """
import runwatch
run = runwatch.init(project="p", phase="PREPARING")
run.set_phase("PREPARING", stage="tokenizing", done=2, total=2)
run.set_phase("RUNNING")
for step in range(2):
    run.log({"train/loss": 1.0 / (step + 1)}, step=step)
run.finish()
"""


def ended(engine: Engine, name: str) -> str:
    """The run's status once it is terminal in the index (else '')."""
    status = run_row(engine, name).status
    return status if status in fmt.TERMINAL_PHASES else ""


def test_a_job_runs_queued_preparing_running_succeeded(engine: Engine, db_url: str, runs_dir: Path,
                                                       workers: Workers,
                                                       tmp_path: Path) -> None:
    run = submit_command(engine, runs_dir, "train", TRAIN)
    workers.start(runs_dir, db_url)
    assert wait_for(lambda: ended(engine, "train"), what="the job to end") == "SUCCEEDED"
    assert phases(run.dir) == ["QUEUED", "PREPARING", "RUNNING", "SUCCEEDED"]
    prep = events(run.dir)[1]
    assert prep["attempt"] == 1 and prep["worker"].split(":")[0]
    # the same indexing pass stores the metrics after the events
    wait_for(lambda: run_row(engine, "train").observed_step == 1, what="its steps indexed")
    row = run_row(engine, "train")
    assert (row.attempt, row.reason, row.reason_code) == (1, None, None)
    # the SDK's SUCCEEDED is indexed as soon as it is written; the worker then releases
    wait_for(lambda: (job(engine, "train") or {}).get("worker_id", "") is None,
             what="the worker to release the job")
    assert (job(engine, "train") or {}).get("pid", "") is None


def test_a_command_gets_its_run_in_the_environment_and_its_output_is_kept(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, tmp_path: Path) -> None:
    show = (f"import os; print(os.environ['{fmt.ENV_RUN_DIR}'], os.environ['{fmt.ENV_RUN_ID}'],"
            f" os.environ['{fmt.ENV_ATTEMPT}'], os.getcwd()); import sys; "
            "print('to stderr', file=sys.stderr)")
    run = submit_command(engine, runs_dir, "env", show)
    workers.start(runs_dir, db_url)
    assert wait_for(lambda: ended(engine, "env"), what="the job to end") == "SUCCEEDED"
    output = (fmt.attempt_dir(run.dir, 1) / fmt.OUTPUT_LOG).read_text().splitlines()
    assert output == [f"{run.dir} {run.run_id} 1 {runs_dir.resolve()}", "to stderr"]
    assert phases(run.dir) == ["QUEUED", "PREPARING", "SUCCEEDED"]


def test_a_program_that_cannot_start_fails_with_its_reason(engine: Engine, db_url: str,
                                                           runs_dir: Path, workers: Workers,
                                                           tmp_path: Path) -> None:
    run = submit_command(engine, runs_dir, "missing", [str(tmp_path / "no-such-program")])
    workers.start(runs_dir, db_url)
    assert wait_for(lambda: ended(engine, "missing"), what="the job to end") == "FAILED"
    last = events(run.dir)[-1]
    assert (last["phase"], last["code"]) == ("FAILED", "could_not_start")
    assert run_row(engine, "missing").reason_code == "could_not_start"
    output = (fmt.attempt_dir(run.dir, 1) / fmt.OUTPUT_LOG).read_text()
    assert "could not start" in output and "no-such-program" in output


# The pid first: under load the startup timeout can end a job still importing runwatch.
PID = "import os, time; open('pid', 'w').write(str(os.getpid())); "
HANG = PID + "time.sleep(300)"
# Attaches in PREPARING, reports one step of it, then hangs (its SDK handles SIGTERM).
SDK_HANG = (PID + "import runwatch; run = runwatch.init(phase='PREPARING'); "
            "run.set_phase('PREPARING', stage='tokenizing', done=0, total=10); time.sleep(300)")


@pytest.mark.parametrize("hang", [HANG, SDK_HANG], ids=["command", "sdk"])
def test_a_job_silent_in_preparing_past_its_startup_timeout_fails(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, tmp_path: Path,
        hang: str) -> None:
    run = submit_command(engine, runs_dir, "hang", hang, startup_timeout_s=1.0)
    workers.start(runs_dir, db_url)
    assert wait_for(lambda: ended(engine, "hang"), what="the job to end") == "FAILED"
    last = events(run.dir)[-1]
    assert (last["phase"], last["code"]) == ("FAILED", "startup_timeout")
    assert group_gone(int((runs_dir / "pid").read_text()))


def test_a_failed_attempt_is_queued_again_while_attempts_remain(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, tmp_path: Path) -> None:
    # attempt 1 crashes; attempt 2 succeeds
    code = (f"import os, sys; n = os.environ['{fmt.ENV_ATTEMPT}']; print('attempt', n); "
            "sys.exit(0 if n == '2' else 1)")
    run = submit_command(engine, runs_dir, "flaky", code, max_attempts=2)
    workers.start(runs_dir, db_url)
    assert wait_for(lambda: ended(engine, "flaky"), what="the job to end") == "SUCCEEDED"
    evs = events(run.dir)
    assert [(ev["phase"], ev.get("attempt")) for ev in evs] == [
        ("QUEUED", 1), ("PREPARING", 1), ("FAILED", 1), ("QUEUED", 2), ("PREPARING", 2),
        ("SUCCEEDED", 2)]
    assert evs[2]["code"] and run_row(engine, "flaky").attempt == 2
    for n in (1, 2):
        assert (fmt.attempt_dir(run.dir, n) / fmt.OUTPUT_LOG).read_text() == f"attempt {n}\n"
    # the failed attempt's output is in the run's logs too; the one that succeeded is not
    [said] = [loads_line(line) for line in (run.dir / fmt.LOGS).read_bytes().splitlines()]
    assert (said["level"], said["data"]) == ("error", {"attempt": 1,
                                                       "output": "attempts/1/output.log"})
    assert said["message"].endswith(":\nattempt 1")


def test_a_drained_worker_finishes_its_job_claims_no_more_and_exits(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, tmp_path: Path) -> None:
    gate = tmp_path / "go"
    wait_gate = (f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.05)")
    submit_command(engine, runs_dir, "first", wait_gate)
    proc = workers.start(runs_dir, db_url)
    wait_for(lambda: run_row(engine, "first").status == "PREPARING", what="the job to start")
    submit_command(engine, runs_dir, "second", "pass")
    with engine.begin() as conn:
        [worker] = store_jobs.list_workers(conn)
        assert store_jobs.set_draining(conn, worker["id"], True)
    # the worker reads the drain with each heartbeat: let one happen before the gate opens
    beat = _heartbeat(engine)
    wait_for(lambda: _heartbeat(engine) > beat, what="the worker's next heartbeat")
    gate.touch()
    assert proc.wait(timeout=30) == 0
    assert ended(engine, "first") == "SUCCEEDED"
    assert run_row(engine, "second").status == "QUEUED"
    with engine.connect() as conn:
        [worker] = store_jobs.list_workers(conn)
    assert worker["stopped_at"] is not None and worker["jobs"] == []


def _heartbeat(engine: Engine) -> float:
    with engine.connect() as conn:
        return float(store_jobs.list_workers(conn)[0]["heartbeat_at"])


def test_a_worker_stopped_by_sigterm_stops_its_jobs_and_queues_none_again(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, tmp_path: Path) -> None:
    forever = (f"import os, time; open('pid-' + os.environ['{fmt.ENV_RUN_ID}'], 'w')"
               ".write(str(os.getpid())); print('up', flush=True); time.sleep(300)")
    again = submit_command(engine, runs_dir, "again", forever, max_attempts=2)
    once = submit_command(engine, runs_dir, "once", forever)
    proc = workers.start(runs_dir, db_url, devices=2)
    for run in (again, once):

        def up(run: SubmittedRun = run) -> bool:
            return ((fmt.attempt_dir(run.dir, 1) / fmt.OUTPUT_LOG).exists()
                    and (fmt.attempt_dir(run.dir, 1) / fmt.OUTPUT_LOG).read_text() == "up\n")

        wait_for(up, what=f"{run.name} to run")
    assert workers.stop(proc, signal.SIGTERM) == 0
    # stopped like a cancel, and recorded as its worker's stop by the worker (no SDK
    # here); not queued again even where an attempt remains
    for run in (again, once):
        assert [(ev["phase"], ev.get("attempt"), ev.get("code"))
                for ev in events(run.dir)][-2:] == [
            ("PREPARING", 1, None), ("CANCELLED", 1, "worker_stopped")]
        row = run_row(engine, run.name)
        assert (row.status, row.attempt, row.reason_code) == ("CANCELLED", 1, "worker_stopped")
        assert group_gone(int((runs_dir / f"pid-{run.run_id}").read_text()))
    with engine.connect() as conn:
        assert store_jobs.queue_depth(conn) == 0


def test_ui_runs_jobs_and_sigterm_stops_them_and_queues_none_again(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, tmp_path: Path) -> None:
    quick = submit_command(engine, runs_dir, "quick", TRAIN)
    hang = f"import os, time; open({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()));" \
           " time.sleep(300)"
    long = submit_command(engine, runs_dir, "long", hang, max_attempts=2)
    ui = workers.spawn(runs_dir, ["ui", str(runs_dir), "--db", db_url,
                                  "--port", str(free_port())])
    # its one embedded worker (one cpu device) runs the older job, then the other
    assert wait_for(lambda: ended(engine, "quick"), what="the first job to end") == "SUCCEEDED"
    assert phases(quick.dir) == ["QUEUED", "PREPARING", "RUNNING", "SUCCEEDED"]
    pid = int(wait_for(lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text(),
                       what="the second job to start"))
    assert workers.stop(ui, signal.SIGTERM) == 0
    assert group_gone(pid)
    assert [(ev["phase"], ev.get("attempt"), ev.get("code")) for ev in events(long.dir)] == [
        ("QUEUED", 1, None), ("PREPARING", 1, None), ("CANCELLED", 1, "worker_stopped")]
    with engine.connect() as conn:
        [worker] = store_jobs.list_workers(conn)
    assert worker["stopped_at"] is not None and worker["jobs"] == []


def test_a_job_whose_folder_is_deleted_is_released_and_the_worker_goes_on(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, tmp_path: Path) -> None:
    hang = f"import os, time; open({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()));" \
           " time.sleep(300)"
    run = submit_command(engine, runs_dir, "deleted", hang)
    workers.start(runs_dir, db_url)
    pid = int(wait_for(lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text(),
                       what="the job to start"))
    shutil.rmtree(run.dir)
    os.killpg(pid, signal.SIGKILL)
    wait_for(lambda: (job(engine, "deleted") or {}).get("worker_id", "") is None,
             what="the job to be released")
    submit_command(engine, runs_dir, "next", "pass")
    assert wait_for(lambda: ended(engine, "next"), what="the next job to end") == "SUCCEEDED"
    # the index alone says how the folderless job ended; no worker may claim it again
    gone = run_row(engine, "deleted")
    assert (gone.status, gone.reason_code) == ("FAILED", "stopped_early"), gone
    assert "its run folder was deleted" in gone.reason


def test_a_worker_runs_its_folders_and_profiles_jobs_each_on_devices_of_its_own(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, tmp_path: Path) -> None:
    (runs_dir / ".runwatch").mkdir(exist_ok=True)
    (runs_dir / ".runwatch" / "profiles.yaml").write_text(
        "profiles:\n  gpu3:\n    devices: 3\n    hourly_rate: 2.0\n")
    gate = tmp_path / "go"
    show = (f"import os, time; print(os.environ['{VISIBLE_DEVICES}'], flush=True)\n"
            f"while not os.path.exists({str(gate)!r}): time.sleep(0.05)")
    # the oldest jobs ask for the cpu profile, or are in another runs folder (of the same
    # index): this worker leaves them to others
    submit_command(engine, runs_dir, "on-cpu", "pass")
    submit_command(engine, tmp_path / "other-runs", "elsewhere", "pass", device_profile="gpu3")
    runs = [submit_command(engine, runs_dir, name, show, devices=n, device_profile="gpu3")
            for name, n in (("two", 2), ("one", 1))]
    # the worker's own CUDA_VISIBLE_DEVICES names the devices it may hand out
    workers.start(runs_dir, db_url, devices=3, device_profile="gpu3",
                  env={VISIBLE_DEVICES: "5,6,7"})

    def output(run_dir: Path) -> str:
        path = fmt.attempt_dir(run_dir, 1) / fmt.OUTPUT_LOG
        return path.read_text().strip() if path.exists() else ""

    shown = wait_for(lambda: all(output(r.dir) for r in runs) and [output(r.dir) for r in runs],
                     what="both jobs to print their devices")
    assert shown == ["5,6", "7"]  # the oldest job is claimed first
    # a job of all three devices waits for both, then gets them back
    third = submit_command(engine, runs_dir, "three", show, devices=3, device_profile="gpu3")
    gate.touch()
    assert wait_for(lambda: ended(engine, "three"), what="the third job to end") == "SUCCEEDED"
    assert output(third.dir) == "5,6,7"
    assert [ended(engine, r.name) for r in runs] == ["SUCCEEDED", "SUCCEEDED"]
    assert run_row(engine, "on-cpu").status == run_row(engine, "elsewhere").status == "QUEUED"


def test_a_worker_offering_more_devices_than_it_may_use_is_refused(runs_dir: Path,
                                                                   tmp_path: Path) -> None:
    (runs_dir / ".runwatch").mkdir(exist_ok=True)
    (runs_dir / ".runwatch" / "profiles.yaml").write_text(
        "profiles:\n  gpu3:\n    devices: 3\n    hourly_rate: 2.0\n")
    proc = run_cli("worker", str(runs_dir), "--db", str(tmp_path / "index.db"),
                   "--device-profile", "gpu3", env={VISIBLE_DEVICES: "0"}, check=False)
    assert proc.returncode == 2
    assert f"offers 3 devices but {VISIBLE_DEVICES} names 1" in proc.stderr


@pytest.mark.parametrize("command", ["worker", "ui"])
def test_a_worker_offering_more_devices_than_its_profile_has_is_refused(
        command: str, runs_dir: Path, tmp_path: Path) -> None:
    """A gpu3 worker told to offer 5 would hand its jobs device ids 3 and 4, which a
    machine of that profile lacks. (A cpu worker offering 2 runs two jobs at once, as
    test_two_workers and others start them.)"""
    assert VISIBLE_DEVICES not in os.environ
    (runs_dir / ".runwatch").mkdir(exist_ok=True)
    (runs_dir / ".runwatch" / "profiles.yaml").write_text(
        "profiles:\n  gpu3:\n    devices: 3\n    hourly_rate: 2.0\n")
    where = ["--db", str(tmp_path / "index.db")] if command == "worker" else \
        ["--port", str(free_port())]
    proc = run_cli(command, str(runs_dir), *where, "--device-profile", "gpu3", "--devices", "5",
                   check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = " ".join(proc.stderr.split())
    assert "a worker of profile gpu3 has 3 devices, so it can offer at most that many, " \
           "not 5: offer fewer (--devices), or give the profile devices: 5" in said


def test_a_heartbeat_timeout_not_longer_than_the_heartbeats_is_refused(tmp_path: Path) -> None:
    """The worker would be lost between two of its own heartbeats, and its jobs reaped.
    (The folder does not exist: a worker that was not refused stops there, not runs.)"""
    said = cli_here("worker", str(tmp_path / "missing"), "--db", str(tmp_path / "index.db"),
                    "--heartbeat-s", "2", "--heartbeat-timeout-s", "2", check=False)
    assert said.returncode == 2
    assert "--heartbeat-timeout-s 2 would call this worker lost between two of its " \
           "heartbeats (2 s apart)" in " ".join(said.stderr.split())


def test_an_attempt_keeps_the_rate_it_ran_at_when_the_profile_s_rate_changes(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers, tmp_path: Path) -> None:
    """Spend was priced at the profile's rate as it is now, so raising a rate re-priced
    every finished run. The worker records the rate on the attempt's PREPARING event, and
    the attempt is priced at it."""
    profiles = runs_dir / ".runwatch" / "profiles.yaml"
    profiles.parent.mkdir()
    profiles.write_text("profiles:\n  cpu: {hourly_rate: 2.0}\n")
    run = submit_command(engine, runs_dir, "priced", TRAIN)
    proc = workers.start(runs_dir, db_url)
    wait_for(lambda: run_row(engine, "priced").status == "SUCCEEDED", what="the run to end")
    workers.stop(proc)
    assert [ev.get("hourly_rate") for ev in events(run.dir) if ev["phase"] == "PREPARING"
            and ev.get("worker")] == [2.0]
    profiles.write_text("profiles:\n  cpu: {hourly_rate: 9.0}\n")
    detail = json.loads(cli_here("runs", "get", "priced", "--dir", str(runs_dir), "--db", db_url,
                                 "-o", "json").stdout)
    cost, (attempt,) = detail["cost"], detail["attempts"]
    assert cost["device_seconds"] > 0
    assert cost["hourly_rate"] == attempt["hourly_rate"] == 2.0
    # the worker's own spend keeps the rate it registered at too (a trial saw a stopped
    # worker's spend follow every later change of the rate)
    view = json.loads(cli_here("resources", str(runs_dir), "--db", db_url, "-o", "json").stdout)
    (worker,) = view["workers"]
    assert worker["status"] == "stopped" and worker["hourly_rate"] == 2.0
    up_h = (worker["stopped_at"] - worker["started_at"]) / 3600
    assert worker["spend"] == pytest.approx(up_h * worker["devices"] * 2.0)
    assert cost["spend"] == pytest.approx(cost["device_seconds"] / 3600 * 2.0)
    assert attempt["spend"] == pytest.approx(cost["spend"])
    # with the profiles file unreadable, the recorded rate still prices it
    profiles.write_text("profiles: [")
    detail = json.loads(cli_here("runs", "get", "priced", "--dir", str(runs_dir), "--db", db_url,
                                 "-o", "json").stdout)
    assert detail["cost"]["hourly_rate"] == 2.0 and detail["cost"]["problem"] is None
    # a retry at the new rate: the run's spend is each attempt's, and says so
    profiles.write_text("profiles:\n  cpu: {hourly_rate: 9.0}\n")
    cli_here("runs", "retry", "priced", "--dir", str(runs_dir), "--db", db_url)
    proc = workers.start(runs_dir, db_url)
    wait_for(lambda: run_row(engine, "priced").status == "SUCCEEDED"
             and run_row(engine, "priced").attempt == 2, what="attempt 2 to end")
    workers.stop(proc)
    shown = " ".join(cli_here("runs", "get", "priced", "--dir", str(runs_dir), "--db", db_url,
                              env={"COLUMNS": "200"}).stdout.split())
    assert "its attempts at 2 and 9 per device-hour" in shown, shown
    assert re.search(r"#1: SUCCEEDED, [\d.]+ device-seconds, spend (< )?[\d.]+ at 2\b", shown)
    assert re.search(r"#2: SUCCEEDED, [\d.]+ device-seconds, spend (< )?[\d.]+ at 9\b", shown)
    # retried by hand past its one automatic attempt: not "attempt 2 of at most 1"
    assert "attempt 2 (retried by hand, past its automatic attempts)" in shown, shown
