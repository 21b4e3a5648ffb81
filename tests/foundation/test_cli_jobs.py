"""`runwatch submit`, `runs cancel|retry|wait` and `resources` over a real runs folder and its
SQLite index (no worker runs here: the end-to-end runs through a worker are tests/jobs').
Each command runs at least once as a user runs it, a real subprocess (`run_cli`); the
other calls, which read what a command answers or refuses, run it in this process
(`cli_here`: a subprocess costs 1-2 s of imports under load)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

import runwatch
from runwatch.cli.context import default_db
from runwatch.jobs.failures import CATALOGUE
from runwatch.rundir.append import append_events
from runwatch.store import jobs as store_jobs
from runwatch.store.db import open_engine
from tests.support import first_line, run_cli
from tests.support.cli import CLI_DEADLINE_S, cli_here

PROFILES = "profiles:\n  big:\n    devices: 4\n    hourly_rate: 2.0\n"


def submit(runs: Path, *args: str, check: bool = True) -> dict:
    out = cli_here("submit", "--dir", str(runs), "-o", "json", *args, check=check)
    return json.loads(out.stdout) if check else {"proc": out}


def detail(runs: Path, name: str) -> dict:
    return json.loads(cli_here("runs", "get", name, "--dir", str(runs), "-o", "json").stdout)


def test_submit_a_recipe_queues_its_run_and_prints_runnable_next_steps(tmp_path: Path) -> None:
    runs = tmp_path / "new runs"  # not made yet, and a space to quote
    out = run_cli("submit", "recipes", "sft", "max_steps=3", "learning_rate=1e-3",
                  "--dir", str(runs), "--name", "first", "--project", "p", "--priority", "5",
                  "--max-attempts", "2", "--startup-timeout", "60").stdout
    assert "first" in out and "QUEUED" in out
    assert "no worker of profile cpu is running" in out and "runwatch worker" in out
    shown = [shlex.split(ln.strip()) for ln in out.splitlines() if "runwatch runs " in ln]
    assert [words[1:3] for words in shown] == [["runs", "get"], ["runs", "wait"]]
    # as printed: the first word is `runwatch` where PATH finds it, else this install's path
    assert shown[0][0] == "runwatch" or Path(shown[0][0]).name == "runwatch"
    printed = subprocess.run([*shown[0], "-o", "json"], capture_output=True, text=True,
                             timeout=CLI_DEADLINE_S, check=True)
    got = json.loads(printed.stdout)
    assert got["name"] == "first" and got["state"]["phase"] == "QUEUED"
    assert got["state"]["project"] == "p" and got["state"]["method"] == "sft"
    job = got["job"]
    assert (job["kind"], job["recipe"], job["priority"], job["max_attempts"],
            job["startup_timeout_s"], job["devices"], job["device_profile"]) == \
        ("recipe", "sft", 5, 2, 60.0, 1, "cpu")
    assert job["argv"][-4:] == ["recipes", "sft", "max_steps=3", "learning_rate=1e-3"]
    listed = run_cli("runs", "list", "--dir", str(runs), "--status", "QUEUED").stdout
    assert "first" in listed
    assert "first" in cli_here("runs", "list", "--dir", str(runs), "--status", "queued").stdout
    # a word that is no phase is refused, naming the phases (it listed "no runs" before)
    bad = cli_here("runs", "list", "--dir", str(runs), "--status", "BOGUS", check=False)
    assert bad.returncode == 2 and "'BOGUS' is not a phase: QUEUED, PREPARING" in bad.stderr


def test_submit_a_command_keeps_its_own_options_after_the_double_dash(runs_dir: Path) -> None:
    made = submit(runs_dir, "--devices", "1", "--", "python", "train.py", "--lr", "1e-4",
                  "-o", "x")
    assert made["status"] == "QUEUED" and made["run"]["name"].startswith("job-")
    job = detail(runs_dir, made["run"]["name"])["job"]
    assert job["kind"] == "command" and job["recipe"] is None
    assert job["argv"] == ["python", "train.py", "--lr", "1e-4", "-o", "x"]


@pytest.mark.parametrize(("args", "message"), [
    (["recipes", "nope"], "recipe must be one of sft, dpo, grpo, not 'nope'"),
    (["recipes"], "needs the recipe's name"),
    (["recipes", "sft", "max_step=3"], "the sft recipe has no setting 'max_step'; runwatch "
                                       "recipes sft --help lists its settings"),
    (["recipes", "sft", "max_steps=many"], "max_steps"),
    (["recipes", "dpo", "beta=-1"], "beta must be positive"),
    (["recipes", "sft", "name=x"], "name is the job's own, not a recipe setting: pass --name"),
    (["recipes", "sft", "runs_dir=/tmp/x"], "pass --dir"),
    (["--devices", "2", "recipes", "sft"], "profile cpu has 1 device, so a job on it can ask "
                                           "for at most that many, not 2"),
    (["--device-profile", "tpu", "recipes", "sft"], "there is no device profile 'tpu'"),
    (["--name", "../up", "recipes", "sft"], "run name"),
    (["--project", "a/b", "--", "python", "x.py"], "project name"),
])
def test_a_refused_submit_says_why_and_makes_nothing(tmp_path: Path, args: list[str],
                                                    message: str) -> None:
    runs = tmp_path / "runs"
    proc = cli_here("submit", "--dir", str(runs), *args, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and proc.stdout == ""
    assert not runs.exists(), "a refused job leaves no folder and no index behind"


def test_submit_warns_when_the_recipe_would_log_to_wandb_with_no_wandb_here(
        tmp_path: Path) -> None:
    """The GRPO recipe logs to W&B by default: submitted where W&B cannot start (no key,
    or no wandb), the job is queued with a warning that says what a worker will do and
    what to set, not left to fail unexplained after its wait in the queue."""
    runs = tmp_path / "runs"
    no_wandb = {"WANDB_API_KEY": None, "WANDB_MODE": None, "WANDB_BASE_URL": None,
                "HOME": str(tmp_path)}  # no ~/.netrc either
    got = cli_here("submit", "--dir", str(runs), "-o", "json", "--name", "g", "recipes",
                   "grpo", "from_scratch=true", env=no_wandb)
    [warning] = json.loads(got.stdout)["warnings"]
    assert "the grpo recipe's default wandb_project is 'post-training-cookbook'" in warning
    assert "wandb_project=None" in warning and warning in got.stderr.replace("\n", " ")
    assert json.loads(got.stdout)["status"] == "QUEUED", "queued all the same"
    # given on the command line, the warning does not call it a default
    got = cli_here("submit", "--dir", str(runs), "-o", "json", "--name", "s", "recipes",
                   "sft", "wandb_project=mine", env=no_wandb)
    [warning] = json.loads(got.stdout)["warnings"]
    assert "default" not in warning and "W&B" in warning
    # W&B turned off: no warning; a command job is not read for settings
    for args in (["recipes", "grpo", "from_scratch=true", "wandb_project=None"],
                 ["--", "python", "train.py", "wandb_project=x"]):
        got = cli_here("submit", "--dir", str(runs), "-o", "json", *args, env=no_wandb)
        assert json.loads(got.stdout)["warnings"] == [] and "warning" not in got.stderr


def test_submit_warns_of_a_command_this_machine_cannot_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A program not on PATH, a path to no file and a script that is not executable would
    each end every attempt could_not_start on a worker here: submit says so, and queues
    the job all the same (a worker elsewhere may have it). One it can start warns of
    nothing."""
    runs = tmp_path / "runs"
    monkeypatch.chdir(tmp_path)  # the job's folder: where a relative program is looked for
    (tmp_path / "train.sh").write_text("#!/bin/sh\necho hi\n")
    for name, program, said in (
            ("a", "no-such-trainer-xyz", "is not on this machine's PATH"),
            ("b", "./missing.sh", "is no file here"),
            ("c", "./train.sh", "chmod +x ./train.sh")):
        got = cli_here("submit", "--dir", str(runs), "-o", "json", "--name", name, "--",
                       program, "--lr", "1e-4")
        [warning] = json.loads(got.stdout)["warnings"]
        assert said in warning and "could_not_start" in warning, warning
        assert warning in got.stderr.replace("\n", " ")
        assert json.loads(got.stdout)["status"] == "QUEUED", "queued all the same"
    (tmp_path / "train.sh").chmod(0o755)
    for name, program in (("d", "./train.sh"), ("e", sys.executable), ("f", "python3")):
        got = cli_here("submit", "--dir", str(runs), "-o", "json", "--name", name, "--",
                       program)
        assert json.loads(got.stdout)["warnings"] == [] and got.stderr == "", got.stderr


