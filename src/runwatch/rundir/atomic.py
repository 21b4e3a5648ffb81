"""Whole-file writes that a reader sees complete or not at all (manifest, configs, samples)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file renamed over it.

    The folder is made when missing. A reader sees the old file or the new one, never
    half of one; the indexer ignores the `<name>.tmp` file while it exists. When the
    write fails (a full disk) the temporary file is removed and the error raised.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
