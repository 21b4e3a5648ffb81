"""RunwatchCallback when the script raises after a log before `train()` started the run
(outside a runwatch job): the run ends FAILED with the error, where it read SUCCEEDED (its
last log had ended it) or, when the log itself raised, stayed RUNNING with no end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it

from transformers import Trainer

from runwatch.compat.hf import RunwatchCallback
from tests.compat.test_hf import read, tiny_model, tiny_rows
from tests.compat.test_hf_evaluate_before_train import _args, _phases
from tests.support import cli_here

RAISES_AFTER_EVALUATE = """
    import sys
    from transformers import Trainer
    from runwatch.compat.hf import RunwatchCallback
    from tests.compat.test_hf import tiny_model, tiny_rows
    from tests.compat.test_hf_evaluate_before_train import _args

    trainer = Trainer(model=tiny_model(), args=_args(sys.argv[2], 2),
                      train_dataset=tiny_rows(), eval_dataset=tiny_rows(8),
                      callbacks=[RunwatchCallback(name="baseline", dir=sys.argv[1])])
    trainer.evaluate()
    raise RuntimeError("the reward model did not load")
    trainer.train()
"""


def _errors(runs: Path, name: str) -> list[str]:
    logs = json.loads(cli_here("runs", "logs", name, "--dir", str(runs), "-o", "json").stdout)
    return [line["message"] for line in logs if line["level"].lower() == "error"]


def test_a_script_that_raises_after_an_evaluation_ends_the_run_failed(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(RAISES_AFTER_EVALUATE))
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, str(script), str(runs), str(tmp_path / "out")],
                          cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1 and "did not load" in proc.stderr

    got = read(runs, "get", "baseline")
    assert got["run"]["status"] == "FAILED"
    assert "eval_loss" in read(runs, "metrics", "baseline")["steps"][0]["measured"]
    errors = _errors(runs, "baseline")
    assert errors and "RuntimeError" in errors[-1] and "did not load" in errors[-1]


def test_a_log_that_raises_before_train_ends_its_run_failed(tmp_path: Path) -> None:
    """The run the log started ends with the log's error, at once (a notebook's kernel
    held it RUNNING); a train() after it goes on in that run."""
    runs = tmp_path / "runs"
    callback = RunwatchCallback(name="bad-log", dir=runs)
    trainer = Trainer(model=tiny_model(), args=_args(tmp_path / "out", 2),
                      train_dataset=tiny_rows(), eval_dataset=tiny_rows(8),
                      callbacks=[callback])
    with pytest.raises(ValueError, match="longer than 256 characters"):
        trainer.log({"x" * 300: 1.0})
    assert callback.run.finished and callback.run.status == "FAILED"
    assert read(runs, "get", "bad-log")["run"]["status"] == "FAILED"
    errors = _errors(runs, "bad-log")
    assert errors and "ValueError" in errors[-1]

    trainer.train()
    assert read(runs, "get", "bad-log")["run"]["status"] == "SUCCEEDED"
    assert _phases(runs, "bad-log") == ["RUNNING", "FAILED", "RUNNING", "SUCCEEDED"]
    assert [s["step"] for s in read(runs, "metrics", "bad-log")["steps"]] == [1, 2]
