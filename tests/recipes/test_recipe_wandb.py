"""W&B mirroring: off by default, fails fast without a key, works offline when installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runwatch.recipes import sft

from .conftest import common, final_event


def test_online_without_an_api_key_fails_before_any_run_data_or_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc with W&B credentials
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    args = [a for a in common(tmp_path, "nokey") if not a.startswith("wandb_project")]
    assert sft.main([*args, "wandb_project=some-project"]) == 1
    # wandb is installed (`make test` installs it), so the key is what is missing.
    assert "WANDB_API_KEY" in capsys.readouterr().err
    # No run folder is left (its FAILED run would share a prefix with the next one), and
    # nothing was prepared or loaded.
    assert not (tmp_path / "runs").exists()
    assert not (tmp_path / "cache").exists()


def test_offline_mode_logs_to_disk_and_records_the_run_in_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))
    args = [a for a in common(tmp_path, "offline") if not a.startswith("wandb_project")]
    assert sft.main([*args, "wandb_project=recipes-test", "wandb_group=arm-a",
                     "wandb_run_name=first", "max_steps=2", "val_interval=2"]) == 0
    run = tmp_path / "runs" / "offline"
    assert final_event(run)["phase"] == "SUCCEEDED"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["wandb_mode"] == "offline" and manifest["wandb_run_id"]
    assert "wandb_url" in manifest and manifest["group"] == "arm-a"
    offline_runs = list((run / "wandb").glob("offline-run-*"))
    assert offline_runs and list(offline_runs[0].glob("*.wandb"))
