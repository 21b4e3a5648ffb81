"""RunwatchCallback on a real (tiny, randomly initialised) transformers model trained by
the real Trainer for a few steps; the run is read back through the index (the CLI, run
in this process: the callback is tested here, tests/foundation run the commands)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, cast

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it

from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from runwatch.compat.hf import RunwatchCallback
from tests.support import cli_here

STEPS = 4


def tiny_model() -> GPT2LMHeadModel:
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config)


def tiny_rows(n: int = 32) -> list[dict[str, list[int]]]:
    """Language-model rows of 16 tokens: the labels are the inputs (the model shifts them)."""
    return [{"input_ids": ids, "labels": ids}
            for ids in ([(i * 7 + j) % 64 for j in range(16)] for i in range(n))]


def read(runs: Path, *args: str) -> Any:
    return json.loads(cli_here("runs", *args, "--dir", str(runs), "-o", "json").stdout)


def test_a_trainer_run_is_recorded_with_metrics_config_and_checkpoints(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=STEPS, per_device_train_batch_size=4,
        learning_rate=1e-3, logging_steps=1, save_steps=2, eval_strategy="steps",
        eval_steps=2, per_device_eval_batch_size=8, report_to="none", use_cpu=True,
        disable_tqdm=True, seed=3)
    callback = RunwatchCallback(project="hf-test", name="tiny", dir=runs, tags=["tiny"])
    Trainer(model=tiny_model(), args=args, train_dataset=tiny_rows(),
            eval_dataset=tiny_rows(8), callbacks=[callback]).train()

    got = read(runs, "get", "tiny")
    assert got["run"]["status"] == "SUCCEEDED"
    assert got["run"]["project"] == "hf-test" and got["run"]["tags"] == ["tiny"]
    assert got["run"]["trainer"] == "transformers Trainer"
    config = got["settings"]["config"]
    assert config["learning_rate"] == 1e-3 and config["seed"] == 3
    assert config["max_steps"] == STEPS and config["model"]["n_layer"] == 2
    assert [(c["step"], c["id"], c["kind"]) for c in got["checkpoints"]] == [
        (2, "checkpoint-2", "training"), (4, "checkpoint-4", "training")]
    assert all(Path(c["path"]).is_dir() for c in got["checkpoints"])
    # The end-of-training totals are the run's summary, not a series.
    summary = got["manifest"]["summary"]
    assert summary["train_runtime"] > 0 and summary["train_loss"] > 0
    assert "train_runtime" not in got["metrics"]

    steps = {s["step"]: s["measured"] for s in read(runs, "metrics", "tiny")["steps"]}
    assert sorted(steps) == list(range(1, STEPS + 1))
    assert all({"loss", "grad_norm", "learning_rate", "epoch"} <= set(steps[i]) for i in steps)
    assert [i for i in steps if "eval_loss" in steps[i]] == [2, 4]
    # Keys stay as logged, and the alias tables give them their roles: eval_loss is the
    # validation loss of the run's results.
    assert got["results"]["val_loss"] == pytest.approx(steps[4]["eval_loss"])
    assert got["results"]["train_loss"] == pytest.approx(steps[4]["loss"])


FAILING_SCRIPT = """
    import sys
    from transformers import Trainer, TrainerCallback, TrainingArguments
    from runwatch.compat.hf import RunwatchCallback
    from tests.compat.test_hf import tiny_model, tiny_rows

    class Boom(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 2:
                raise RuntimeError("the data loader lost its shard at step 2")

    args = TrainingArguments(output_dir=sys.argv[2], max_steps=5, logging_steps=1,
                             per_device_train_batch_size=4, report_to="none", use_cpu=True,
                             disable_tqdm=True)
    Trainer(model=tiny_model(), args=args, train_dataset=tiny_rows(),
            callbacks=[RunwatchCallback(name="boom", dir=sys.argv[1]), Boom()]).train()
"""


def test_training_that_raises_ends_the_run_failed_with_the_exception(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(FAILING_SCRIPT))
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, str(script), str(runs), str(tmp_path / "out")],
                          cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1 and "lost its shard" in proc.stderr

    got = read(runs, "get", "boom")
    assert got["run"]["status"] == "FAILED"
    # Step 2 raised in on_step_end, before the Trainer logged it.
    assert got["run"]["observed_step"] == 1
    logs = json.loads(cli_here("runs", "logs", "boom", "--dir", str(runs), "-o", "json").stdout)
    errors = [line for line in logs if line["level"].lower() == "error"]
    assert errors and "RuntimeError" in errors[-1]["message"]
    assert "lost its shard at step 2" in errors[-1]["message"]


def _args(out: Path, steps: int) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(out), max_steps=steps, per_device_train_batch_size=4, learning_rate=1e-3,
        logging_steps=1, save_steps=2, report_to="none", use_cpu=True, disable_tqdm=True,
        seed=3)


def test_train_resumed_from_a_checkpoint_continues_the_named_run(tmp_path: Path) -> None:
    """`trainer.train(resume_from_checkpoint=True)`, the usual way to resume, leaves the
    TrainingArguments' own field unset: the callback started a new run under the name
    that was taken, and the training crashed at its start ("already holds a run")."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    Trainer(model=tiny_model(), args=_args(out, 2), train_dataset=tiny_rows(),
            callbacks=[RunwatchCallback(name="resumed", dir=runs)]).train()
    Trainer(model=tiny_model(), args=_args(out, 4), train_dataset=tiny_rows(),
            callbacks=[RunwatchCallback(name="resumed", dir=runs)]).train(
                resume_from_checkpoint=True)
    got = read(runs, "get", "resumed")
    assert got["run"]["status"] == "SUCCEEDED"
    steps = [s["step"] for s in read(runs, "metrics", "resumed")["steps"]]
    assert steps == [1, 2, 3, 4]


