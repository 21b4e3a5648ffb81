"""The SFT recipe end to end on a tiny model: metrics, PREPARING, cache, checkpoints, resume."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runwatch.recipes import sft
from runwatch.recipes.config import SFTConfig

from .conftest import common, events, final_event, logs, metrics

SFT_STEP_METRICS = ("loss", "loss_sum", "trained_tokens", "learning_rate", "samples",
                    "grad_norm", "grad_clip_factor", "adapter_norm", "update_ratio",
                    "timing/step_total_s", "timing/step_forward_backward_s",
                    "timing/step_optim_s")
MEMORY = ("weights", "adapter", "gradients", "optimizer_state", "activations", "total",
          "process_peak_rss")


def check_step_metrics(rows: list[dict], names: tuple[str, ...]) -> None:
    for row in rows:
        for key in names:
            assert key in row, f"step {row['step']} lacks {key}"
            assert math.isfinite(row[key]), f"{key}={row[key]}"
        assert 0 < row["grad_clip_factor"] <= 1
        for key in ("grad_norm", "adapter_norm", "update_ratio", "learning_rate",
                    "timing/step_total_s"):
            assert row[key] >= 0
        assert row["timing/step_total_s"] >= row["timing/step_forward_backward_s"]
        assert 0 <= row["padding_fraction"] <= 1


def test_sft_smoke_subprocess_two_steps(tmp_path: Path) -> None:
    args = [*common(tmp_path, "smoke"), "max_steps=2", "val_interval=1"]
    # The real command line: `runwatch recipes sft key=value ...`.
    proc = subprocess.run([sys.executable, "-m", "runwatch", "recipes", "sft", *args],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "runs" / "smoke"
    assert final_event(run)["phase"] == "SUCCEEDED"
    rows = metrics(run)
    assert [r["step"] for r in rows] == [1, 2]
    check_step_metrics(rows, SFT_STEP_METRICS)
    for r in rows:
        assert r["loss"] == pytest.approx(r["loss_sum"] / r["trained_tokens"])
        assert r["samples"] == 8 and r["trained_tokens"] > 0
        assert 0 <= r["val/accuracy"] <= 1 and r["val/loss"] > 0
    first = rows[0]
    for part in MEMORY:
        assert first[f"memory/{part}_bytes"] >= 0
    assert first["memory/weights_bytes"] > 0 and first["memory/activations_bytes"] > 0
    assert first["memory/adapter_bytes"] == 0  # full fine-tuning
    assert first["data_fit/rows"] == 64
    assert SFTConfig.from_yaml((run / "config.yaml").read_text()).max_steps == 2
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["method"] == "sft" and manifest["backend"] == "torch-cpu"
    engine = json.loads((run / "engine_config.json").read_text())
    assert engine["resolved"]["trainable_parameters"] > 0
    assert list(run.glob("val_0002_*.json"))


def test_preparing_reports_progress_and_the_cache_is_reused_or_rebuilt(tmp_path: Path) -> None:
    assert sft.main([*common(tmp_path, "a"), "max_steps=1"]) == 0
    run = tmp_path / "runs" / "a"
    prep = [e for e in events(run) if e["phase"] == "PREPARING" and e.get("stage")]
    tokenizing = [e for e in prep if e["stage"] == "tokenizing"]
    assert tokenizing[-1]["done"] == tokenizing[-1]["total"] == 64
    assert any(e["stage"] == "caching tokenized rows" and "done" not in e for e in prep)
    fit = [r for r in logs(run) if "data_fit" in (r.get("data") or {})][-1]["data"]["data_fit"]
    assert set(fit) >= {"rows_at_max_length", "rows_lost_target_end", "rows_dropped_empty",
                        "padding_fraction"}
    assert 0 <= fit["padding_fraction"] <= 1
    memory = [r for r in logs(run) if "memory" in (r.get("data") or {})][-1]["data"]["memory"]
    assert "saved_tensors_hooks" in memory["how_measured"]

    assert sft.main([*common(tmp_path, "a"), "max_steps=1"]) == 2  # the name is taken
    assert sft.main([*common(tmp_path, "b"), "max_steps=1"]) == 0
    run_b = tmp_path / "runs" / "b"
    assert any("used cached tokenized rows" in r["message"] for r in logs(run_b))
    assert not any(e.get("stage") == "tokenizing" for e in events(run_b))

    for cached in (tmp_path / "cache").glob("*.json"):
        cached.write_text(cached.read_text()[:100])  # a torn write
    assert sft.main([*common(tmp_path, "c"), "max_steps=1"]) == 0
    run_c = tmp_path / "runs" / "c"
    assert any("damaged" in r["message"] for r in logs(run_c))
    assert any(e.get("stage") == "tokenizing" for e in events(run_c))
    assert final_event(run_c)["phase"] == "SUCCEEDED"


def test_resume_continues_step_count_and_lr_schedule(tmp_path: Path) -> None:
    args = ["max_steps=6", "checkpoint_interval=2", "val_interval=100", "warmup_steps=2",
            "export_samples=false"]
    assert sft.main([*common(tmp_path, "whole"), *args]) == 0
    assert sft.main([*common(tmp_path, "cut"), *args]) == 0
    cut = tmp_path / "runs" / "cut"
    # Make it look as if the process died after step 3: the last checkpoint is step 2's.
    ckpts = (cut / "checkpoints.jsonl").read_text().splitlines(keepends=True)
    (cut / "checkpoints.jsonl").write_text("".join(
        line for line in ckpts if json.loads(line)["step"] <= 2))
    assert sft.main([*common(tmp_path, "cut"), *args, "resume=true"]) == 0

    whole = {r["step"]: r for r in metrics(tmp_path / "runs" / "whole")}
    resumed = [r for r in metrics(cut)][6:]
    assert [r["step"] for r in resumed] == [3, 4, 5, 6]
    for r in resumed:
        assert r["learning_rate"] == pytest.approx(whole[r["step"]]["learning_rate"])
        assert r["loss"] == pytest.approx(whole[r["step"]]["loss"], rel=1e-4)
    assert any("resumed from step 2" in r["message"] for r in logs(cut))
    assert final_event(cut)["phase"] == "SUCCEEDED"


def test_a_run_that_records_nothing_still_trains(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # A non-zero RANK gets a NullRun: the same loop runs, with no run directory, no
    # checkpoint saved and none to resume from.
    monkeypatch.setenv("RANK", "1")
    assert sft.main([*common(tmp_path, "rank1"), "max_steps=2", "val_interval=1",
                     "checkpoint_interval=1", "resume=true"]) == 0
    assert not (tmp_path / "runs").exists()
    out = capsys.readouterr().out
    assert "records nothing (a non-zero RANK), has no training checkpoint" in out
    assert "step 2/2 loss " in out


def test_lora_adapter_metrics_describe_the_adapter(tmp_path: Path) -> None:
    assert sft.main([*common(tmp_path, "lora"), "max_steps=2", "lora_rank=4",
                     "val_interval=100"]) == 0
    run = tmp_path / "runs" / "lora"
    rows = metrics(run)
    check_step_metrics(rows, SFT_STEP_METRICS)
    assert rows[0]["memory/adapter_bytes"] > 0
    full = rows[0]["memory/weights_bytes"]
    assert rows[0]["memory/gradients_bytes"] == rows[0]["memory/adapter_bytes"] < full
    engine = json.loads((run / "engine_config.json").read_text())["resolved"]
    assert engine["lora_layers"] and engine["trainable_parameters"] < engine["parameters"]
