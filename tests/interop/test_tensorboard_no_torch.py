"""An export loads tensorboardX without torch: tensorboardX imports torch when it loads only to
take torch tensors, which an export never passes, and that import was most of an export's time.
Run in a fresh interpreter (this one may have torch loaded by other tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tensorboard.backend.event_processing import event_accumulator

import runwatch

CHECK = """
import sys
from runwatch.cli.main import app
try:
    app(sys.argv[1:], prog_name="runwatch")
except SystemExit as exc:
    assert not exc.code, exc.code
print("torch loaded" if "torch" in sys.modules else "torch not loaded")
import tensorboardX.writer
print("numpy only" if tensorboardX.writer.numpy_compatible.__module__ == "numpy" else "torch")
"""


def test_an_export_does_not_load_torch_and_torch_still_imports_after(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with runwatch.init(name="small", dir=runs) as run:
        for step in range(3):
            run.log({"loss": 1.0 / (step + 1)}, step=step)
    out = tmp_path / "tb"
    proc = subprocess.run(
        [sys.executable, "-c", CHECK + "import torch\nprint(torch.ones(2).sum().item())\n",
         "runs", "tensorboard", "small", "--dir", str(runs), "--out", str(out), "--no-start"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout.splitlines()
    assert said[0].startswith("wrote 3 points")
    assert said[-3:] == ["torch not loaded", "numpy only", "2.0"]
    acc = event_accumulator.EventAccumulator(str(out))
    acc.Reload()
    assert [e.step for e in acc.Scalars("loss")] == [0, 1, 2]
