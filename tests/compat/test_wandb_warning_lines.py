"""The W&B module's warnings name the script's line that made the call, whichever way it
was made (`wandb.log`, `run.log`, a helper module's call, `init`), so that the user sees
which of their lines it is and a filter on their own module matches it. A real script in a
subprocess, its stderr read."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.compat.test_wandb import run_script

SCRIPT = """\
import warnings
import runwatch.compat.wandb as wandb
import helper
warnings.filterwarnings("ignore", message="'hist'", module="helper")
run = wandb.init(name="lines")
wandb.log({"img": wandb.Image([[0]])})
run.log({"loss": 1.0}, step=5)
run.log({"late": 1.0}, step=2)
wandb.log({"step": 3, "loss": 0.5})
helper.log_media(run)
wandb.log({"pending": 1.0, "ts": 1.0}, commit=False)
wandb.finish()
again = wandb.init(name="lines")
again.finish()
"""

HELPER = """\
import runwatch.compat.wandb as wandb


def log_media(run):
    run.log({"hist": wandb.Histogram([1, 2])}, commit=False)
    run.log({"video": wandb.Video("v.mp4")})
"""


def test_each_warning_names_the_script_s_line(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    (tmp_path / "helper.py").write_text(textwrap.dedent(HELPER))
    proc = run_script(path, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if "UserWarning" in line]
    helper = tmp_path / "helper.py"
    assert said == [
        f"{path}:6: UserWarning: 'img': runwatch records numbers and Tables; an Image is "
        "not recorded",
        f"{path}:8: UserWarning: step 2 is before the current step 5; W&B drops such data "
        "and so does runwatch",
        f"{path}:9: UserWarning: 'step': a runwatch record's own field, not recorded as a "
        "metric (log it under another name, such as 'train/step')",
        # the helper's Histogram warning is filtered by the helper's module name
        f"{helper}:6: UserWarning: 'video': runwatch records numbers and Tables; a Video is "
        "not recorded",
        # the row finish() commits: its warning names the finish() line
        f"{path}:12: UserWarning: 'ts': a runwatch record's own field, not recorded as a "
        "metric (log it under another name, such as 'train/ts')",
        f"{path}:13: UserWarning: runs/lines holds a run already, so this run is "
        "runs/lines-2 (W&B lets runs share a name; runwatch names a run's folder by it)",
    ], proc.stderr[-3000:]
