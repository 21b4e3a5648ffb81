"""RunwatchCallback and what the Trainer logs before `train()`: a baseline
`trainer.evaluate()` starts the run that training then continues (it logged into the
callback's do-nothing NullRun and was lost without a word)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it

from transformers import Trainer, TrainingArguments

from runwatch.compat.hf import RunwatchCallback
from runwatch.sdk import Run
from tests.compat.test_hf import read, tiny_model, tiny_rows


def _args(out: Path, steps: int) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(out), max_steps=steps, per_device_train_batch_size=4,
        learning_rate=1e-3, logging_steps=1, save_steps=2, eval_strategy="steps",
        eval_steps=2, per_device_eval_batch_size=8, report_to="none", use_cpu=True,
        disable_tqdm=True, seed=3)


def _trainer(out: Path, steps: int, callback: RunwatchCallback) -> Trainer:
    return Trainer(model=tiny_model(), args=_args(out, steps), train_dataset=tiny_rows(),
                   eval_dataset=tiny_rows(8), callbacks=[callback])


def _eval_losses(runs: Path, name: str) -> dict[int, float]:
    steps = read(runs, "metrics", name)["steps"]
    return {s["step"]: s["measured"]["eval_loss"] for s in steps
            if "eval_loss" in s["measured"]}


def _phases(runs: Path, name: str) -> list[str]:
    return [json.loads(line)["phase"]
            for line in (runs / name / "events.jsonl").read_text().splitlines()]


def test_a_baseline_evaluation_starts_the_run_that_training_continues(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    callback = RunwatchCallback(dir=runs)
    trainer = _trainer(tmp_path / "out", 2, callback)
    baseline = trainer.evaluate()["eval_loss"]
    assert isinstance(callback.run, Run) and callback.run.status == "SUCCEEDED"
    name = callback.run.name
    trainer.train()

    assert callback.run.name == name  # one run, not a second one for the training
    assert [p.name for p in runs.iterdir()] == [name]
    got = read(runs, "get", name)
    assert got["run"]["status"] == "SUCCEEDED"
    assert got["run"]["trainer"] == "transformers Trainer"
    assert got["settings"]["config"]["max_steps"] == 2
    losses = _eval_losses(runs, name)
    assert sorted(losses) == [0, 2]  # at the trainer's step before training, then step 2
    assert losses[0] == pytest.approx(baseline)
    assert [s["step"] for s in read(runs, "metrics", name)["steps"]] == [0, 1, 2]
    assert [c["step"] for c in got["checkpoints"]] == [2]
    assert _phases(runs, name) == ["RUNNING", "SUCCEEDED", "RUNNING", "SUCCEEDED"]


def test_a_trainer_that_only_evaluates_records_a_succeeded_run(tmp_path: Path) -> None:
    """No train(), so no train end: each evaluation ends the run again, SUCCEEDED."""
    runs = tmp_path / "runs"
    trainer = _trainer(tmp_path / "out", 2, RunwatchCallback(name="eval-only", dir=runs))
    first = trainer.evaluate()["eval_loss"]
    second = trainer.evaluate(metric_key_prefix="test")["test_loss"]

    got = read(runs, "get", "eval-only")
    assert got["run"]["status"] == "SUCCEEDED"
    measured = read(runs, "metrics", "eval-only")["steps"]
    assert [s["step"] for s in measured] == [0]
    assert measured[0]["measured"]["eval_loss"] == pytest.approx(first)
    assert measured[0]["measured"]["test_loss"] == pytest.approx(second)


def test_an_evaluation_before_a_resumed_training_warns_and_the_run_goes_on(
        tmp_path: Path) -> None:
    """A named run that exists already is the one train() resumes from its checkpoint; an
    evaluation before that is of the model before the checkpoint is loaded (step 0): it
    is not put in the run, and a warning says so."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    _trainer(out, 2, RunwatchCallback(name="resumed", dir=runs)).train()
    callback = RunwatchCallback(name="resumed", dir=runs)
    trainer = _trainer(out, 4, callback)
    with pytest.warns(RuntimeWarning, match="logged before train.. is not recorded"):
        trainer.evaluate()
    trainer.train(resume_from_checkpoint=True)

    assert read(runs, "get", "resumed")["run"]["status"] == "SUCCEEDED"
    assert sorted(_eval_losses(runs, "resumed")) == [2, 4]
    assert [s["step"] for s in read(runs, "metrics", "resumed")["steps"]] == [1, 2, 3, 4]


def test_other_ranks_record_nothing_before_training_either(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    callback = RunwatchCallback(name="rank1", dir=runs)
    trainer = _trainer(tmp_path / "out", 2, callback)
    state: Any = trainer.state
    state.is_world_process_zero = False
    trainer.evaluate()
    assert not runs.exists()
