"""What a new user meets importing W&B logs: a current W&B offline run (a binary
`run-<id>.wandb` file written by the real wandb package, no history JSON) refused with what
to do instead, whichever way it is given; W&B's own columns left out of an export named in
notes; a relative path's run named after its folder; counts in the singular."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runwatch.ingest.importers import SourceError, read_source
from tests.importers.tfevents import event, file_version, write_events
from tests.support.cli import cli_here, run_cli


def _offline_run(tmp_path: Path) -> Path:
    """A W&B offline run of five logged rows, written by the real wandb package."""
    pytest.importorskip("wandb")
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import wandb
        run = wandb.init(project="p")
        for i in range(5):
            wandb.log({"loss": 1 / (i + 1)})
        wandb.finish()
    """))
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path),
           "WANDB_CONFIG_DIR": str(tmp_path / "wandb-config"),
           "WANDB_CACHE_DIR": str(tmp_path / "wandb-cache"), "WANDB_SILENT": "true"}
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (folder,) = (tmp_path / "wandb").glob("offline-run-*")
    return folder


def test_a_wandb_offline_run_is_refused_saying_what_to_do(tmp_path: Path) -> None:
    folder = _offline_run(tmp_path)
    (record,) = folder.glob("run-*.wandb")
    assert not list(folder.rglob("*history*"))  # what the docs once promised is not there
    run_id = record.stem.removeprefix("run-")
    runs = tmp_path / "runs"
    tries = [  # every way a user tries it
        (str(folder),), (str(record),), (str(record), "--format", "wandb"),
        (str(folder), "--format", "wandb"), (str(tmp_path / "wandb"),),
        (str(record), "--format", "jsonl")]
    for args in tries:
        out = cli_here("import", *args, "--dir", str(runs), check=False)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        said = " ".join((out.stdout + out.stderr).split())
        assert "W&B offline run" in said, (args, said)
        assert f"wandb sync {folder}" in said and f"ENTITY/PROJECT/{run_id}" in said, said
        assert "scan_history()" in said and "runwatch.compat.wandb" in said, said
        assert "TensorBoard" not in said and "not JSON" not in said, said
    assert not runs.exists() or not [p for p in runs.iterdir() if p.name != ".runwatch"]
    # the Python API refuses it too, with --format wandb's reader
    with pytest.raises(SourceError, match="W&B offline run"):
        read_source(record, "wandb")
    # as the real command line, once
    proc = run_cli("import", str(record), "--dir", str(runs), check=False)
    assert proc.returncode == 2 and "wandb sync" in proc.stderr, proc.stderr


def test_a_wandb_run_folder_with_tensorboard_events_is_read_as_tensorboard(
        tmp_path: Path) -> None:
    """W&B's sync_tensorboard keeps the event files beside its record file: auto reads
    those, as it reads any folder of event files; --format wandb still refuses it."""
    folder = tmp_path / "wandb" / "offline-run-20260101_000000-abc123"
    folder.mkdir(parents=True)
    (folder / "run-abc123.wandb").write_bytes(b":W&B\x00\x01\x00binary records")
    write_events(folder / "files" / "events.out.tfevents.1.host",
                 [file_version(1e9), event(0, 1e9, {"loss": 1.0}), event(1, 1e9 + 1,
                                                                        {"loss": 0.5})])
    out = json.loads(cli_here("import", str(folder), "--dir", str(tmp_path / "runs"),
                              "-o", "json").stdout)
    assert out["trainer"] == "tensorboard" and out["steps"] == 2
    refused = cli_here("import", str(folder), "--dir", str(tmp_path / "runs"),
                       "--format", "wandb", check=False)
    assert refused.returncode == 2 and "wandb sync" in refused.stderr, refused.stderr


def test_a_folder_given_as_a_wandb_export_is_refused_naming_what_it_reads(
        tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    out = cli_here("import", str(tmp_path / "logs"), "--dir", str(tmp_path / "runs"),
                   "--format", "wandb", check=False)
    assert out.returncode == 2
    assert "is a folder, and --format wandb reads a file" in out.stderr, out.stderr


HISTORY = (",_step,_runtime,_timestamp,train/loss,train/global_step,samples\n"
           "0,0,10.0,1796400010.0,2.0,0,\n"
           "1,1,12.5,1796400012.5,1.9,4,table\n"
           "2,2,15.0,1796400015.0,1.8,8,\n")


def test_wandb_s_own_columns_left_out_are_named(tmp_path: Path) -> None:
    """`_step` where `train/global_step` is the step, `_runtime` where `_timestamp` is the
    clock: each is left out and said so, as docs/sdk.md says of every such column."""
    src = tmp_path / "exp" / "history.csv"
    src.parent.mkdir()
    src.write_text(HISTORY)
    out = json.loads(cli_here("import", str(src), "--dir", str(tmp_path / "runs"),
                              "-o", "json").stdout)
    assert out["steps"] == 3
    notes = out["notes"]
    assert ("'_step' is not imported: the run's step is 'train/global_step' (--step-column "
            "picks another)") in notes, notes
    assert ("'_runtime' is not imported: in a W&B export, a column whose name starts with "
            "'_' is W&B's own") in notes, notes
    # the step and the clock are what they are; _runtime that times a run is no note
    left_out = " ".join(n.split(" not imported")[0] for n in notes)
    assert "'_timestamp'" not in left_out and "'train/global_step'" not in left_out, notes
    src.write_text("_step,_runtime,loss\n0,1.0,2.0\n1,2.0,1.5\n")
    out = json.loads(cli_here("import", str(src), "--dir", str(tmp_path / "runs"),
                              "--name", "by-runtime", "-o", "json").stdout)
    assert not [n for n in out["notes"] if "not imported" in n], out["notes"]


def test_a_relative_path_s_run_is_named_after_its_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`runwatch import history.csv` in the export's folder names the run after the
    folder, as the absolute path does; two exports in two folders do not collide."""
    for folder in ("exp-a", "exp-b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "history.csv").write_text(HISTORY)
    runs = tmp_path / "runs"
    names = []
    for folder in ("exp-a", "exp-b"):
        monkeypatch.chdir(tmp_path / folder)
        out = cli_here("import", "history.csv", "--dir", str(runs), "-o", "json")
        names.append(json.loads(out.stdout)["name"])
    # a TensorBoard folder given as `.`
    write_events(tmp_path / "tb-run" / "events.out.tfevents.1.host",
                 [file_version(1e9), event(0, 1e9, {"loss": 1.0})])
    monkeypatch.chdir(tmp_path / "tb-run")
    out = cli_here("import", ".", "--dir", str(runs), "-o", "json")
    names.append(json.loads(out.stdout)["name"])
    assert names == ["imported-exp-a", "imported-exp-b", "imported-tb-run"]


def test_counts_of_one_are_said_in_the_singular(tmp_path: Path) -> None:
    src = tmp_path / "one.csv"
    src.write_text("step,loss\n0,1.0\n")
    out = cli_here("import", str(src), "--dir", str(tmp_path / "runs")).stdout
    assert ": 1 step, 0 health findings (" in out, out
