"""A process forked from a W&B script under `import runwatch.compat.wandb as wandb` (a
DataLoader or Pool worker, os.fork()) leaves the script's run to it, as W&B ignores such a
process's calls: its exit does not end the run, its `wandb.log` and `wandb.config` record
nothing there, and its own `wandb.init()` records a run of its own. Real scripts in
subprocesses; the run folders read back."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import yaml

from runwatch.rundir import format as fmt
from tests.compat.test_wandb import run_script


def phases(tmp_path: Path, name: str) -> list[tuple[str, str | None]]:
    lines = (tmp_path / "runs" / name / fmt.EVENTS).read_text().splitlines()
    return [(e["phase"], e.get("code")) for e in map(json.loads, lines)]


def test_a_forked_child_that_exits_leaves_the_parent_to_end_the_run(tmp_path: Path) -> None:
    # The child's exit recorded the run SUCCEEDED, W&B's ending for a script that ends
    # without finish(), so the parent's finish(exit_code=1) was lost.
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent("""
        import os, sys
        import runwatch.compat.wandb as wandb
        wandb.init(project="p", name="forked", config={"lr": 0.1})
        for step in range(5):
            wandb.log({"loss": 1.0 / (step + 1)})
        pid = os.fork()
        if pid == 0:
            wandb.config.update({"lr": 99})
            wandb.log({"child": 1.0})
            sys.exit(0)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        for step in range(5, 8):
            wandb.log({"loss": 0.1})
        wandb.finish(exit_code=1)
    """))
    proc = run_script(path, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert phases(tmp_path, "forked") == [("RUNNING", None), ("FAILED", "failed")]
    metrics = [json.loads(line) for line in
               (tmp_path / "runs" / "forked" / fmt.METRICS).read_text().splitlines()]
    assert [m["seq"] for m in metrics] == list(range(8))
    assert all("child" not in m for m in metrics)
    config = yaml.safe_load((tmp_path / "runs" / "forked" / fmt.CONFIG).read_text())
    assert config == {"lr": 0.1}
    assert proc.stderr.count("records nothing") == 1, proc.stderr[-3000:]


def test_a_forked_child_records_its_own_run_with_init(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent("""
        import os, sys
        import runwatch.compat.wandb as wandb
        wandb.init(project="p", name="parent")
        wandb.log({"loss": 1.0})
        pid = os.fork()
        if pid == 0:
            wandb.init(project="p", name="child")
            wandb.log({"x": 2.0})
            sys.exit(0)  # no finish(): W&B's ending, SUCCEEDED, for the child's run
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        sys.exit(4)  # and the parent's run fails, as its exit status says
    """))
    proc = run_script(path, tmp_path)
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert phases(tmp_path, "child") == [("RUNNING", None), ("SUCCEEDED", None)]
    assert phases(tmp_path, "parent") == [("RUNNING", None), ("FAILED", "failed")]
