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


# What a NUL character (`\u0000`) in a string of a run file or an API body is read as:
# PostgreSQL's text cannot hold one, and SQLite cuts a LIKE pattern at it, so the index
# holds this in its place on every backend (a log line or a sample of raw tokenizer
# output may carry one; the run's own file keeps it as written).
NUL_STANDIN = "\ufffd"
NUL_ESCAPE = b"\\u0000"  # how JSON writes one


def loads_line(line: bytes, nul_free: bool = False) -> Any:
    """Parse one line (NUL in its strings read as NUL_STANDIN); raises ValueError when it is
    not JSON or is nested too deeply. `nul_free`: the caller found no NUL_ESCAPE in a chunk
    that holds the line, so it is not looked for again."""
    if nul_free or NUL_ESCAPE not in line:
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            return _loads_exact(line)
    try:  # rare: only then is the value walked
        return without_nul(_loads_any(line))
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None


def _loads_any(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return _loads_exact(line)


def _loads_exact(line: bytes) -> Any:
    """The standard library's parse, for the NaN / Infinity / -Infinity tokens of format
    v1 that orjson refuses."""
    try:
        return json.loads(line)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None


def without_nul(value: Any) -> Any:
    """`value` with NUL_STANDIN for each NUL in its strings, keys included."""
    if isinstance(value, str):
        return value.replace("\x00", NUL_STANDIN)
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_nul(v) for v in value]
    return value
