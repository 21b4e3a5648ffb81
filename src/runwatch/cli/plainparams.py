"""Command-line values converted without pydantic where they are plain.

Typer (0.29 here) converts every option through a pydantic TypeAdapter: the first one a
command builds imports pydantic, a fifth of a short command's start-up. The values our
commands take are mostly plain — a string, a whole number in range, a decimal, a path, an
enum's value — and for those this gives what typer's own conversion gives; anything else
(a value it would refuse, a range it would clamp, lists, custom parsers…) goes to typer's
own conversion, so its results and error messages are typer's. The test
tests/foundation/test_cli_startup.py checks both against typer on the same inputs.

Typer's runtime conversion is internal: where it differs from what this expects (another
typer version), `use_plain_values` leaves the command as typer built it.
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Any

from typer import _click

try:
    from typer._coercion import build_runtime_param
    from typer._param_types import coerce_cli_path
    from typer.core import _TyperParameter
except ImportError:  # another typer: its own conversion stays
    _TyperParameter = None  # type: ignore[assignment,misc]

INT = re.compile(r"-?(0|[1-9][0-9]*)", re.ASCII)
FLOAT = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?", re.ASCII)
# ParameterInfo fields whose default is what plain conversion assumes
PLAIN_PATH = {"exists": False, "resolve_path": False, "path_type": None, "allow_dash": False}
UNSET = object()


class PlainRuntimeParam:
    """Converts one parameter's plain values itself, the rest through typer's conversion
    (built, and pydantic imported, only when such a value comes)."""

    def __init__(self, param: Any) -> None:
        self.descriptor = param.type_descriptor
        self._typer: Any = None

    def coerce(self, value: Any, param: Any, ctx: _click.Context) -> Any:
        if value is None and not (param.multiple or param.nargs == -1):
            return None
        if param.nargs == 1 and not param.multiple:
            plain = plain_value(value, self.descriptor, param, ctx)
            if plain is not UNSET:
                return plain
        if self._typer is None:
            self._typer = build_runtime_param(self.descriptor)
        return self._typer.coerce(value, param=param, ctx=ctx)


def plain_value(value: Any, descriptor: Any, param: Any = None, ctx: Any = None) -> Any:
    """`value` converted as typer would convert it, or UNSET where it is not plain."""
    info, annotation = descriptor.parameter_info, descriptor.annotation
    if info.parser is not None or descriptor.is_file:
        return UNSET
    if annotation is str:
        return value if isinstance(value, str) else UNSET
    if annotation is int or annotation is float:
        return _number(value, annotation, info.min, info.max)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        if isinstance(value, annotation):
            return value
        matches = [m for m in annotation if isinstance(value, str) and str(m.value) == value]
        return matches[0] if len(matches) == 1 else UNSET
    if annotation is Path and descriptor.is_path:
        if not isinstance(value, str | Path) or any(
                getattr(info, k, v) != v for k, v in PLAIN_PATH.items()):
            return UNSET
        return coerce_cli_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
    return UNSET


def _number(value: Any, kind: type, low: Any, high: Any) -> Any:
    typed = type(value) is kind or (kind is float and type(value) is int)
    if not typed and not (isinstance(value, str)
                          and (INT if kind is int else FLOAT).fullmatch(value)):
        return UNSET
    number = kind(value)
    if number != number or (low is not None and number < low) or (
            high is not None and number > high):
        return UNSET  # typer refuses (or clamps) it, in its own words
    return number


def use_plain_values(command: _click.Command) -> None:
    """Give each of the command's typer parameters (a group's: its own and its loaded
    commands') plain conversion, unless typer already converted one."""
    if _TyperParameter is None:
        return
    help_option = getattr(command, "_help_option", None)
    for param in [*command.params, *([help_option] if help_option else [])]:
        if isinstance(param, _TyperParameter) and getattr(param, "_runtime_param", 0) is None \
                and hasattr(param, "type_descriptor"):
            param._runtime_param = PlainRuntimeParam(param)  # type: ignore[assignment]
    for sub in getattr(command, "commands", {}).values():
        use_plain_values(sub)
