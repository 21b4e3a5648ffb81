"""Every recipe setting's range is declared with it (`config.setting(..., above=0)`), and a
value outside it is refused before anything is made: by `runwatch recipes NAME`, by the
recipe's own `main`, by `runwatch submit recipes NAME` (exit 2 each, one `error:` line),
and by `runtime.run_recipe` for a config built in Python. --help and docs/recipes.md show
the ranges. A refusal only the data can show, once the run exists, fails the run as
`refused`, not as the generic `failed`.

Found in a trial (trial37, defect 1): `task=foo`, `n_train=0`, `learning_rate=-1`,
`learning_rate=nan` and `digits=0` made a run that crashed with a traceback; `submit`
queued them; `n_train=-3`, `n_val=-1`, `warmup_steps=-3` and `max_grad_norm=-1` ran."""

from __future__ import annotations

import dataclasses
import importlib
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runwatch.cli.main import app
from runwatch.cli.recipes import RECIPES
from runwatch.jobs.settings import SettingsError, check_recipe_settings
from runwatch.recipes import runtime, sft
from runwatch.recipes.config import DPOConfig, SFTConfig, TrainConfig
from runwatch.recipes.grpo.config import GRPOConfig
from runwatch.rundir.format import ENV_RUN_DIR

from .conftest import common, final_event, metrics

CONFIGS = [SFTConfig, DPOConfig, GRPOConfig]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "recipes.md"

OUT_OF_RANGE = [
    ("sft", "task=foo", "task must be one of addition, reverse, sort, got 'foo'"),
    ("sft", "n_train=0", "n_train must be positive, got 0"),
    ("sft", "n_train=-3", "n_train must be positive, got -3"),
    ("sft", "n_val=-1", "n_val must be 0 or more, got -1"),
    ("sft", "learning_rate=-1", "learning_rate must be positive, got -1.0"),
    ("sft", "learning_rate=nan", "learning_rate must be finite and positive, got nan"),
    ("sft", "learning_rate=inf", "learning_rate must be finite and positive, got inf"),
    ("sft", "digits=0", "digits must be at least 1, got 0"),
    ("sft", "warmup_steps=-3", "warmup_steps must be 0 or more, got -3"),
    ("sft", "max_grad_norm=-1", "max_grad_norm must be 0 or more, got -1.0"),
    ("sft", "weight_decay=-0.1", "weight_decay must be 0 or more, got -0.1"),
    ("sft", "lora_alpha=0", "lora_alpha must be positive, got 0.0"),
    ("dpo", "task=foo", "task must be one of addition, reverse, sort, got 'foo'"),
    ("dpo", "n_train=0", "n_train must be positive, got 0"),
    ("dpo", "learning_rate=nan", "learning_rate must be finite and positive, got nan"),
    ("dpo", "rpo_alpha=-1", "rpo_alpha must be 0 or more, got -1.0"),
    ("grpo", "task=foo", "task must be one of addition, reverse, sort, got 'foo'"),
    ("grpo", "learning_rate=-1", "learning_rate must be positive, got -1.0"),
    ("grpo", "warmup_steps=-3", "warmup_steps must be 0 or more, got -3"),
    ("grpo", "temperature=0", "temperature must be positive, got 0.0"),
    ("grpo", "group_size=1", "group_size must be at least 2, got 1"),
]


@pytest.mark.parametrize(("recipe", "item", "said"), OUT_OF_RANGE,
                         ids=[f"{r}-{i}" for r, i, _ in OUT_OF_RANGE])
