"""Fast JSON encoding and decoding of run-file lines, keeping NaN and ±Infinity as values.

orjson is fast but writes NaN as null and refuses the NaN/Infinity tokens, so each
direction falls back to the standard library for the (rare) lines that need them.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps_line(record: dict[str, Any]) -> bytes:
    """One JSON line (with the trailing newline) for `record`."""
    line = orjson.dumps(record)
    # orjson maps NaN/Inf to null; metric values are never None, so a null means the
    # exact encoder is needed (a key that merely contains "null" only costs speed).
    if b"null" in line:
        return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    return line + b"\n"


def loads_line(line: bytes) -> Any:
    """Parse one line; raises ValueError when it is not JSON or is nested too deeply."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        # The NaN / Infinity / -Infinity tokens are part of format v1.
        try:
            return json.loads(line)
        except RecursionError:
            raise ValueError("the JSON is nested too deeply") from None
