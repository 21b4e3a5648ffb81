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
import shutil
import sys
from collections.abc import Callable, Sequence
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from runwatch.cli.program import runwatch_words

if TYPE_CHECKING:
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
    # these characters can stand only inside JSON strings, where \uXXXX means the same;
    # ASCII text without DEL holds none (two quick scans, where the regex takes 15 ms over
    # the 1.7 MB of a comparison's JSON)
    if text.isascii() and "\x7f" not in text:
        return text
    return JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


@cache
def _safe_console() -> type[Console]:
    # Rich loads with the first thing printed through it: `-o json` never needs it
    from rich.console import Console

    class SafeConsole(Console):
        """A Rich console that escapes control characters in every string it prints."""

        def render_str(self, text: str, **kwargs: Any) -> Text:
            return super().render_str(escape_controls(text), **kwargs)

    return SafeConsole


def console(stderr: bool = False, width: int | None = None) -> Console:
    return _safe_console()(stderr=stderr, highlight=False, soft_wrap=stderr, emoji=False,
                           width=width)


def terminal_width() -> int:
    """The width tables fit: $COLUMNS, else the terminal's, else 80."""
    return shutil.get_terminal_size(fallback=(80, 24)).columns


def text(value: Any, style: str = "") -> Text:
    """A value of run data as Rich text: formatted by `fmt_cell`, escaped, never markup."""
    from rich.text import Text

    return Text(fmt_cell(value), style=style)


def line(*parts: Any, style: str = "") -> None:
    """Print one line to stdout: `Text` parts as they are, any other part as `text()`.
    It is never broken at the console's width (a printed command stays one line)."""
    from rich.text import Text

    console().print(Text.assemble(*[p if isinstance(p, Text) else text(p) for p in parts],
                                  style=style), soft_wrap=True)


def para(*parts: Any, style: str = "") -> None:
    """Print a paragraph to stdout, its parts as `line()` takes them, wrapped at spaces to
    the terminal's width."""
    from rich.text import Text

    console(width=terminal_width()).print(
        Text.assemble(*[p if isinstance(p, Text) else text(p) for p in parts], style=style))


def fail(message: str, hints: Sequence[str] = (), code: int = 2) -> typer.Exit:
    """Print an error (and hints) to stderr; return the Exit to raise."""
    from rich.text import Text

    err = console(stderr=True)
    err.print(Text.assemble(Text("error:", style="bold red"), " ", text(message)))
    for hint in hints:
        err.print(text(f"  {hint}"))
    return typer.Exit(code)


def runwatch_command(*words: str, folder: Path | None = None, db: str | None = None) -> str:
    """A `runwatch` command line to print as a next step, quoted to run as printed (with
    `.venv/bin/runwatch` where `runwatch` is not on PATH), with `--dir FOLDER` and `--db DB`
    when given."""
    where = (["--dir", str(folder)] if folder is not None else []) + (["--db", db] if db else [])
    return shlex.join([*runwatch_words(), *words, *where])


def dumps(data: Any) -> str:
    """JSON text; NaN and ±Infinity stay tokens as in the run files."""
    return _json_safe(json.dumps(data, ensure_ascii=False, default=str))


def emit(data: Any, output: Output, jq_expr: str | None, table: Callable[[bool], None],
         raw: bool = False) -> None:
    """Show `data` as a table (via `table(wide)`), JSON, or the result of a jq filter
    (strings written raw with `raw`, as `jq -r` does)."""
    if raw and not jq_expr:
        raise fail("-r writes the strings a --jq filter gives raw: give --jq EXPR too",
                   ["e.g. --jq '.[].name' -r"])
    if jq_expr:
        run_jq(jq_expr, data, raw)
    elif output is Output.json:
        sys.stdout.write(dumps(data))
        sys.stdout.write("\n")
    else:
        table(output is Output.wide)


def run_jq(expr: str, data: Any, raw: bool = False) -> None:
    import jq

    try:
        program = jq.compile(expr)
    except ValueError as exc:
        raise fail(f"--jq expression {expr!r} does not compile: {exc}") from exc
    # jq has no NaN or Infinity literal on input: it reads NaN as null and Infinity as its
    # largest float, a finite number that `runwatch import` would keep; null for all three
    # is what the README promises and what the importer reads back as NaN.
    text = json.dumps(_non_finite_to_none(data), default=str)
    try:
        for value in program.input_text(text):
            if raw and isinstance(value, str):  # shown as it is, but for terminal controls
                sys.stdout.write(escape_controls(value))
            else:
                sys.stdout.write(_json_safe(json.dumps(value, ensure_ascii=False)))
            sys.stdout.write("\n")
    except ValueError as exc:
        raise fail(f"--jq expression {expr!r} failed: {exc}") from exc


def _non_finite_to_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _non_finite_to_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_non_finite_to_none(v) for v in value]
    return value


# Between two columns: a space, the rule, a space (the tables have no outer edge).
GAP = 3
# The narrowest a column of prose is wrapped to, and any other text column cut to, before
# a column is left out instead.
MIN_PROSE = 20
MIN_TEXT = 16


