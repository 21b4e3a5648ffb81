"""RunwatchCallback under TRL's trainers (installed with `pip install trl`): a tiny
randomly initialised model and a character tokenizer built in the test, no downloads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")
pytest.importorskip("datasets")

from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from trl import DPOConfig, DPOTrainer, GRPOConfig, GRPOTrainer, SFTConfig, SFTTrainer

from runwatch.compat.hf import RunwatchCallback
from tests.compat.test_hf import tiny_model
from tests.support import cli_here


def char_tokenizer() -> PreTrainedTokenizerFast:
    """One token a lower-case letter, plus end and padding: 28 ids, inside the model's 64."""
    vocab = {"<eos>": 0, "<pad>": 1, **{chr(97 + i): i + 2 for i in range(26)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>")


def args_of(config: type[Any], out: Path, steps: int, **extra: Any) -> Any:
    return config(output_dir=str(out), max_steps=steps, logging_steps=1,
                  per_device_train_batch_size=4, save_strategy="no", report_to="none",
                  use_cpu=True, disable_tqdm=True, **extra)


def read(runs: Path, name: str) -> Any:
    return json.loads(cli_here("runs", "get", name, "--dir", str(runs), "-o", "json").stdout)


def test_sft_trainer_reports_with_one_line(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    data = Dataset.from_list([{"text": "abcdefgh"[i % 4:] + "xyz"} for i in range(16)])
    args = args_of(SFTConfig, tmp_path / "out", 3, max_length=16)
    SFTTrainer(model=tiny_model(), args=args, train_dataset=data,
               processing_class=char_tokenizer(),
               callbacks=[RunwatchCallback(name="sft", dir=runs)]).train()

    got = read(runs, "sft")
    assert got["run"]["status"] == "SUCCEEDED"
    assert (got["run"]["method"], got["run"]["trainer"]) == ("sft", "trl SFTTrainer")
    assert got["settings"]["config"]["max_length"] == 16
    # TRL's own SFT metrics, as logged.
    assert {"loss", "entropy", "mean_token_accuracy", "num_tokens"} <= set(got["metrics"])
    assert got["run"]["observed_step"] == 3


def test_dpo_trainer_metrics_read_as_preference_accuracy_and_margin(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    data = Dataset.from_list([{"prompt": "abc"[i % 3:], "chosen": "xyz", "rejected": "qrs"}
                              for i in range(16)])
    DPOTrainer(model=tiny_model(), ref_model=tiny_model(),
               args=args_of(DPOConfig, tmp_path / "out", 2, max_length=16),
               train_dataset=data, processing_class=char_tokenizer(),
               callbacks=[RunwatchCallback(name="dpo", dir=runs)]).train()

    got = read(runs, "dpo")
    assert got["run"]["status"] == "SUCCEEDED"
    assert (got["run"]["method"], got["run"]["trainer"]) == ("dpo", "trl DPOTrainer")
    assert {"rewards/accuracies", "rewards/margins"} <= set(got["metrics"])
    # TRL's names, found by the alias tables.
    assert got["scalars"]["preference_accuracy"] is not None
    assert got["scalars"]["margin"] is not None


def test_grpo_trainer_metrics_read_as_reward(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    data = Dataset.from_list([{"prompt": "abc"[i % 3:]} for i in range(8)])

    # TRL's reward functions may return None for a completion they do not score
    def length(completions: list[str], **_: Any) -> list[float | None]:
        return [float(len(c)) for c in completions]

    GRPOTrainer(model=tiny_model(), reward_funcs=length,
                args=args_of(GRPOConfig, tmp_path / "out", 1, num_generations=4,
                             max_completion_length=4),
                train_dataset=data, processing_class=char_tokenizer(),
                callbacks=[RunwatchCallback(name="grpo", dir=runs)]).train()

    got = read(runs, "grpo")
    assert got["run"]["status"] == "SUCCEEDED"
    assert (got["run"]["method"], got["run"]["trainer"]) == ("grpo", "trl GRPOTrainer")
    assert {"reward", "frac_reward_zero_std", "completions/mean_length"} <= set(got["metrics"])
    assert got["scalars"]["mean_reward"] is not None


def length(completions: list[str], **_: Any) -> list[float | None]:
    return [float(len(c)) for c in completions]


def vowels(completions: list[str], **_: Any) -> list[float | None]:
    return [float(sum(ch in "aeiou" for ch in c)) for c in completions]


def train_grpo(out: Path, runs: Path, name: str, steps: int, logging_steps: int = 1,
               **extra: Any) -> None:
    """GRPO with log_completions: two prompts of four completions a step, two rewards."""
    data = Dataset.from_list([{"prompt": "abc"[i % 3:]} for i in range(8)])
    args = GRPOConfig(output_dir=str(out), max_steps=steps, logging_steps=logging_steps,
                      per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=4, reward_weights=[1.0, 0.5],
                      log_completions=True, save_strategy="no", report_to="none",
                      use_cpu=True, disable_tqdm=True, **extra)
    GRPOTrainer(model=tiny_model(), reward_funcs=[length, vowels], args=args,
                train_dataset=data, eval_dataset=data, processing_class=char_tokenizer(),
                callbacks=[RunwatchCallback(name=name, dir=runs)]).train()


def rollouts(runs: Path, name: str, step: int, split: str = "train") -> Any:
    return json.loads(cli_here("runs", "rollouts", name, "--step", str(step), "--split", split,
                               "--limit", "100", "--dir", str(runs), "-o", "json").stdout)


def test_grpo_completions_logged_by_trl_are_the_runs_samples(tmp_path: Path) -> None:
    runs, out = tmp_path / "runs", tmp_path / "out"
    train_grpo(out, runs, "grpo-samples", 2, eval_strategy="steps", eval_steps=2,
               per_device_eval_batch_size=8)

    for step in (1, 2):
        got = rollouts(runs, "grpo-samples", step)
        samples = got["samples"]
        assert len(samples) == 8, got
        for s in samples:
            assert s["prompt"] in ("abc", "bc", "c")
            # the reward TRL trains on: the weighted sum of its reward functions' scores
            terms = {"length": len(s["completion"]),
                     "vowels": 0.5 * sum(ch in "aeiou" for ch in s["completion"])}
            assert s["reward"] == pytest.approx(sum(terms.values()))
            assert isinstance(s["advantage"], float)
        # each prompt's four completions are one group, in TRL's order
        assert sorted(s["group"] for s in samples) == [0, 0, 0, 0, 1, 1, 1, 1]
        assert len({s["prompt"] for s in samples if s["group"] == 0}) == 1
    # the evaluation at step 2 wrote its own completions over training's file: they are
    # that step's validation samples, and training's stay as they were
    assert len(rollouts(runs, "grpo-samples", 2, "val")["samples"]) == 8
    files = sorted(p.name for p in (runs / "grpo-samples").glob("*_completions.json"))
    assert files == ["step_0001_completions.json", "step_0002_completions.json",
                     "val_0002_completions.json"]
    sample = json.loads((runs / "grpo-samples" / files[0]).read_text())["samples"][0]
    assert set(sample["reward_terms"]) == {"length", "vowels"}


def test_completions_an_earlier_training_left_are_not_recorded(tmp_path: Path) -> None:
    runs, out = tmp_path / "runs", tmp_path / "out"
    train_grpo(out, runs, "first", 2)
    # the same output_dir, logging every second step: step 1's file is the first's
    train_grpo(out, runs, "second", 2, logging_steps=2)
    files = sorted(p.name for p in (runs / "second").glob("*_completions.json"))
    assert files == ["step_0002_completions.json"]
