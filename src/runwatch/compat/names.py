"""Other trackers' run and project names (W&B's, the HF Trainer's `run_name`) as the
names of run-format v1, which name folders: `[A-Za-z0-9._-]`, at most 128 characters."""

from __future__ import annotations

import re

from runwatch.rundir import format as fmt

_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def folder_name(text: str) -> str:
    """`text` with each stretch of characters a folder name cannot hold made one '-',
    without leading or trailing '-' and '.', cut to the longest name; "" when nothing is
    left ("my run/1" is "my-run-1")."""
    return _BAD_NAME_CHARS.sub("-", text).strip("-.")[:fmt.MAX_NAME_LENGTH]
