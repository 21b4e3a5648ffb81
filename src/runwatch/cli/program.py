"""The words that start a runwatch command as the user can type it here, so that a
printed command runs as printed: `runwatch` when that is this installation on PATH, else
the path of this installation's script (`.venv/bin/runwatch` after `make demo`)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def runwatch_words(cwd: Path | None = None) -> list[str]:
    """`["runwatch"]` when PATH finds this installation's script; else the script's path,
    relative to `cwd` (default the current folder) when it lies below it; else
    `python -m runwatch` with this interpreter."""
    script = Path(sys.executable).parent / "runwatch"
    if not script.is_file():
        return [sys.executable, "-m", "runwatch"]
    found = shutil.which("runwatch")
    if found and Path(found).resolve() == script.resolve():
        return ["runwatch"]
    here = (cwd or Path.cwd()).absolute()
    try:
        relative = script.absolute().relative_to(here)
    except ValueError:
        return [str(script.absolute())]
    # A bare name would be looked up on PATH, where it is not.
    return [str(relative) if len(relative.parts) > 1 else f"./{relative}"]
