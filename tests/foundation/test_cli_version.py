"""`runwatch --version` (session 37: every version called itself 0.1.0 and had no
`--version`, so a team in a rolling upgrade could not tell which machine ran which
runwatch): the version, the index schema it writes (an older index it opens is upgraded,
one way) and the run format it records."""

from __future__ import annotations

import subprocess
import sys

import runwatch
from runwatch.rundir.format import SCHEMA_VERSION
from runwatch.store.db import HEAD_REVISION


def test_version_names_the_index_schema_and_the_run_format() -> None:
    out = subprocess.run([sys.executable, "-m", "runwatch", "--version"], capture_output=True,
                         text=True, timeout=60, check=True)
    assert out.stdout == (f"runwatch {runwatch.__version__} (index schema {HEAD_REVISION}, "
                          f"run format {SCHEMA_VERSION})\n")
    # a command after it does not run: it answers and exits
    out = subprocess.run([sys.executable, "-m", "runwatch", "--version", "runs", "list"],
                         capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.startswith("runwatch ") and "index schema" in out.stdout
