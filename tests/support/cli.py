"""The real `runwatch` command line, run as a subprocess, or in this process where the
command's answer is what a test reads and the process is not what it tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

# Only stops a hung command from hanging the suite.
CLI_DEADLINE_S = 300


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `runwatch ARGS` as a real subprocess."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "runwatch", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=CLI_DEADLINE_S)
    if check and proc.returncode != 0:
        raise AssertionError(f"runwatch {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def cli_here(*args: str, check: bool = True,
             env: Mapping[str, str | None] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `runwatch ARGS` in this process (typer's CliRunner, the same app `runwatch`
    runs), for a test that reads what a command answers or refuses, where the process is
    not what it tests: a subprocess costs a new interpreter and its imports, 1-5 s under
    load. Keep at least one test per command that runs it with `run_cli`. With `check`,
    the command must succeed; an exception the command did not turn into an exit status
    (a traceback, in a real process) fails the test either way."""
    from typer.testing import CliRunner

    from runwatch.cli.main import app

    res = CliRunner().invoke(app, list(args), env={"COLUMNS": "120", **(env or {})})
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"runwatch {' '.join(args)} raised {res.exception!r}:\n"
                             f"{res.output}") from res.exception
    if check and res.exit_code != 0:
        raise AssertionError(f"runwatch {' '.join(args)} exited {res.exit_code}:\n"
                             f"{res.output}\n{res.exception!r}")
    return subprocess.CompletedProcess(["runwatch", *args], res.exit_code, res.stdout,
                                       res.stderr)