def test_a_value_out_of_range_is_refused_before_anything_is_made(
        recipe: str, item: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(ENV_RUN_DIR, raising=False)
    monkeypatch.chdir(tmp_path)
    argv = [item, "max_steps=1", "from_scratch=true"] if recipe == "grpo" else [item]

    command = CliRunner().invoke(app, ["recipes", recipe, *argv])
    assert command.exit_code == 2, command.output
    assert command.stderr == f"error: {said}\n"

    code = importlib.import_module(RECIPES[recipe][1]).main(argv)
    assert code == 2 and capsys.readouterr().err == f"error: {said}\n"

    # runwatch submit's (and POST /api/jobs') check: the same sentence, naming the setting
    with pytest.raises(SettingsError) as refused:
        check_recipe_settings(recipe, argv, {}, "see --help")
    assert str(refused.value) == said
    assert refused.value.field == f"settings.{item.partition('=')[0]}"
    assert list(tmp_path.iterdir()) == [], "nothing made"


def test_more_rows_than_the_task_has_questions_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert sft.main(["digits=1"]) == 2
    assert capsys.readouterr().err == (
        "error: task addition with digits=1 has 100 distinct questions, fewer than "
        "n_train + n_val = 8200; lower n_train or n_val, or raise digits\n")
    assert list(tmp_path.iterdir()) == []
    # rows read from a file do not come from the task
    assert sft.main(["digits=1", f"data_path={tmp_path / 'rows.jsonl'}",
                     f"runs_dir={tmp_path / 'runs'}", "name=file"]) == 1
    assert "data_path" in final_event(tmp_path / "runs" / "file")["reason"]


def test_the_command_and_submit_refuse_as_subprocesses(tmp_path: Path) -> None:
    """As the trial typed them: the recipe command, and a job submitted with retries."""
    env = {**os.environ, "WANDB_MODE": "offline"}
    env.pop(ENV_RUN_DIR, None)
    for args in (["recipes", "sft", "task=foo", f"runs_dir={tmp_path / 'runs'}"],
                 ["submit", "recipes", "sft", "task=foo", "--name", "job-badtask",
                  "--dir", str(tmp_path / "jobs"), "--max-attempts", "3"]):
        proc = subprocess.run([sys.executable, "-m", "runwatch", *args], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=300)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "task must be one of addition, reverse, sort, got 'foo'" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists()
    jobs = tmp_path / "jobs"
    assert not jobs.exists() or not (jobs / "job-badtask").exists(), "nothing queued"


def test_a_config_built_in_python_is_checked_by_run_recipe(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = SFTConfig(task="foo", runs_dir=str(tmp_path / "runs"), name="direct")
    code = runtime.run_recipe(cfg, "sft", lambda rec: sft.train(cfg, rec))
    assert code == 2
    assert capsys.readouterr().err == "error: task must be one of addition, reverse, sort, " \
                                      "got 'foo'\n"
    assert not (tmp_path / "runs").exists()


def test_a_refusal_the_data_shows_fails_the_run_as_refused(tmp_path: Path) -> None:
    """Every row cut to nothing by max_seq_length: known only once the rows are fitted,
    after the run was made."""
    assert sft.main([*common(tmp_path, "short"), "max_seq_length=4", "max_steps=1"]) == 1
    end = final_event(tmp_path / "runs" / "short")
    assert end["phase"] == "FAILED" and end["code"] == "refused", end
    assert end["reason"].startswith("no rows are left to train on")
    assert "raise max_seq_length" in end["reason"]


@pytest.mark.parametrize("recipe", ["sft", "grpo"])
def test_n_val_0_turns_validation_off(recipe: str, tmp_path: Path) -> None:
    main = importlib.import_module(RECIPES[recipe][1]).main
    extra = (["from_scratch=true", "group_size=2", "batch_size=2", "max_sample_tokens=4"]
             if recipe == "grpo" else [])
    assert main([*common(tmp_path, "noval"), "n_val=0", "max_steps=2", "val_interval=1",
                 *extra]) == 0
    run = tmp_path / "runs" / "noval"
    assert final_event(run)["phase"] == "SUCCEEDED"
    assert not any(k.startswith("val/") for row in metrics(run) for k in row)


def _is_number(tp: typing.Any) -> bool:
    return bool({int, float} & {tp, *typing.get_args(tp)})


@pytest.mark.parametrize("cls", CONFIGS)
def test_every_number_setting_declares_its_range(cls: type[TrainConfig]) -> None:
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if _is_number(hints[f.name]):
            assert cls.bounds(f.name).describe(), f"{cls.__name__}.{f.name} has no range"


@pytest.mark.parametrize("cls", CONFIGS)
def test_help_and_the_docs_tables_show_each_range(cls: type[TrainConfig]) -> None:
    text = cls.help_text()
    rows = [line for line in DOCS.read_text().splitlines() if line.startswith("| `")]
    for f in dataclasses.fields(cls):
        allowed = cls.bounds(f.name).describe()
        if allowed:
            assert f"{f.metadata['help']} Allowed: {allowed}." in text, f.name
        # a row of the recipe's table, or of the SFT table for a shared one it keeps
        mine = [r for r in rows if r.startswith(f"| `{f.name}` |")
                and f"| {f.metadata['help'].rstrip('.')}" in r]
        assert mine, f"docs/recipes.md has no row for {cls.__name__}.{f.name}"
        assert all(r.endswith(f" | {allowed or '—'} |") for r in mine), (f.name, mine)
