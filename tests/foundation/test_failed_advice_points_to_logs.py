"""A run that raised is told where its exception is (a TRL trial, session 37: a reward
function that raised "reward server unreachable" ended FAILED, and `runs get` said
"Nothing in the job reported what went wrong" while the error logs held the exception
and its traceback)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support import cli_here

SCRIPT = textwrap.dedent("""
    import sys, runwatch
    with runwatch.init(name="raised", dir=sys.argv[1], method="grpo"):
        raise ValueError("reward server unreachable")
""")


def test_the_advice_of_a_run_that_raised_names_its_error_logs(runs_dir: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(runs_dir)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    shown = " ".join(cli_here("runs", "get", "raised", "--dir", str(runs_dir)).stdout.split())
    assert "the training job failed" in shown, shown
    assert "An exception the job raised is in its error logs (runwatch runs logs RUN " \
        "--level error)" in shown, shown
    assert "Nothing in the job reported" not in shown
    logs = cli_here("runs", "logs", "raised", "--level", "error", "--dir", str(runs_dir)).stdout
    assert "reward server unreachable" in logs
