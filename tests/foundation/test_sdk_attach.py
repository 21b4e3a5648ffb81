"""Under a job (RUNWATCH_RUN_DIR and RUNWATCH_RUN_ID set by a worker) `runwatch.init()`
attaches to the job's run: the folder and run the job names, not the ones the call
names; what the process describes merged into the manifest; every file's seq continued;
a clear error when the environment names another run; later runs of the process its
own; and a recipe needs no change."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

import runwatch
from runwatch.jobs.failures import CATALOGUE
from runwatch.rundir import format as fmt
from runwatch.rundir.atomic import write_atomic
from runwatch.rundir.jsonl import dumps_line
from runwatch.rundir.manifest import build_manifest
from runwatch.sdk.lock import RunLock
from tests.support import TINY_MODEL


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def queued_job(runs_dir: Path, name: str = "job-1") -> tuple[Path, str]:
    """A run folder as submit and a worker leave it before the job's process starts:
    the manifest, QUEUED and PREPARING events and one log line of the worker's."""
    run_dir = runs_dir / name
    run_dir.mkdir()
    manifest = build_manifest(name, "team", method="sft", host="submitter", pid=1)
    write_atomic(run_dir / fmt.MANIFEST, dumps_line(manifest))
    (run_dir / fmt.EVENTS).write_text(
        '{"ts": 1.0, "seq": 0, "phase": "QUEUED", "attempt": 1}\n'
        '{"ts": 2.0, "seq": 1, "phase": "PREPARING", "attempt": 1, "worker": "w1"}\n')
    (run_dir / fmt.LOGS).write_text('{"ts": 2.0, "seq": 0, "level": "info", "message": "w"}\n')
    return run_dir, manifest["run_id"]


@pytest.fixture
def job_env(runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    run_dir, run_id = queued_job(runs_dir)
    monkeypatch.setenv(fmt.ENV_RUN_DIR, str(run_dir))
    monkeypatch.setenv(fmt.ENV_RUN_ID, run_id)
    monkeypatch.setenv(fmt.ENV_ATTEMPT, "1")
    return run_dir, run_id


def test_init_attaches_to_the_job_s_run_whatever_it_names(job_env: tuple[Path, str],
                                                          tmp_path: Path) -> None:
    run_dir, run_id = job_env
    elsewhere = tmp_path / "elsewhere"
    with runwatch.init(project="mine", name="other", dir=elsewhere, resume=False,
                       config={"lr": 0.1}, base_model="tiny", dataset="addition",
                       tags=["a"], trainer="loop", phase="PREPARING") as run:
        assert (run.dir, run.id, run.name) == (run_dir, run_id, "job-1")
        run.log({"loss": 1.0}, step=0)
        run.log_text("hello")
    assert not elsewhere.exists()
    manifest = json.loads((run_dir / fmt.MANIFEST).read_text())
    assert manifest == {**manifest, "run_id": run_id, "name": "job-1", "project": "team",
                        "method": "sft", "base_model": "tiny", "dataset": "addition",
                        "tags": ["a"], "trainer": "loop", "pid": os.getpid()}
    assert manifest["host"] != "submitter" and "attached_at" in manifest
    assert yaml.safe_load((run_dir / fmt.CONFIG).read_text()) == {"lr": 0.1}
    events = lines(run_dir / fmt.EVENTS)
    assert [(e["seq"], e["phase"]) for e in events] == [
        (0, "QUEUED"), (1, "PREPARING"), (2, "PREPARING"), (3, "SUCCEEDED")]
    assert [e["seq"] for e in lines(run_dir / fmt.LOGS)] == [0, 1]


@pytest.mark.parametrize(("run_id", "words"), [
    ("0" * 32, "not the run '00000000000000000000000000000000' that RUNWATCH_RUN_ID names"),
    ("", "not the run '' that RUNWATCH_RUN_ID names"),
], ids=["another-run", "no-run-id"])
def test_attaching_to_another_run_is_refused_and_writes_nothing(
        job_env: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, run_id: str,
        words: str) -> None:
    run_dir, real_id = job_env
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    monkeypatch.setenv(fmt.ENV_RUN_ID, run_id)
    with pytest.raises(fmt.RunDirError, match="unset RUNWATCH_RUN_DIR") as refused:
        runwatch.init()
    assert words in str(refused.value) and real_id in str(refused.value)
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before
    monkeypatch.setenv(fmt.ENV_RUN_ID, real_id)
    runwatch.init().finish()  # the refusal let the folder's lock go


def test_a_folder_with_no_run_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fmt.ENV_RUN_DIR, str(tmp_path / "nothing"))
    monkeypatch.setenv(fmt.ENV_RUN_ID, "abc")
    with pytest.raises(fmt.RunDirError, match="holds no run: start the script with"):
        runwatch.init()
    assert not (tmp_path / "nothing").exists()


