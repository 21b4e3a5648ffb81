"""Resuming a job's run from its checkpoint (`runwatch runs retry RUN --resume`) with real
workers: the next attempt goes on from the saved step, the run keeps its metrics and
checkpoints up to that step, what came after it stays in attempts/<n>/, and the resumed
attempt's device time adds to the run's cost.

Found in session 37 (defect 6.1): the failure advice said a stopped run could be resumed
from its checkpoint, but a job's run could only be retried from step 0 (its checkpoints
moved out to attempts/1/), `submit … resume=true` was refused, and only a recipe run by
hand outside the queue resumed it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from runwatch.jobs.failures import CATALOGUE
from runwatch.jobs.spec import recipe_argv, recipe_spec
from runwatch.jobs.submit import submit
from runwatch.rundir import format as fmt
from tests.support import TINY_MODEL
from tests.support.cli import cli_here
from tests.support.jobs import events, run_row, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, workers

__all__ = ["workers"]  # the fixture

# A command that trains five steps from where it is told to resume (the environment a
# worker gives a resumed attempt: docs/sdk.md), saves a training checkpoint at its third,
# then fails: its loss says which attempt logged each step.
RESUMABLE = f"""
import os, runwatch
start = int(os.environ.get("RUNWATCH_RESUME_STEP", "0"))
attempt = int(os.environ["{fmt.ENV_ATTEMPT}"])
with runwatch.init() as run:
    run.log_text(f"resumes after step {{start}} from "
                 f"{{os.environ.get('RUNWATCH_RESUME_CHECKPOINT')}}")
    for step in range(start + 1, start + 6):
        run.log({{"loss": attempt * 100 + step}}, step=step)
        if step == start + 3:
            path = os.path.join("checkpoints", f"step-{{step}}.txt")
            os.makedirs(os.path.join(run.dir, "checkpoints"), exist_ok=True)
            with open(os.path.join(run.dir, path), "w") as f:
                f.write(str(step))
            run.log_checkpoint(step, "training", f"c{{step}}", path=path)
    raise SystemExit(3)
