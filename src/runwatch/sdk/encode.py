"""Turning whatever a training loop records into JSON lines, one value at a time.

The fast path is `dumps_line` as is. When it refuses a record (a numpy scalar, a
`Path`, an integer past 64 bits, a key that is not a plain `str`, …) the record is
rebuilt from plain values: numpy and torch values through `tolist()`, paths and UUIDs
as strings, dates as ISO 8601, enums as their value, sets and tuples as lists,
dataclasses as objects, integers past 64 bits as floats, keys that are numbers as text,
and a lone surrogate in text (which UTF-8 cannot hold) as '?'.
A value with no JSON form is dropped from its object (or becomes null in a list, so
positions hold), counted, and warned about once per file and key; the rest of the
record is kept.

The writer's thread encodes a record after its call returned, when the loop may have
changed what the call was given (a running total kept in a tensor, a dict reused each
step): `snapshot` and `metric_now` take a value as it is at the call, and
`unchanging` tells the types that need neither.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import numbers
import os
import sys
import uuid
import warnings
from typing import Any

from runwatch.rundir.jsonl import dumps_line

# Deeper values are dropped: no reader needs them, and JSON libraries refuse them.
MAX_DEPTH = 64

_INT_MIN, _INT_END = -(2**63), 2**64


class _Drop:
    """The marker of a value that has no JSON form."""


_DROP = _Drop()


class Encoder:
    """Encodes records for one run, counting the values it had to drop."""

    def __init__(self) -> None:
        self.dropped = 0
        self._warned: set[tuple[str, str]] = set()

    def line(self, file: str, record: dict[str, Any]) -> bytes:
        """One JSON line for `record`, written to `file`."""
        try:
            return dumps_line(record)
        except (TypeError, ValueError, OverflowError, RecursionError):
            return dumps_line(self.plain(file, record))

    def checked(self, file: str, record: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """`record` itself when it encodes as is, else its plain form; and its size encoded."""
        try:
            return record, len(dumps_line(record))
        except (TypeError, ValueError, OverflowError, RecursionError):
            plain = self.plain(file, record)
            return plain, len(dumps_line(plain))

    def plain(self, file: str, record: dict[str, Any]) -> dict[str, Any]:
        """`record` made of JSON values only; each value that cannot be is dropped from
        its object (null in a list, so positions hold), counted and warned about."""
        out = self._value(file, "", record, 0)
        return out if isinstance(out, dict) else {}

    def _value(self, file: str, key: str, value: Any, depth: int) -> Any:
        t = type(value)
        if t is str:
            return _text(value)
        if t is float or t is bool or value is None:
            return value
        if t is int and _INT_MIN <= value < _INT_END:
            return value
        try:
            plain = _DROP if depth > MAX_DEPTH else self._convert(file, key, value, depth)
        except Exception:
            plain = _DROP
        if plain is _DROP:
            self._dropped(file, key, value)
        return plain

    def _convert(self, file: str, key: str, value: Any, depth: int) -> Any:
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                name = _key(k)
                if name is None:
                    self._dropped(file, repr(k), v)
                    continue
                plain = self._value(file, name, v, depth + 1)
                if plain is not _DROP:
                    out[name] = plain
            return out
        if isinstance(value, list | tuple | set | frozenset):
            items = _ordered(value) if isinstance(value, set | frozenset) else value
            return [None if (p := self._value(file, key, v, depth + 1)) is _DROP else p
                    for v in items]
        if isinstance(value, enum.Enum):
            return self._value(file, key, value.value, depth + 1)
        if isinstance(value, str):
            return _text(str(value))
        if isinstance(value, int):  # past 64 bits, or a subclass
            return float(value) if type(value) is int else self._value(file, key, int(value),
                                                                         depth)
        if isinstance(value, os.PathLike):
            path = os.fspath(value)
            return path if isinstance(path, str) else _DROP
        if isinstance(value, dt.datetime | dt.date | dt.time):
            return value.isoformat()
        if isinstance(value, uuid.UUID):
            return str(value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._value(file, key, dataclasses.asdict(value), depth + 1)
        tolist = getattr(value, "tolist", None)  # numpy arrays and scalars, torch tensors
        if callable(tolist):
            return self._value(file, key, tolist(), depth + 1)
        if isinstance(value, numbers.Number):  # float subclasses, Decimal, Fraction
            return float(value)  # type: ignore[arg-type]
        return _DROP

    def _dropped(self, file: str, key: str, value: Any) -> None:
        self.dropped += 1
        if (file, key) in self._warned:
            return
        self._warned.add((file, key))
        warn(f"runwatch: {key!r} in {file} got {type(value).__name__} {_short(value)}, which "
             "could not be encoded as JSON; such values are dropped (counted in "
             "run.dropped_values)")


# Values of these types cannot change: a list of only these is copied whole at once.
_SCALARS = frozenset({str, float, int, bool, type(None)})


def unchanging(kind: type) -> bool:
    """Whether a value of type `kind` stays as it was made: numbers and text, numpy's
    scalars too (an array or a tensor does not)."""
    return issubclass(kind, int | float | str) or any(
        c.__name__ == "generic" and c.__module__ == "numpy" for c in kind.__mro__)


def metric_now(value: Any) -> Any:
    """A metric value that may change after log() returns, as it is now: a number (what
    the writer would make of it), or, for a tensor on a device, a copy of it
    (`detach().clone()`, as float() would wait for the device); a value that is no number
    as it is (the writer drops it)."""
    try:
        if _is_tensor(value) and not getattr(value, "is_cpu", False):
            return value.detach().clone()
        if type(value) is not bool and not isinstance(value, str) and hasattr(value, "__float__"):
            return float(value)
    except Exception:
        pass  # the writer's float() meets the same and drops the value
    return value


def snapshot(value: Any, depth: int = 0) -> Any:
    """`value` as it is now, for a record encoded later: containers copied, an array
    copied, a tensor copied by `detach().clone()` (which does not wait for its device), a
    dataclass as an object of its fields; a value that cannot change (a number, text, a
    path) or of another kind as it is."""
    t = type(value)
    if t is str or t is float or t is int or t is bool or value is None or depth > MAX_DEPTH:
        return value  # the encoder drops a value nested deeper than MAX_DEPTH
    try:
        if isinstance(value, dict):
            return {k: snapshot(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list | tuple):
            if _SCALARS.issuperset(map(type, value)):  # token ids, rewards: one copy in C
                return list(value) if isinstance(value, list) else value
            items = [snapshot(v, depth + 1) for v in value]
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, set):
            return set(value)  # its items are hashable, so as good as unchanging
        if _is_tensor(value):
            return value.detach().clone()
        if callable(getattr(value, "tolist", None)) and callable(getattr(value, "copy", None)):
            return value.copy()  # a numpy array
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: snapshot(getattr(value, f.name), depth + 1)
                    for f in dataclasses.fields(value)}
    except Exception:
        pass  # the encoder meets the same and drops the value
    return value


def _is_tensor(value: Any) -> bool:
    return callable(getattr(value, "detach", None)) and callable(getattr(value, "clone", None))


def _key(key: Any) -> str | None:
    """The JSON key for a dict key: strings and numbers as text; None for others."""
    if isinstance(key, enum.Enum):
        key = key.value
    if isinstance(key, str):
        return _text(str(key))
    if isinstance(key, int | float) and not isinstance(key, bool):
        return str(key)
    return None


def _text(value: str) -> str:
    """`value`, with any lone surrogate (text no UTF-8 encoder takes) replaced by '?'."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "replace").decode("utf-8")
    return value


def _ordered(values: set[Any] | frozenset[Any]) -> list[Any]:
    try:
        return sorted(values)
    except TypeError:
        return list(values)


def _short(value: Any) -> str:
    try:
        return f"{value!r:.60}"
    except Exception:
        return "(unprintable)"


def warn(message: str) -> None:
    """Warn from the writer thread; a warnings filter set to "error" must not stop it, so
    the message then goes to stderr."""
    try:
        warnings.warn(message, RuntimeWarning, stacklevel=2)
    except Exception:
        print(message, file=sys.stderr)
