"""The DPO recipe from an SFT checkpoint: smoke run as a subprocess, metrics in range."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runwatch.recipes import dpo, sft

from .conftest import common, final_event, metrics

VAL = ("val/preference_accuracy", "val/mean_chosen_delta", "val/mean_rejected_delta",
       "val/mean_margin")


def test_dpo_smoke_subprocess_two_steps_from_sft(tmp_path: Path, sft_checkpoint: Path) -> None:
    args = [*common(tmp_path, "dpo"), f"init_from={sft_checkpoint}", "max_steps=2",
            "val_interval=1"]
    proc = subprocess.run([sys.executable, "-m", "runwatch", "recipes", "dpo", *args],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "runs" / "dpo"
    assert final_event(run)["phase"] == "SUCCEEDED"
    rows = metrics(run)
    assert [r["step"] for r in rows] == [0, 1, 2]
    baseline = rows[0]
    assert baseline["val/mean_margin"] == pytest.approx(0.0, abs=1e-5)
    # Policy == reference: the DPO term is -log sigmoid(0) = log 2.
    assert baseline["val/dpo_loss"] == pytest.approx(math.log(2), abs=1e-5)
    for r in rows[1:]:
        assert r["pairs"] == 8 and r["loss"] > 0
        assert r["loss"] == pytest.approx(r["dpo_loss"] + r["chosen_nll"], rel=1e-5)
        assert 0 <= r["preference_accuracy"] <= 1 and r["chosen_nll"] >= 0
        for key in ("grad_norm", "adapter_norm", "update_ratio", "timing/step_total_s"):
            assert math.isfinite(r[key]) and r[key] >= 0
        assert 0 < r["grad_clip_factor"] <= 1
    for r in rows:
        assert 0 <= r["val/preference_accuracy"] <= 1
        assert all(math.isfinite(r[k]) for k in VAL)
        assert r["val/mean_margin"] == pytest.approx(
            r["val/mean_chosen_delta"] - r["val/mean_rejected_delta"], abs=1e-4)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["method"] == "dpo" and str(sft_checkpoint) in manifest["base_model"]
    assert rows[1]["memory/weights_bytes"] > rows[1]["memory/gradients_bytes"]  # + reference


def test_dpo_with_an_adapter_saves_a_merged_inference_checkpoint(tmp_path: Path,
                                                                 sft_checkpoint: Path) -> None:
    assert dpo.main([*common(tmp_path, "dpo-lora"), f"init_from={sft_checkpoint}",
                     "max_steps=2", "lora_rank=2", "val_interval=100",
                     "export_samples=false", "rpo_alpha=0"]) == 0
    run = tmp_path / "runs" / "dpo-lora"
    assert all(r["loss"] == r["dpo_loss"] for r in metrics(run)[1:])  # plain DPO
    assert metrics(run)[1]["memory/adapter_bytes"] > 0  # [0] is the baseline validation
    # The merged model is a plain tiny model again: a later run starts from it.
    assert sft.main([*common(tmp_path, "again"), f"init_from={run}", "max_steps=1"]) == 0
