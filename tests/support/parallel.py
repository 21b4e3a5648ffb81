"""Running the suite on several pytest-xdist workers: the folder the workers share."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def worker() -> str | None:
    """This process's xdist worker name (`gw0`, `gw1`, …), or None when not under xdist."""
    return os.environ.get("PYTEST_XDIST_WORKER")


def session_folder(factory: pytest.TempPathFactory) -> Path:
    """A folder of this test session that every xdist worker of it sees: the parent of the
    workers' own temp folders (`pytest-N/popen-gwK`), or the temp folder without xdist.
    Another pytest session, running at the same time, gets another one."""
    base = factory.getbasetemp()
    return base.parent if worker() is not None else base