def test_a_taken_name_is_refused_and_the_run_there_is_untouched(runs_dir: Path) -> None:
    with runwatch.init(name="mine", dir=runs_dir) as run:
        run.log({"loss": 1.0}, step=0)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in (runs_dir / "mine").iterdir())
    proc = cli_here("submit", "--dir", str(runs_dir), "--name", "mine", "recipes", "sft",
                   check=False)
    assert proc.returncode == 2 and "a run named 'mine' already exists" in proc.stderr
    assert sorted((p.name, p.stat().st_mtime_ns) for p in (runs_dir / "mine").iterdir()) == \
        before
    assert [r["name"] for r in json.loads(cli_here("runs", "list", "--dir", str(runs_dir),
                                                  "-o", "json").stdout)] == ["mine"]


def test_cancel_a_queued_job_then_retry_it(runs_dir: Path) -> None:
    submit(runs_dir, "--name", "q", "--max-attempts", "3", "--", "python", "-c", "pass")
    cancelled = json.loads(cli_here("runs", "cancel", "q", "--dir", str(runs_dir),
                                   "-o", "json").stdout)
    assert cancelled["status"] == "CANCELLED" and cancelled["run"]["status"] == "CANCELLED"
    again = cli_here("runs", "cancel", "q", "--dir", str(runs_dir), check=False)
    assert again.returncode == 2
    assert "cannot cancel run q: the run has already ended (CANCELLED)" in again.stderr
    assert "retry it" in again.stderr
    ended = detail(runs_dir, "q")
    assert ended["failure"]["code"] == "cancelled_before_start"
    assert ended["failure"]["what_to_do"]
    table = cli_here("runs", "get", "q", "--dir", str(runs_dir)).stdout
    assert "What to do:" in table and "[cancelled_before_start]" in table
    assert "Queue wait:" in table

    assert "Retry the run" in ended["failure"]["what_to_do"]  # a job can be retried

    retried = run_cli("runs", "retry", "q", "--dir", str(runs_dir)).stdout
    assert "q: QUEUED (attempt 2" in retried
    follow = next(ln for ln in retried.splitlines() if "runwatch runs wait" in ln)
    assert shlex.split(follow.split(": ", 1)[1])[1:4] == ["runs", "wait", "q"]
    requeued = detail(runs_dir, "q")
    assert requeued["state"]["phase"] == "QUEUED" and requeued["job"]["attempt"] == 2
    queued = cli_here("runs", "get", "q", "--dir", str(runs_dir)).stdout
    assert "attempt 2 of at most 3" in queued
    assert "Spend:" in queued and "(estimate: the run has not ended)" in queued
    twice = cli_here("runs", "retry", "q", "--dir", str(runs_dir), check=False)
    assert twice.returncode == 2
    assert "only an ended run can be retried and this one is QUEUED" in twice.stderr