"""
# The tiny SFT recipe, training until it is cancelled, a checkpoint every 5 steps.
SFT = [*TINY_MODEL, "batch_size=8", "n_train=64", "n_val=8", "max_steps=1000000",
       "val_interval=1000000", "checkpoint_interval=5", "export_samples=false",
       "wandb_project=None"]


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def detail(runs: Path, db: str, name: str) -> dict[str, Any]:
    return json.loads(cli_here("runs", "get", name, "--dir", str(runs), "--db", db,
                               "-o", "json").stdout)


def ended(engine: Engine, name: str, attempt: int) -> Any:
    return wait_for(lambda: (r := run_row(engine, name)).attempt == attempt
                    and r.status in fmt.TERMINAL_PHASES and r, what=f"attempt {attempt} to end")


def test_a_command_job_resumes_from_its_checkpoint_with_its_record_up_to_it(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers) -> None:
    run = submit_command(engine, runs_dir, "cmd", [sys.executable, "-c", RESUMABLE])
    where = ("--dir", str(runs_dir), "--db", db_url)
    first = workers.start(runs_dir, db_url)
    assert ended(engine, "cmd", 1).reason_code == "failed"
    workers.stop(first)

    said = cli_here("runs", "retry", "cmd", "--resume", *where).stdout
    assert "attempt 2, resuming from step 3" in said, said
    # while it waits its record is out of view, and it is QUEUED, which a worker claims
    row = run_row(engine, "cmd")
    assert (row.status, row.observed_step, row.saved_step) == ("QUEUED", None, None)
    # cancelled before it started, then resumed again: from what attempt 1 recorded
    assert "CANCELLED" in cli_here("runs", "cancel", "cmd", *where).stdout
    cli_here("runs", "retry", "cmd", "--resume", *where)
    assert events(run.dir)[-1]["resume"] == {"attempt": 1, "step": 3,
                                             "checkpoint": "checkpoints/step-3.txt"}

    workers.start(runs_dir, db_url)
    row = ended(engine, "cmd", 3)
    # it went on from step 3: attempt 1's steps up to it, attempt 3's after it, nothing of
    # what attempt 1 did after step 3; that stays whole in attempts/1/
    assert [(m["step"], m["loss"]) for m in records(run.dir / fmt.METRICS)] == [
        (1, 101), (2, 102), (3, 103), (4, 304), (5, 305), (6, 306), (7, 307), (8, 308)]
    assert [m["loss"] for m in records(fmt.attempt_dir(run.dir, 1) / fmt.METRICS)] == [
        101, 102, 103, 104, 105]
    assert [c["step"] for c in records(run.dir / fmt.CHECKPOINTS)] == [3, 6]
    said_by_it = [r["message"] for r in records(run.dir / fmt.LOGS)]
    assert (f"resumes after step 3 from {run.dir / 'checkpoints' / 'step-3.txt'}"
            in said_by_it), said_by_it
    assert "resumes after step 0 from None" in said_by_it  # attempt 1 was told nothing
    assert (row.observed_step, row.saved_step) == (8, 6)
    points = json.loads(cli_here("runs", "metrics", "cmd", *where, "-o", "json").stdout)
    assert [(p["step"], p["measured"]["loss"]) for p in points["steps"]] == [
        (1, 101), (2, 102), (3, 103), (4, 304), (5, 305), (6, 306), (7, 307), (8, 308)]
    # every attempt's device time is the run's, the resumed one's too
    shown = detail(runs_dir, db_url, "cmd")
    spent = [a["device_seconds"] for a in shown["attempts"]]
    assert len(spent) == 3 and spent[0] > 0 and spent[2] > 0 and spent[1] == 0
    assert abs(shown["cost"]["device_seconds"] - sum(spent)) < 0.01


# What the recipe does with the resume a worker gives it plays no part of the index's: the
# command job above resumes on both stores.
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_recipe_job_resumes_from_its_last_training_checkpoint(
        engine: Engine, db_url: str, runs_dir: Path, tmp_path: Path,
        workers: Workers) -> None:
    run = submit(engine, runs_dir, recipe_spec(
        "sft", [*SFT, f"cache_dir={tmp_path / 'cache'}"], cwd=tmp_path), "sft")
    where = ("--dir", str(runs_dir), "--db", db_url)
    workers.start(runs_dir, db_url)
    # past a training checkpoint, and a step past it (a cancel right at the checkpoint's
    # step, on a loaded machine, left nothing to train again)
    wait_for(lambda: (run_row(engine, "sft").saved_step or 0) >= 5
             and (run_row(engine, "sft").observed_step or 0)
             > (run_row(engine, "sft").saved_step or 0),
             what="the recipe to train past a training checkpoint", deadline=180)
    cli_here("runs", "cancel", "sft", *where)
    row = ended(engine, "sft", 1)
    assert row.reason_code == "cancelled"
    assert "runwatch runs retry RUN --resume" in CATALOGUE["cancelled"].what_to_do
    saved = int(row.saved_step)
    # it trained up to its checkpoint at least (past it, unless the cancel came at a
    # checkpoint's step)
    assert row.observed_step >= saved

    cli_here("runs", "retry", "sft", "--resume", *where)
    wait_for(lambda: (run_row(engine, "sft").observed_step or 0) > saved + 5,
             what="the resumed attempt to train on", deadline=180)
    cli_here("runs", "cancel", "sft", *where)
    ended(engine, "sft", 2)
    output = (fmt.attempt_dir(run.dir, 2) / fmt.OUTPUT_LOG).read_text()
    assert f"resumed from step {saved} (" in output, output[-2000:]
    steps = [m["step"] for m in records(run.dir / fmt.METRICS)]
    # its steps up to the checkpoint, then the resumed attempt's from the next one
    assert steps[:saved] == list(range(1, saved + 1)), steps[:saved + 3]
    assert steps[saved] == saved + 1 and steps == sorted(steps), steps[saved - 2:saved + 3]


def test_a_run_that_holds_no_checkpoint_is_refused_a_resume_with_what_to_do(
        engine: Engine, db_url: str, runs_dir: Path) -> None:
    submit_command(engine, runs_dir, "bare", "pass")
    where = ("--dir", str(runs_dir), "--db", db_url)
    cli_here("runs", "cancel", "bare", *where)  # QUEUED: it ends CANCELLED at once
    res = cli_here("runs", "retry", "bare", "--resume", *where, check=False)
    assert res.returncode == 2
    said = " ".join(res.stderr.split())
    assert "holds no training checkpoint to resume from: retry it without resuming" in said
    assert run_row(engine, "bare").status == "CANCELLED"  # nothing was started
    cli_here("runs", "retry", "bare", *where)  # a plain retry is what it can do
    assert run_row(engine, "bare").status == "QUEUED"


def test_submit_names_the_resume_and_grpo_says_it_cannot(runs_dir: Path) -> None:
    from runwatch.jobs.settings import resume_refusal

    res = cli_here("submit", "--dir", str(runs_dir), "recipes", "sft", "resume=true",
                   check=False)
    assert res.returncode == 2
    assert (f"runwatch runs retry RUN --resume --dir {runs_dir}"
            in " ".join(res.stderr.split())), res.stderr
    assert resume_refusal("sft", recipe_argv("sft", ["max_steps=10"]), "r") is None
    grpo = resume_refusal("grpo", recipe_argv("grpo", ["init_from=/x"]), "r")
    assert grpo is not None and "resume is not supported by GRPO" in grpo
