"""RunwatchCallback names its run by `TrainingArguments.run_name` when the user set one and
the callback has no `name` (it took a generated name, and a training resumed from a
checkpoint recorded a new run instead of continuing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it

from transformers import Trainer, TrainingArguments

from runwatch.compat.hf import RunwatchCallback, user_run_name
from runwatch.rundir.format import RunDirError
from tests.compat.test_hf import read, tiny_model, tiny_rows


def _args(out: Path, steps: int, **extra: Any) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(out), max_steps=steps, per_device_train_batch_size=4,
        learning_rate=1e-3, logging_steps=1, save_steps=2, report_to="none", use_cpu=True,
        disable_tqdm=True, seed=3, **extra)


def _train(args: TrainingArguments, callback: RunwatchCallback, resume: bool = False) -> None:
    Trainer(model=tiny_model(), args=args, train_dataset=tiny_rows(),
            callbacks=[callback]).train(resume_from_checkpoint=resume or None)


def test_the_run_name_names_the_run_and_a_resumed_training_continues_it(
        tmp_path: Path) -> None:
    runs, out = tmp_path / "runs", tmp_path / "out"
    first = RunwatchCallback(dir=runs)
    _train(_args(out, 2, run_name="my-sft-run"), first)
    assert first.run.name == "my-sft-run"
    _train(_args(out, 4, run_name="my-sft-run"), RunwatchCallback(dir=runs), resume=True)

    assert [p.name for p in runs.iterdir()] == ["my-sft-run"]
    assert read(runs, "get", "my-sft-run")["run"]["status"] == "SUCCEEDED"
    assert [s["step"] for s in read(runs, "metrics", "my-sft-run")["steps"]] == [1, 2, 3, 4]


def test_the_callbacks_own_name_wins_over_the_run_name(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    callback = RunwatchCallback(name="mine", dir=runs)
    _train(_args(tmp_path / "out", 1, run_name="theirs"), callback)
    assert callback.run.name == "mine"
    assert [p.name for p in runs.iterdir()] == ["mine"]


def test_a_run_name_that_no_folder_can_hold_is_made_one() -> None:
    assert user_run_name(_args(Path("out"), 1, run_name="llama 3 / sft: lr=1e-5")) \
        == "llama-3-sft-lr-1e-5"
    assert user_run_name(_args(Path("out"), 1, run_name="/..")) is None


def test_a_run_name_the_user_did_not_choose_names_no_run(tmp_path: Path) -> None:
    """transformers 4 fills an unset run_name with output_dir (5 leaves it None): neither
    is a name the user chose, so the run gets a generated one."""
    out = tmp_path / "out"
    assert user_run_name(_args(out, 1)) is None
    assert user_run_name(_args(out, 1, run_name=str(out))) is None
    runs = tmp_path / "runs"
    callback = RunwatchCallback(dir=runs)
    _train(_args(out, 1, run_name=str(out)), callback)
    assert callback.run.name.startswith("run-") and callback.run.status == "SUCCEEDED"


def test_training_anew_under_a_taken_run_name_says_what_to_do(tmp_path: Path) -> None:
    runs, out = tmp_path / "runs", tmp_path / "out"
    _train(_args(out, 1, run_name="taken"), RunwatchCallback(dir=runs))
    with pytest.raises(RunDirError, match=r"resume_from_checkpoint=True.*another name"):
        _train(_args(out, 1, run_name="taken"), RunwatchCallback(dir=runs))
    assert read(runs, "get", "taken")["run"]["status"] == "SUCCEEDED"
