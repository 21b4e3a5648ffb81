"""A run whose init() was stopped before the run went live (Ctrl-C, SIGTERM, an error in
the config's to_yaml()) leaves no manifest behind: no run that never ends holds its name,
and the same init() runs again as a new run. A resumed run keeps what it held."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import runwatch
from runwatch.rundir import format as fmt
from tests.support.cli import run_cli

STOPPED_IN_TO_YAML = textwrap.dedent("""
    import os, signal, sys, time
    import runwatch

    class Config(dict):
        def to_yaml(self):  # init() calls it while it makes the run
            os.kill(os.getpid(), getattr(signal, sys.argv[2]))
            time.sleep(5)  # the signal arrives here
            return "lr: 0.1\\n"

    runwatch.init(name="stopped", dir=sys.argv[1], config=Config())
    print("init returned")
""")


class RefusingConfig(dict[str, float]):
    def to_yaml(self) -> str:
        raise ValueError("this config cannot be written")


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_run_stopped_in_init_leaves_no_run_behind(runs_dir: Path, tmp_path: Path,
                                                    sig: str) -> None:
    script = tmp_path / "stopped.py"
    script.write_text(STOPPED_IN_TO_YAML)
    done = subprocess.run([sys.executable, str(script), str(runs_dir), sig],
                          capture_output=True, text=True, timeout=60)
    assert "init returned" not in done.stdout
    assert done.returncode != 0 if sig == "SIGINT" else done.returncode == -signal.SIGTERM
    d = runs_dir / "stopped"
    assert not (d / fmt.MANIFEST).exists()
    listed = run_cli("runs", "list", "--dir", str(runs_dir), "-o", "json")
    assert json.loads(listed.stdout) == []
    run = runwatch.init(name="stopped", dir=runs_dir)  # no resume=True needed
    assert isinstance(run, runwatch.Run)
    run.finish()
    assert [e["phase"] for e in map(json.loads, (d / fmt.EVENTS).read_text().splitlines())] \
        == ["RUNNING", "SUCCEEDED"]


def test_a_new_run_whose_config_fails_leaves_nothing(runs_dir: Path) -> None:
    with pytest.raises(ValueError, match="cannot be written"):
        runwatch.init(name="bad-config", dir=runs_dir, config=RefusingConfig())
    assert not (runs_dir / "bad-config").exists()
    run = runwatch.init(name="bad-config", dir=runs_dir, config={"lr": 0.1})
    assert isinstance(run, runwatch.Run)
    run.finish()


def test_a_resume_whose_config_fails_keeps_the_run(runs_dir: Path) -> None:
    run = runwatch.init(name="kept", dir=runs_dir, config={"lr": 0.1})
    assert isinstance(run, runwatch.Run)
    run.log({"loss": 1.0}, step=0)
    run.finish()
    with pytest.raises(ValueError, match="cannot be written"):
        runwatch.init(name="kept", dir=runs_dir, resume=True, config=RefusingConfig())
    d = runs_dir / "kept"
    assert json.loads((d / fmt.MANIFEST).read_text())["run_id"] == run.id
    assert (d / fmt.CONFIG).read_text().strip() == "lr: 0.1"
    assert (d / fmt.METRICS).exists()
    again = runwatch.init(name="kept", dir=runs_dir, resume=True)
    assert isinstance(again, runwatch.Run) and again.id == run.id
    again.finish()