def test_cancel_and_retry_of_a_run_started_by_hand(runs_dir: Path) -> None:
    with runwatch.init(name="byhand", dir=runs_dir) as run:
        run.log({"loss": 1.0}, step=0)
    retry = cli_here("runs", "retry", "byhand", "--dir", str(runs_dir), check=False)
    assert retry.returncode == 2 and "started by hand" in retry.stderr
    assert "runwatch submit" in retry.stderr
    cancel = cli_here("runs", "cancel", "byhand", "--dir", str(runs_dir), check=False)
    assert cancel.returncode == 2 and "already ended (SUCCEEDED)" in cancel.stderr


def test_a_run_started_by_hand_is_told_what_it_can_do_not_to_retry(runs_dir: Path) -> None:
    """Trial 35, D3: a cancelled run started by hand was told "Retry the run to start it
    again", which `runs retry` (and the web app, which offers no Retry) then refused."""
    with pytest.raises(KeyboardInterrupt), runwatch.init(name="stopped", dir=runs_dir) as run:
        run.log({"loss": 1.0}, step=0)
        raise KeyboardInterrupt  # Ctrl-C: the SDK records it CANCELLED
    ended = detail(runs_dir, "stopped")
    assert ended["job"] is None and ended["actions"]["retry"] is False
    assert ended["failure"]["code"] == "cancelled"
    advice = ended["failure"]["what_to_do"]
    assert "Retry" not in advice and "run its command again" in advice
    assert "runwatch submit" in advice and advice == CATALOGUE["cancelled"].by_hand
    table = " ".join(cli_here("runs", "get", "stopped", "--dir", str(runs_dir)).stdout.split())
    assert f"What to do: {advice}" in table
    waited = " ".join(cli_here("runs", "wait", "stopped", "--dir", str(runs_dir),
                               check=False).stdout.split())
    assert f"what to do: {advice}" in waited
    assert cli_here("runs", "retry", "stopped", "--dir", str(runs_dir),
                    check=False).returncode == 2


