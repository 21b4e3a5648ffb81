"""The SDK in a notebook's kernel (one long-lived process that runs cell after cell and
goes on after a cell raises) and at Python's interactive prompt: an init cell run again
says the run is this process's own, not a live process's to wait for or stop (it named
the kernel's pid); an error a cell or a prompt line showed, after which the session went
on, is not the exception that ends its runs (a typo at the prompt ended a run FAILED with
the NameError at exit, where nothing had failed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.notebook import events, run_cells


def test_an_init_cell_run_again_says_the_run_is_this_kernels_own(tmp_path: Path) -> None:
    out = run_cells(tmp_path, [
        "import runwatch\nrun = runwatch.init(project='nb', name='exp1')",
        "run.log({'loss': 1.0}, step=0)",
        "run = runwatch.init(project='nb', name='exp1')",  # the init cell again
        "run.log({'loss': 0.5}, step=1)\nrun.finish()",
    ])
    assert "cell error: RunDirError: this process records" in out
    assert "call its finish()" in out
    assert "wait for it to finish, stop it" not in out  # it named the kernel itself
    run_dir = tmp_path / "runs" / "exp1"
    assert [e["phase"] for e in events(run_dir)] == ["RUNNING", "SUCCEEDED"]
    steps = [json.loads(line)["step"]
             for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 1]  # the first run goes on, nothing lost


def test_an_error_at_the_interactive_prompt_does_not_end_the_run_with_it(
        tmp_path: Path) -> None:
    lines = ["import runwatch",
             "run = runwatch.init(project='repl', name='r1')",
             "run.log({'loss': 1.0}, step=0)",
             "undefined_name",  # a typo the prompt shows; the session goes on
             "run.log({'loss': 0.5}, step=1)"]
    done = subprocess.run([sys.executable, "-i", "-q"], cwd=tmp_path, text=True,
                          input="\n".join(lines) + "\n", capture_output=True, timeout=120)
    assert "NameError" in done.stderr
    last = events(tmp_path / "runs" / "r1")[-1]
    # the session ended without finish(): that, not the typo, is what the run says
    assert (last["phase"], last["code"]) == ("FAILED", "stopped_early")
