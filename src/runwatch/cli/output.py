"""Rendering CLI results: Rich tables, JSON (NaN kept as a token), and --jq filters.

Run data is untrusted text: every string this module prints shows the control characters
a terminal would act on (escape and OSC sequences, carriage returns, bidirectional
overrides) as escapes, and table cells and `line()` parts are never read as Rich markup.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import sys
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

# C0 controls but newline and tab, DEL, C1 controls, and the bidirectional marks and overrides
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# What JSON leaves raw among those: DEL, C1 and the bidirectional characters
JSON_UNSAFE = re.compile(r"[\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


class Output(StrEnum):
    table = "table"
    wide = "wide"
    json = "json"


def escape_controls(text: str) -> str:
    """`text` with each control character a terminal would act on written as an escape."""
    return UNSAFE.sub(lambda m: _escape_char(m.group()), text)


def _escape_char(c: str) -> str:
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def _json_safe(text: str) -> str:
    # these characters can stand only inside JSON strings, where \uXXXX means the same
    return JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class SafeConsole(Console):
    """A Rich console that escapes control characters in every string it prints."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(escape_controls(text), **kwargs)


def console(stderr: bool = False) -> Console:
    return SafeConsole(stderr=stderr, highlight=False, soft_wrap=stderr, emoji=False)


def text(value: Any, style: str = "") -> Text:
    """A value of run data as Rich text: formatted by `fmt_cell`, escaped, never markup."""
    return Text(fmt_cell(value), style=style)


def line(*parts: Any, style: str = "") -> None:
    """Print one line to stdout: `Text` parts as they are, any other part as `text()`.
    It is never broken at the console's width (a printed command stays one line)."""
    console().print(Text.assemble(*[p if isinstance(p, Text) else text(p) for p in parts],
                                  style=style), soft_wrap=True)


def fail(message: str, hints: Sequence[str] = (), code: int = 2) -> typer.Exit:
    """Print an error (and hints) to stderr; return the Exit to raise."""
    err = console(stderr=True)
    err.print(Text.assemble(Text("error:", style="bold red"), " ", text(message)))
    for hint in hints:
        err.print(text(f"  {hint}"))
    return typer.Exit(code)


def runwatch_command(*words: str, folder: Path | None = None, db: str | None = None) -> str:
    """A `runwatch` command line to print as a next step, quoted to run as printed, with
    `--dir FOLDER` and `--db DB` when given."""
    where = (["--dir", str(folder)] if folder is not None else []) + (["--db", db] if db else [])
    return shlex.join(["runwatch", *words, *where])


def dumps(data: Any) -> str:
    """JSON text; NaN and ±Infinity stay tokens as in the run files."""
    return _json_safe(json.dumps(data, ensure_ascii=False, default=str))


def emit(data: Any, output: Output, jq_expr: str | None, table: Callable[[bool], None]) -> None:
    """Show `data` as a table (via `table(wide)`), JSON, or the result of a jq filter."""
    if jq_expr:
        run_jq(jq_expr, data)
    elif output is Output.json:
        sys.stdout.write(dumps(data))
        sys.stdout.write("\n")
    else:
        table(output is Output.wide)


def run_jq(expr: str, data: Any) -> None:
    import jq

    try:
        program = jq.compile(expr)
    except ValueError as exc:
        raise fail(f"--jq expression {expr!r} does not compile: {exc}") from exc
    # jq has no NaN literal on input; the JSON null is what it would print for one anyway.
    text = json.dumps(_nan_to_none(data), default=str)
    try:
        for value in program.input_text(text):
            sys.stdout.write(_json_safe(json.dumps(value, ensure_ascii=False)))
            sys.stdout.write("\n")
    except ValueError as exc:
        raise fail(f"--jq expression {expr!r} failed: {exc}") from exc


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else value
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    return value


def make_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None
               ) -> Table:
    """A table of run data: every cell is `text()`, so shown as it is, escaped."""
    t = Table(title=text(title, "table.title") if title else None, header_style="bold",
              show_edge=False, pad_edge=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for row in rows:
        t.add_row(*[v if isinstance(v, Text) else text(v) for v in row])
    return t


def fmt_cell(value: Any) -> str:
    """A value as table text; control characters in it are escaped (see escape_controls)."""
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Inf" if value > 0 else "-Inf"
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
            return f"{value:.3e}"
        return f"{value:.4g}"
    return escape_controls(str(value))


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"
