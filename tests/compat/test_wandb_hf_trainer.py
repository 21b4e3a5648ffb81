"""The W&B module put in `sys.modules["wandb"]` under the HF Trainer's own W&B reporting
(`report_to="wandb"`): transformers' WandbCallback imports W&B's internals (`wandb.sdk`),
which runwatch does not provide, and the error says to use RunwatchCallback instead (it
said "'wandb' is not a package"). Run in a subprocess: the alias is the process's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
    import sys
    import runwatch.compat.wandb as wandb
    sys.modules["wandb"] = wandb
    from transformers import Trainer, TrainingArguments
    from tests.compat.test_hf import tiny_model, tiny_rows

    try:
        import wandb.sdk
    except ImportError as exc:
        print("IMPORT", type(exc).__name__, exc)
    args = TrainingArguments(output_dir=sys.argv[1], max_steps=1, logging_steps=1,
                             per_device_train_batch_size=4, report_to="wandb", use_cpu=True,
                             disable_tqdm=True)
    Trainer(model=tiny_model(), args=args, train_dataset=tiny_rows()).train()
"""


def test_report_to_wandb_with_the_shim_says_to_use_the_trainer_callback(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "out")], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO),
                               "RUNWATCH_DIR": str(tmp_path / "runs")},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = [line for line in proc.stdout.splitlines() if line.startswith("IMPORT")]
    assert said and "ModuleNotFoundError" in said[0] and "RunwatchCallback" in said[0]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError:"), proc.stderr[-3000:]
    assert "runwatch.compat.hf.RunwatchCallback" in last and 'report_to="none"' in last
    assert not (tmp_path / "runs").exists()  # training stopped at its start, nothing recorded
