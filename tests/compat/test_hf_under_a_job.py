"""RunwatchCallback in a runwatch job's process, run by a real `runwatch worker`: what the
Trainer logs outside `train()` goes into the job's run, which ends once, as training or the
process ends. A baseline `trainer.evaluate()` before `train()` ended the job's run
SUCCEEDED, and train() then took it back by its folder rather than as the job's (SUCCEEDED
mid-job, then RUNNING again); a closing one after `train()` took back the run training's
end had finished (SUCCEEDED, RUNNING, SUCCEEDED: the worker could read the job as done
mid-evaluation)."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it

from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line
from runwatch.store import open_engine
from runwatch.store.db import database_url
from tests.support.jobs import events, submit_command
from tests.support.wait import wait_for
from tests.support.workers import Workers, phases, workers

__all__ = ["workers"]  # the fixture

REPO = Path(__file__).resolve().parents[2]
# A job's whole life on a loaded two-core machine (torch and transformers imported).
END_DEADLINE_S = 180.0

SCRIPT = """
import sys
from transformers import Trainer, TrainingArguments
from runwatch.compat.hf import RunwatchCallback
from tests.compat.test_hf import tiny_model, tiny_rows

args = TrainingArguments(output_dir=sys.argv[2], max_steps=2, logging_steps=1,
                         per_device_train_batch_size=4, per_device_eval_batch_size=8,
                         save_steps=2, report_to="none", use_cpu=True, disable_tqdm=True)
callback = RunwatchCallback()
trainer = Trainer(model=tiny_model(), args=args, train_dataset=tiny_rows(),
                  eval_dataset=tiny_rows(8), callbacks=[callback])
mode = sys.argv[1]
if mode.startswith("after"):  # train, then a closing evaluation
    trainer.train()
    assert callback.run.is_jobs_run and not callback.run.finished  # held for what follows
    trainer.evaluate()
    if mode == "after-raise":
        raise RuntimeError("the test set upload failed after the evaluation")
    sys.exit(0)
trainer.evaluate()
if mode == "raise":
    raise RuntimeError("the tokenizer download failed before training")
if mode == "train":
    trainer.train()
"""


def _records(run_dir: Path, name: str) -> list[dict[str, object]]:
    path = run_dir / name
    return [loads_line(line) for line in path.read_bytes().splitlines() if line.strip()]


def test_what_is_logged_outside_train_goes_into_the_jobs_run_which_ends_once(
        tmp_path: Path, workers: Workers) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    engine = open_engine(database_url(tmp_path / "index.db"))
    try:
        jobs = {mode: submit_command(engine, runs, f"hf-{mode}",
                                     [sys.executable, str(script), mode,
                                      str(tmp_path / f"out-{mode}")])
                for mode in ("train", "raise", "evaluate", "after", "after-raise")}
    finally:
        engine.dispose()
    workers.start(runs, database_url(tmp_path / "index.db"), devices=5,
                  env={"PYTHONPATH": str(REPO)})

    def ended(run_dir: Path) -> bool:
        return any(ev["phase"] in fmt.TERMINAL_PHASES for ev in events(run_dir))

    for job in jobs.values():
        wait_for(partial(ended, job.dir), what=f"{job.dir.name} to end",
                 deadline=END_DEADLINE_S)

    # evaluate, then train: one run, RUNNING from the evaluation to training's end
    trained = jobs["train"].dir
    assert phases(trained) == ["QUEUED", "PREPARING", "RUNNING", "SUCCEEDED"]
    assert [ev["phase"] for ev in events(trained)].count("SUCCEEDED") == 1
    metrics = _records(trained, fmt.METRICS)
    assert [m["step"] for m in metrics if "eval_loss" in m] == [0]  # the baseline
    assert {m["step"] for m in metrics if "loss" in m} == {1, 2}
    checkpoints = _records(trained, fmt.CHECKPOINTS)
    assert [c["step"] for c in checkpoints] == [2]
    assert sorted(p.name for p in runs.iterdir() if p.is_dir()) == sorted(
        job.dir.name for job in jobs.values())  # no run of its own beside the job's

    # evaluate, then raise before train(): the job's run ends FAILED, with the error
    raised = jobs["raise"].dir
    assert phases(raised) == ["QUEUED", "PREPARING", "RUNNING", "FAILED"]
    assert events(raised)[-1]["code"] == "failed"
    errors = [line for line in _records(raised, fmt.LOGS) if line["level"] == "error"]
    assert errors and "the tokenizer download failed" in str(errors[-1]["message"])

    # only evaluate: the job's run ends SUCCEEDED as the process exits (the SDK's exit
    # hook would read it as a process that never called finish(): FAILED)
    evaluated = jobs["evaluate"].dir
    assert phases(evaluated) == ["QUEUED", "PREPARING", "RUNNING", "SUCCEEDED"]
    assert [m["step"] for m in _records(evaluated, fmt.METRICS) if "eval_loss" in m] == [0]

    # train, then evaluate: one run, RUNNING until the process exits, SUCCEEDED once
    done = jobs["after"].dir
    assert phases(done) == ["QUEUED", "PREPARING", "RUNNING", "SUCCEEDED"]
    metrics = _records(done, fmt.METRICS)
    assert {m["step"] for m in metrics if "loss" in m} == {1, 2}
    assert [m["step"] for m in metrics if "eval_loss" in m] == [2]  # the closing one

    # an exception after the closing evaluation ends the job's run FAILED, with the error
    raised = jobs["after-raise"].dir
    assert phases(raised) == ["QUEUED", "PREPARING", "RUNNING", "FAILED"]
    assert events(raised)[-1]["code"] == "failed"
    assert [m["step"] for m in _records(raised, fmt.METRICS) if "eval_loss" in m] == [2]
    errors = [line for line in _records(raised, fmt.LOGS) if line["level"] == "error"]
    assert errors and "the test set upload failed" in str(errors[-1]["message"])
