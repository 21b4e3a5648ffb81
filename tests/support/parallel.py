"""Running the suite on several pytest-xdist workers: the folder the workers share, and the
groups that keep tests sharing a module-scoped fixture on one worker."""

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


def group_module_fixture_users(items: list[pytest.Item]) -> None:
    """Mark each test that uses a module- or class-scoped fixture with its module's
    `xdist_group`, so that `--dist loadgroup` runs such a module's tests on one worker and
    builds the fixture once; every other test goes to whichever worker is free."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        if any(defs and defs[-1].scope in ("module", "class", "package")
               for defs in info.name2fixturedefs.values()):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