def test_wait_on_a_cancelled_job_ends_with_its_reason_and_code(runs_dir: Path) -> None:
    submit(runs_dir, "--name", "c", "--", "python", "-c", "pass")
    cli_here("runs", "cancel", "c", "--dir", str(runs_dir))
    # in process: --timeout bounds a hang, as run_cli's deadline does
    proc = cli_here("runs", "wait", "c", "--dir", str(runs_dir), "--exit-status", "-o", "json",
                    "--timeout", str(CLI_DEADLINE_S), check=False)
    assert proc.returncode == 3, proc.stderr
    end, record = (json.loads(ln) for ln in proc.stdout.splitlines())
    assert (end["phase"], end["code"], end["reason"]) == \
        ("CANCELLED", "cancelled_before_start", "the training job was cancelled before it started")
    assert record["state"]["phase"] == "CANCELLED" and record["name"] == "c"


def _worker(runs: Path, wid: str, started_at: float, profile: str = "big",
            stopped: bool = False) -> None:
    """Register worker `wid` in the folder's index; it claims a job, or has stopped."""
    engine = open_engine(default_db(runs))
    try:
        with engine.begin() as conn:
            store_jobs.register_worker(conn, store_jobs.WorkerRow(
                wid, "host-a", 4242, 4, profile, started_at))
            store_jobs.heartbeat(conn, wid, time.time())
            if stopped:
                store_jobs.stop_worker(conn, wid, time.time())
            else:
                assert store_jobs.claim(conn, wid, 4, time.time()) is not None
    finally:
        engine.dispose()


def test_resources_lists_the_workers_and_drains_one(runs_dir: Path) -> None:
    (runs_dir / ".runwatch").mkdir(exist_ok=True)
    (runs_dir / ".runwatch" / "profiles.yaml").write_text(PROFILES)
    submit(runs_dir, "--name", "held", "--devices", "3", "--device-profile", "big",
           "--", "python", "-c", "pass")
    submit(runs_dir, "--name", "waits", "--", "python", "-c", "pass")
    _worker(runs_dir, "w-one", time.time() - 1800)
    _worker(runs_dir, "w-past", time.time(), stopped=True)
    view = json.loads(cli_here("resources", str(runs_dir), "-o", "json").stdout)
    assert view["queue_depth"] == 1
    past, w = view["workers"]  # newest first
    assert (past["id"], past["status"], past["jobs"]) == ("w-past", "stopped", [])
    assert (w["id"], w["host"], w["status"], w["devices"], w["devices_used"],
            w["device_profile"], w["hourly_rate"], w["draining"]) == \
        ("w-one", "host-a", "active", 4, 3, "big", 2.0, False)
    assert [j["name"] for j in w["jobs"]] == ["held"]
    assert w["spend"] == pytest.approx(4 * 2.0 * 0.5, abs=0.05), "4 devices, 2.0/h, 30 min"
    table = run_cli("resources", str(runs_dir)).stdout
    assert "w-one" in table and "3/4" in table and "held" in table
    # at 80 columns (not a terminal) columns are left out rather than ids and headers cut
    assert "WORKER" in table and "w-past" in table and "-o wide adds SEEN" in table
    assert table.index("w-one") < table.index("w-past"), "the past workers below the active"
    assert "1 job(s) wait in the queue" in table
    ids = cli_here("resources", str(runs_dir), "--jq", ".workers[].id", "-r").stdout
    assert ids.split() == ["w-past", "w-one"], "-r writes the strings raw, one per line"

    drained = json.loads(cli_here("resources", str(runs_dir), "--drain", "w-o",
                                 "-o", "json").stdout)
    assert drained["worker"]["draining"] is True and drained["worker"]["status"] == "draining"
    engine = open_engine(default_db(runs_dir))
    try:
        with engine.connect() as conn:
            assert store_jobs.draining(conn, "w-one")
            store_jobs.stop_worker(conn, "w-one", time.time())
            conn.commit()
    finally:
        engine.dispose()
    stopped = cli_here("resources", str(runs_dir), "--drain", "w-one", check=False)
    assert stopped.returncode == 2 and "has already stopped" in stopped.stderr
    unknown = cli_here("resources", str(runs_dir), "--drain", "nope", check=False)
    assert unknown.returncode == 2 and "no worker has the id 'nope'" in unknown.stderr
    assert "w-one" in unknown.stderr


