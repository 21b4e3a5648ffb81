"""Reading values for the index's columns defensively: what a number, a time or an id may be.

Records and manifests come from files anyone who can write the runs folder wrote, or
from HTTP clients; a value of the wrong kind must become a problem of its record, never
an exception of the ingest (an int beyond any float, one beyond 64 bits, deep nesting).
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_preview = reprlib.Repr()
_preview.maxlevel = 2
_preview.maxstring = 40
_preview.maxother = 40


def to_float(value: Any) -> float | None:
    """An int, bool or float as a float (NaN and ±Infinity kept); None for anything else,
    and for an integer too large for a float."""
    t = type(value)
    if t is float:
        return float(value)
    if t is int or t is bool:
        try:
            return float(value)
        except OverflowError:
            return None
    return None


def finite(value: Any) -> float | None:
    """An int or float `value` as a finite float, or None."""
    number = None if type(value) is bool else to_float(value)
    return number if number is not None and math.isfinite(number) else None


def is_int64(value: Any) -> bool:
    """True for an int (not a bool) that a 64-bit integer column holds."""
    return type(value) is int and INT64_MIN <= value <= INT64_MAX


def parse_int64(text: str) -> int | None:
    """The whole number `text` writes, if a 64-bit integer column holds it; else None
    (a cursor or step a client sent: one beyond the column is no step or seq stored)."""
    try:
        value = int(text)
    except ValueError:
        return None
    return value if is_int64(value) else None


def preview(value: Any) -> str:
    """A short text of any value, however long or deeply nested, for a problem message."""
    if isinstance(value, str):
        return value[:40]
    return str(_preview.repr(value))[:40]