def test_attach_waits_for_job_control_to_let_the_folder_go(
        job_env: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir, _ = job_env
    held = RunLock(run_dir)  # job control appending to the folder
    timer = threading.Timer(0.2, held.release)
    timer.start()
    try:
        runwatch.init().finish()
    finally:
        timer.cancel()
        held.release()
    held = RunLock(run_dir)  # a live process records the run and does not let go
    # (the module, not the function runwatch.sdk exports under the same name)
    monkeypatch.setattr(importlib.import_module("runwatch.sdk.init"), "ATTACH_LOCK_WAIT_S", 0.1)
    try:
        with pytest.raises(fmt.RunDirError, match="is being recorded by a live process"):
            runwatch.init()
    finally:
        held.release()


def test_a_retried_job_s_attempt_continues_past_the_earlier_attempts_seqs(
        job_env: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir, _ = job_env
    # attempt 1 ran, failed and was moved aside; attempt 2 is queued and preparing
    earlier = run_dir / fmt.ATTEMPTS_DIR / "1"
    earlier.mkdir(parents=True)
    (earlier / fmt.METRICS).write_text("".join(
        f'{{"step": {i}, "ts": 1.0, "seq": {i}, "loss": 1.0}}\n' for i in range(5)))
    with (run_dir / fmt.EVENTS).open("a") as events:
        events.write('{"ts": 3.0, "seq": 2, "phase": "FAILED", "code": "failed"}\n'
                     '{"ts": 4.0, "seq": 3, "phase": "QUEUED", "attempt": 2}\n'
                     '{"ts": 5.0, "seq": 4, "phase": "PREPARING", "attempt": 2}\n')
    monkeypatch.setenv(fmt.ENV_ATTEMPT, "2")  # as the worker starts attempt 2's process
    with runwatch.init() as run:
        run.log({"loss": 0.5}, step=0)
    assert [m["seq"] for m in lines(run_dir / fmt.METRICS)] == [5]
    assert [e["seq"] for e in lines(run_dir / fmt.EVENTS)][-2:] == [5, 6]


def test_only_the_first_run_of_a_job_s_process_is_the_job_s(
        job_env: tuple[Path, str], tmp_path: Path) -> None:
    run_dir, run_id = job_env
    own = tmp_path / "own"
    with runwatch.init(name="train") as job_run:
        assert job_run.id == run_id
        # while it records the job's run, another run of the process is its own, at once
        with runwatch.init(name="side", dir=own) as side:
            assert side.dir == own / "side" and side.id != run_id
    with runwatch.init(name="eval", dir=own) as later:  # the job's run has ended
        assert later.dir == own / "eval"
    assert [e["phase"] for e in lines(run_dir / fmt.EVENTS)] == [
        "QUEUED", "PREPARING", "RUNNING", "SUCCEEDED"]


def test_secondary_ranks_of_a_job_record_nothing(job_env: tuple[Path, str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir, _ = job_env
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert isinstance(runwatch.init(), runwatch.NullRun)
    assert [e["phase"] for e in lines(run_dir / fmt.EVENTS)] == ["QUEUED", "PREPARING"]


def test_a_local_rank_of_minus_one_is_no_secondary_rank(runs_dir: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # -1 is the HF Trainer's local_rank when not distributed: it recorded nothing, silently
    monkeypatch.setenv("LOCAL_RANK", "-1")
    monkeypatch.setenv("RANK", "-1")
    with runwatch.init(name="single", dir=runs_dir) as run:
        assert not isinstance(run, runwatch.NullRun)
        run.log({"loss": 1.0}, step=0)
    assert (runs_dir / "single" / fmt.METRICS).exists()


def test_a_plain_script_under_a_job_records_into_the_job_s_run(runs_dir: Path,
                                                               tmp_path: Path) -> None:
    run_dir, run_id = queued_job(runs_dir)
    script = ("import runwatch\n"
              "with runwatch.init(name='mine', config={'steps': 2}) as run:\n"
              "    run.log({'loss': 0.5}, step=1)\n"
              "    raise KeyError('secret-key')\n")
    env = {**os.environ, fmt.ENV_RUN_DIR: str(run_dir), fmt.ENV_RUN_ID: run_id,
           fmt.ENV_ATTEMPT: "1"}
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    proc = subprocess.run([sys.executable, "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "KeyError" in proc.stderr
    assert list(cwd.iterdir()) == [], "nothing recorded where the script said"
    assert lines(run_dir / fmt.METRICS)[0]["loss"] == 0.5
    last = lines(run_dir / fmt.EVENTS)[-1]
    assert (last["phase"], last["code"], last["reason"]) == (
        "FAILED", "failed", CATALOGUE["failed"].sentence)
    error = lines(run_dir / fmt.LOGS)[-1]
    assert error["level"] == "error" and "secret-key" in error["data"]["message"]


def test_a_recipe_under_a_job_needs_no_change(job_env: tuple[Path, str], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from runwatch.recipes import sft

    run_dir, _ = job_env
    args = [*TINY_MODEL, "batch_size=4", "n_train=8", "n_val=4", "max_steps=1",
            "wandb_project=None", "torch_threads=1", f"runs_dir={tmp_path / 'mine'}",
            "name=mine", "resume=true", f"cache_dir={tmp_path / 'cache'}"]
    assert sft.main(args) == 0
    assert f"sft run job-1 recording to {run_dir}" in capsys.readouterr().out
    assert not (tmp_path / "mine").exists()
    phases = [e["phase"] for e in lines(run_dir / fmt.EVENTS)]
    assert phases[:3] == ["QUEUED", "PREPARING", "PREPARING"] and phases[-1] == "SUCCEEDED"
    assert "RUNNING" in phases and lines(run_dir / fmt.METRICS)


def test_a_recipe_s_refusal_under_a_job_records_code_refused(
        job_env: tuple[Path, str], tmp_path: Path) -> None:
    from runwatch.recipes import sft

    run_dir, _ = job_env
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"messages": [{"role": "user", "content": "1+1"}]}) + "\n")
    args = [*TINY_MODEL, "wandb_project=None", f"data_path={rows}",
            f"cache_dir={tmp_path / 'cache'}"]
    assert sft.main(args) == 1
    last = lines(run_dir / fmt.EVENTS)[-1]
    assert (last["phase"], last["code"]) == ("FAILED", "refused")
    assert last["reason"].startswith("row 1 ") and "assistant" in last["reason"]


def test_a_recipe_s_settings_that_do_not_parse_fail_the_job_s_run_as_a_refusal(
        job_env: tuple[Path, str], runs_dir: Path) -> None:
    from runwatch.recipes import sft

    run_dir, _ = job_env
    assert sft.main(["max_steps=0"]) == 2
    last = lines(run_dir / fmt.EVENTS)[-1]
    assert (last["phase"], last["code"]) == ("FAILED", "refused")
    assert last["reason"] == "max_steps must be positive, got 0"
    assert [p.name for p in runs_dir.iterdir()] == ["job-1"]