def make_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None,
               *, width: int | None = None, wide: bool = False, prose: Sequence[str] = ()
               ) -> Table:
    """A table of run data: every cell is `text()`, so shown as it is, escaped.

    It fits `width` (the terminal's by default) without breaking a word: a column named in
    `prose` wraps at spaces, any other text is cut with an ellipsis, numbers are shown
    whole; `wide` keeps every cell whole, however wide the table gets."""
    return fit_table(columns, rows, title, width=width, wide=wide, prose=prose)[0]


def print_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None,
                *, wide: bool = False, drop: Sequence[str] = (), prose: Sequence[str] = ()
                ) -> list[str]:
    """Print a table that fits the terminal (see make_table): first the columns in `drop`
    (in that order) are left out while it does not fit, and a line says what -o wide adds.
    Returns the columns left out."""
    table, dropped, needs = fit_table(columns, rows, title, wide=wide, drop=drop,
                                      prose=prose)
    console(width=max(needs, terminal_width())).print(table)
    if dropped:
        line(f"-o wide adds {', '.join(dropped)}")
    return dropped


def fit_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None,
              *, width: int | None = None, wide: bool = False, drop: Sequence[str] = (),
              prose: Sequence[str] = ()) -> tuple[Table, list[str], int]:
    """The table (see print_table), the columns it leaves out, and the width it needs."""
    from rich.table import Table
    from rich.text import Text

    room = width or terminal_width()
    cells = [[v if isinstance(v, Text) else text(v) for v in row] for row in rows]
    numeric = [all(isinstance(row[i], int | float) or row[i] is None for row in rows)
               for i in range(len(columns))]
    natural = [max([_longest_line(columns[i])] + [_longest_line(row[i].plain) for row in cells])
               for i in range(len(columns))]
    floors = [natural[i] if numeric[i] else min(natural[i], MIN_PROSE if columns[i] in prose
                                                 else MIN_TEXT) for i in range(len(columns))]
    keep = list(range(len(columns)))
    dropped: list[str] = []
    if not wide:
        for name in drop:
            if _width([floors[i] for i in keep]) <= room:
                break
            if name in columns and columns.index(name) in keep and len(keep) > 1:
                keep.remove(columns.index(name))
                dropped.append(name)
    widths = {i: natural[i] for i in keep}
    if not wide:  # prose wraps first, then text is cut
        for group in ([i for i in keep if columns[i] in prose],
                      [i for i in keep if columns[i] not in prose and not numeric[i]]):
            excess = _width(list(widths.values())) - room
            if excess > 0 and group:
                _shrink(widths, {i: floors[i] for i in group}, excess)
    t = Table(title=text(title, "table.title") if title else None, header_style="bold",
              show_edge=False, pad_edge=False)
    for i in keep:
        wrap = columns[i] in prose
        t.add_column(columns[i], width=widths[i], no_wrap=not wrap, overflow="ellipsis",
                     justify="left")
    for row in cells:
        t.add_row(*[row[i] for i in keep])
    return t, dropped, _width(list(widths.values()))


def _longest_line(s: str) -> int:
    from rich.cells import cell_len

    return max(cell_len(part) for part in s.split("\n"))


def _width(widths: list[int]) -> int:
    return sum(widths) + GAP * max(len(widths) - 1, 0)


def _shrink(widths: dict[int, int], floors: dict[int, int], excess: int) -> None:
    """Narrow the widest of the columns in `floors` (none below its floor) until `excess`
    is taken up or all are at their floors."""
    group = list(floors)
    lo, hi = 0, max(widths[i] for i in group)
    target = sum(widths[i] for i in group) - excess
    while lo < hi:  # the highest cap under which the group fits its share
        cap = (lo + hi + 1) // 2
        if sum(max(floors[i], min(widths[i], cap)) for i in group) <= target:
            lo = cap
        else:
            hi = cap - 1
    for i in group:
        widths[i] = max(floors[i], min(widths[i], lo))


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


# Money below this shows as "< 0.0001" (a cent's hundredth: nothing anyone pays).
LEAST_MONEY = 0.0001


def counted(n: int, noun: str) -> str:
    """`n` of `noun`, plural but for one: "1 step", "3 steps"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def fmt_money(value: float | None) -> str:
    """An amount of money (spend, a rate) as table text, in fixed notation: "< 0.0001"
    below LEAST_MONEY, else four significant digits with no trailing zeros (0.000273,
    0.05, 12.35, 1235, 12346). web/src/format.ts's fmtSpend shows it alike."""
    if value is None or not math.isfinite(value):
        return fmt_cell(value)
    if value == 0:
        return "0"
    if 0 < value < LEAST_MONEY:
        return f"< {LEAST_MONEY:.4f}"
    digits = max(0, 3 - math.floor(math.log10(abs(value))))
    text = f"{value:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_duration(seconds: float | None) -> str:
    """A duration to the nearest second, as the web app shows it (0.98 s is "1s")."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"