def test_what_the_trainer_logs_after_training_is_recorded_too(tmp_path: Path) -> None:
    """`trainer.evaluate()` after `train()` (the usual closing evaluation): the run had
    ended at train end and the callback dropped the test loss without a word."""
    runs = tmp_path / "runs"
    trainer = Trainer(model=tiny_model(), args=_args(tmp_path / "out", 2),
                      train_dataset=tiny_rows(), callbacks=[RunwatchCallback(name="e", dir=runs)])
    trainer.train()
    # a list of rows, as the Trainer takes it (its type names only datasets)
    scores = trainer.evaluate(eval_dataset=cast(Any, tiny_rows(8)), metric_key_prefix="test")
    got = read(runs, "get", "e")
    assert got["run"]["status"] == "SUCCEEDED"
    steps = {s["step"]: s["measured"] for s in read(runs, "metrics", "e")["steps"]}
    assert steps[2]["test_loss"] == pytest.approx(scores["test_loss"])
    # the same callback on a training resumed from there records it as training again:
    # it had stayed in its after-the-end mode and ended the run after every log, and its
    # checkpoints were lost (found in review)
    callback = next(c for c in trainer.callback_handler.callbacks
                    if isinstance(c, RunwatchCallback))
    Trainer(model=tiny_model(), args=_args(tmp_path / "out", 4), train_dataset=tiny_rows(),
            callbacks=[callback]).train(resume_from_checkpoint=True)
    got = read(runs, "get", "e")
    assert [c["step"] for c in got["checkpoints"]] == [2, 4]
    phases = [json.loads(line)["phase"]
              for line in (runs / "e" / "events.jsonl").read_text().splitlines()]
    assert phases.count("SUCCEEDED") == 3 and phases[-1] == "SUCCEEDED", phases


def test_train_called_again_records_a_run_of_its_own(tmp_path: Path) -> None:
    """A notebook's second `trainer.train()` on the same Trainer, from step 0: the callback
    asked for the name its first run holds, and training stopped at its start ("already
    holds a run"). It records a run of its own, named after the first."""
    runs = tmp_path / "runs"
    trainer = Trainer(model=tiny_model(), args=_args(tmp_path / "out", 2),
                      train_dataset=tiny_rows(), callbacks=[RunwatchCallback(name="nb", dir=runs)])
    trainer.train()
    trainer.train()
    assert read(runs, "get", "nb")["run"]["status"] == "SUCCEEDED"
    assert read(runs, "get", "nb-2")["run"]["status"] == "SUCCEEDED"
    assert [s["step"] for s in read(runs, "metrics", "nb-2")["steps"]] == [1, 2]


class _Breaks(TrainerCallback):
    """Raises at step 1 of the first training only: the script catches it and trains again."""

    def __init__(self) -> None:
        self.raised = False

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self.raised:
            self.raised = True
            raise RuntimeError("the data loader broke")


def test_train_after_a_caught_exception_ends_the_first_run_and_records_anew(
        tmp_path: Path) -> None:
    """The first train() raised, the script caught it and trained again: the callback's
    run was still live, so the second train() failed with "already holds a run", and the
    first run then recorded that error instead of its own."""
    runs = tmp_path / "runs"
    trainer = Trainer(model=tiny_model(), args=_args(tmp_path / "out", 2),
                      train_dataset=tiny_rows(),
                      callbacks=[RunwatchCallback(name="caught", dir=runs), _Breaks()])
    with pytest.raises(RuntimeError, match="the data loader broke"):
        trainer.train()
    trainer.train()
    first = read(runs, "get", "caught")["run"]
    assert first["status"] == "FAILED" and "stopped before its end" in first["reason"]
    assert read(runs, "get", "caught-2")["run"]["status"] == "SUCCEEDED"
