"""Rendering CLI results: Rich tables, JSON (NaN kept as a token), and --jq filters."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

import typer
from rich.console import Console
from rich.table import Table


class Output(StrEnum):
    table = "table"
    wide = "wide"
    json = "json"


def console() -> Console:
    return Console(highlight=False, soft_wrap=False)


def fail(message: str, hints: Sequence[str] = (), code: int = 2) -> typer.Exit:
    """Print an error (and hints) to stderr; return the Exit to raise."""
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    err.print(f"[bold red]error:[/] {message}", markup=True)
    for hint in hints:
        err.print(f"  {hint}", markup=False)
    return typer.Exit(code)


def dumps(data: Any) -> str:
    """JSON text; NaN and ±Infinity stay tokens as in the run files."""
    return json.dumps(data, ensure_ascii=False, default=str)


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
            sys.stdout.write(json.dumps(value, ensure_ascii=False))
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
    t = Table(title=title, header_style="bold", show_edge=False, pad_edge=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for row in rows:
        t.add_row(*[fmt_cell(v) for v in row])
    return t


def fmt_cell(value: Any) -> str:
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
    return str(value)


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"