def test_resources_says_what_a_lost_ray_workers_job_waits_for(runs_dir: Path) -> None:
    """No live worker can ask Ray whether it still runs (a local one cannot reap it)."""
    submit(runs_dir, "--name", "orphan", "--", "python", "-c", "pass")
    engine = open_engine(default_db(runs_dir))
    try:
        with engine.begin() as conn:
            store_jobs.register_worker(conn, store_jobs.WorkerRow(
                "w-ray", "host-a", 4242, 1, "cpu", time.time() - 600, executor="ray"))
            assert store_jobs.claim(conn, "w-ray", 1, time.time()) is not None
            store_jobs.heartbeat(conn, "w-ray", time.time() - 300)
            store_jobs.register_worker(conn, store_jobs.WorkerRow(
                "w-local", "host-a", 4343, 1, "cpu", time.time()))
    finally:
        engine.dispose()
    table = cli_here("resources", str(runs_dir)).stdout
    assert "orphan: its Ray worker no longer heartbeats" in table
    assert "it waits for a Ray worker (runwatch worker --executor ray" in " ".join(table.split())
    view = json.loads(cli_here("resources", str(runs_dir), "-o", "json").stdout)
    assert [(w["id"], w["executor"]) for w in view["workers"]] == [
        ("w-local", "local"), ("w-ray", "ray")]


def test_cancel_a_claimed_job_asks_its_worker_and_wait_shows_it(runs_dir: Path) -> None:
    submit(runs_dir, "--name", "claimed", "--", "python", "-c", "pass")
    _worker(runs_dir, "w-two", time.time(), profile="cpu")  # claims it, starts nothing
    out = run_cli("runs", "cancel", "claimed", "--dir", str(runs_dir)).stdout
    # no process of it runs yet: none is told to stop (trial35, defect 4)
    assert "claimed: CANCEL_REQUESTED (its worker has not started it and will not" in out
    proc = run_cli("runs", "wait", "claimed", "--dir", str(runs_dir), "-o", "json",
                   "--timeout", "0.5", "--interval", "0.2", check=False)
    assert proc.returncode == 124 and "still CANCEL_REQUESTED" in proc.stderr
    shown = [json.loads(ln) for ln in proc.stdout.splitlines()]
    assert [e["phase"] for e in shown] == ["QUEUED", "CANCEL_REQUESTED"], \
        "the index's phase once, after the last event, and stdout only JSON lines"


def test_wait_follows_a_job_and_says_each_thing_once(runs_dir: Path) -> None:
    submit(runs_dir, "--name", "f", "--", "python", "-c", "pass")
    waiting = subprocess.Popen(
        [sys.executable, "-m", "runwatch", "runs", "wait", "f", "--dir", str(runs_dir),
         "--exit-status", "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "QUEUED" in first_line(waiting, what="`runs wait` to print the queued phase")
        failed = CATALOGUE["failed"]
        # what a worker and then the job's SDK write: PREPARING twice, progress, the end
        append_events(runs_dir / "f", [
            {"ts": time.time(), "phase": "PREPARING", "attempt": 1, "worker": "w"},
            {"ts": time.time(), "phase": "PREPARING"},
            {"ts": time.time(), "phase": "PREPARING", "stage": "tokenizing", "done": 1,
             "total": 2},
            {"ts": time.time(), "phase": "FAILED", "reason": failed.sentence, "code": failed.id}])
        out, err = waiting.communicate(timeout=CLI_DEADLINE_S)
    finally:
        waiting.kill()
        waiting.wait(timeout=CLI_DEADLINE_S)
    assert waiting.returncode == 1, err
    said = [ln.split("  ", 1)[1] for ln in out.splitlines() if ln[:1].isdigit()]
    assert said == ["PREPARING", "PREPARING  tokenizing 1/2",
                    f"FAILED  {failed.sentence} [failed]"]
    assert f"what to do: {failed.what_to_do}" in out


def test_resources_shows_a_small_spend_as_it_is(runs_dir: Path) -> None:
    # a worker up for 2 s of 4 devices at 2.0 per device-hour spent about 0.0044: the
    # table rounded it to 0, where `runs get` shows such a figure
    (runs_dir / ".runwatch").mkdir(exist_ok=True)
    (runs_dir / ".runwatch" / "profiles.yaml").write_text(PROFILES)
    _worker(runs_dir, "w-brief", time.time() - 2, stopped=True)
    (worker,) = json.loads(cli_here("resources", str(runs_dir), "-o", "json").stdout)[
        "workers"]
    assert 0.004 < worker["spend"] < 0.01
    table = run_cli("resources", str(runs_dir), "-o", "wide").stdout
    assert f"{worker['spend']:.4g}" in table, table


def test_an_empty_filtered_list_says_what_it_filtered(runs_dir: Path) -> None:
    runs_dir.mkdir(exist_ok=True)
    assert "no runs in" in cli_here("runs", "list", "--dir", str(runs_dir)).stdout
    said = cli_here("runs", "list", "--dir", str(runs_dir), "--status", "running",
                    "--search", "x").stdout
    assert f"no runs in {runs_dir} match --search x --status RUNNING" in " ".join(said.split())
