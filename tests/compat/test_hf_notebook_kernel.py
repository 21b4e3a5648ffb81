"""RunwatchCallback in a notebook's kernel (tests.foundation.test_sdk_notebook_rerun's
stand-in for IPython's): an error a later cell showed, after which the kernel went on,
does not end the run an earlier `trainer.evaluate()` recorded. The callback took the
interpreter's last shown exception (`sys.last_value`, which IPython sets for every
cell's error) as the one that ended the process: at the kernel's restart it reopened the
SUCCEEDED run and ended it FAILED with a typo's NameError."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it

from tests.support.notebook import events, run_cells

REPO = Path(__file__).resolve().parents[2]

SETUP = f"""import sys
sys.path.insert(0, {str(REPO)!r})
from transformers import Trainer, TrainingArguments
from runwatch.compat.hf import RunwatchCallback
from tests.compat.test_hf import tiny_model, tiny_rows
args = TrainingArguments(output_dir='out', max_steps=2, logging_steps=1,
                         per_device_train_batch_size=4, per_device_eval_batch_size=8,
                         save_steps=100, report_to='none', use_cpu=True, disable_tqdm=True)
trainer = Trainer(model=tiny_model(), args=args, train_dataset=tiny_rows(),
                  eval_dataset=tiny_rows(8), callbacks=[RunwatchCallback(name='nb')])"""


def test_a_later_cells_error_does_not_end_an_evaluations_run_failed(tmp_path: Path) -> None:
    out = run_cells(tmp_path, [SETUP, "trainer.evaluate()", "typo_in_a_later_cell"],
                    timeout=240)
    assert "cell error: NameError" in out
    run_dir = tmp_path / "runs" / "nb"
    assert [e["phase"] for e in events(run_dir)] == ["RUNNING", "SUCCEEDED"]
    logs = [json.loads(line) for line in (run_dir / "logs.jsonl").read_text().splitlines()
            if line.strip()] if (run_dir / "logs.jsonl").exists() else []
    assert not [line for line in logs if "NameError" in json.dumps(line)]
