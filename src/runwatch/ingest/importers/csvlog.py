"""Import a table of per-step metrics: a CSV file (one row per step), and the table
reader the W&B history importer shares.

A `step` column (or `global_step`, `train/global_step`, W&B's `_step`, a chart export's
`Step`) gives each row its step; without one the row index does. Empty cells (and `NA`,
`null`, `None`) are missing values; `nan`/`inf` cells are kept as non-finite values.
Columns that hold only text are ignored (a `note:` names every column left out or
renamed); a column that mixes numbers and text is refused,
and so is one of numbers written with a decimal comma, a name the header gives twice, a
column with values and no name, and a step the run format does not take (negative). A row
whose `split` (or `mode`) column says it is held out (`val`, `eval`, `test`, …) has its
metrics under `val/` names.
A `ts` column gives each row its time (Unix seconds or ISO 8601).
W&B exports are recognised by their `_step`/`_runtime`/`_timestamp` columns, or, for a
chart panel's CSV, by `Step` and `<run> - <metric>` columns (with `__MIN`/`__MAX` bands);
only in a W&B export are the other columns starting with `_` W&B's own, left out.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runwatch.analysis.timing import dated
from runwatch.ingest.importers import jsonl, trl
from runwatch.ingest.importers.common import (
    SPLIT_FIELDS,
    Imported,
    MadeTimes,
    SourceError,
    as_held_out,
    checked_step,
    elapsed_clock,
    held_out,
    is_number,
)

WANDB_COLUMNS = frozenset({"_step", "_runtime", "_timestamp"})
STEP_COLUMNS = ("step", "global_step", "train/global_step", "_step", "Step", "iteration")
MISSING = frozenset({"", "na", "n/a", "null", "none", "-"})
NON_FINITE = {"nan": math.nan, "inf": math.inf, "+inf": math.inf, "-inf": -math.inf,
              "infinity": math.inf, "+infinity": math.inf, "-infinity": -math.inf}
BAND_SUFFIXES = ("__MIN", "__MAX")
# A chart panel's CSV names its columns "<run name> - <metric>".
RUN_SEPARATOR = " - "
# A number as a spreadsheet in a comma-decimal locale writes it: 2,5 or -1,5E-3
DECIMAL_COMMA = re.compile(r"[+-]?[0-9]*,[0-9]+(?:[eE][+-]?[0-9]+)?")
# The earliest time a `ts` column's number is taken for (2000-01-01 UTC): a smaller
# number in a column of that name counts something else (a timestep)
EARLIEST_TS = 946_684_800.0
# A whole number as written: read as an int, not through a float
WHOLE = re.compile(r"[+-]?[0-9]+")
# A note names at most this many columns, then says how many more
NOTE_NAMES = 10


def read(path: Path, step_column: str | None = None) -> Imported:
    """Read a CSV (or TSV) file of per-step metrics."""
    written, rows, delimiter = _read_table(path)
    if not written:
        raise SourceError(f"{path} has no header row: the first line must name the columns")
    header = [name.strip() for name in written]
    notes = []
    spaced = [(w, h) for w, h in zip(written, header, strict=True) if h and w != h]
    if spaced:
        notes.append(f"{_some(spaced, _read_as)}: the spaces around a name in the header are "
                     "not part of it")
    _check_header(header, rows, path)
    if header[0] == "" and any(row and _cell(row[0]) is not None for row in rows):
        notes.append("the first column, which has no name, is not imported: it is pandas's "
                     "index, the row number")
    trainer = "wandb" if WANDB_COLUMNS & set(header) else "csv"
    renamed = _chart_export_names(header, path)
    # None: not imported (a column without a name _check_header let pass, a chart's band)
    names = [name or None for name in header]
    if renamed is not None:
        trainer = "wandb"
        names = [renamed.get(name) for name in header]
        notes.append(_chart_note(header, renamed))
    header = [n for n in names if n is not None]
    _check_header(header, [], path)  # a chart's metric names
    # a step column's whole numbers are read as written: through a float, a step past
    # 2**53 would come back another (and two steps one)
    steps = {step_column, *STEP_COLUMNS}
    table = [{n: (_step_cell if n in steps else _cell)(v)
              for n, v in zip(names, row, strict=False) if n is not None} for row in rows]
    imported = records_from_table(header, table, path, trainer, step_column, first_line=2,
                                  decimal_commas=delimiter != ",")
    imported.notes[:0] = notes
    return imported


def _check_header(header: list[str], rows: list[list[str]], path: Path) -> None:
    """Refuse a header that would lose a column: a name given twice (a row holds one value
    of a name), or no name for a column that holds values, except pandas's index (a first
    column without a name, of whole numbers increasing row by row: the row number)."""
    twice = [name for name, n in Counter(h for h in header if h).items() if n > 1]
    if twice:
        raise SourceError(f"{path}: the header names {', '.join(map(repr, twice))} more than "
                          "once, and a run holds one metric of a name: rename or delete "
                          "the other columns")
    for col, name in enumerate(header):
        if name or (col == 0 and _is_index([_cell(row[0]) if row else None for row in rows])):
            continue
        filled = next((n for n, row in enumerate(rows, start=2)
                       if col < len(row) and _cell(row[col]) is not None), None)
        if filled is not None:
            raise SourceError(f"{path}: column {col + 1} has no name in the header but holds "
                              f"values (line {filled}: {rows[filled - 2][col][:40]!r}): name "
                              "it in the header, or delete it (pandas writes its index so: "
                              "to_csv(index=False) leaves it out)")


def records_from_table(columns: Sequence[str], table: list[dict[str, Any]], path: Path,
                       trainer: str, step_column: str | None = None, first_line: int = 1,
                       decimal_commas: bool = False) -> Imported:
    """Turn rows of {column: number | text | None} into an `Imported` run: pick the step
    column, keep numeric columns as metrics, W&B's wall clock as the records' time.
    `decimal_commas`: the file separates its cells with another character than ',', so a
    cell such as 2,5 is a number in a comma-decimal locale's writing (refused, saying so)."""
    if not table:
        raise SourceError(f"{path} holds no rows of metrics to import")
    unnamed = next((i for i, row in enumerate(table) if row.get("") is not None), None)
    if unnamed is not None:
        raise SourceError(f"{path}: line {unnamed + first_line} has a value with an empty "
                          "name; name it, or delete it")
    numeric = _numeric_columns(columns, table, path, first_line, decimal_commas)
    if step_column and step_column not in columns:
        raise SourceError(f"{path} has no column {step_column!r}; pass --step-column one "
                          f"of its number columns: {', '.join(numeric) or '(none)'}")
    step_col = _step_column(step_column, numeric, table, path)
    # W&B's _step, _runtime, …; any other table keeps a column whose name starts with `_`
    internal = {c for c in numeric if c.startswith("_")} if trainer == "wandb" else set()
    # "step" and "ts" name a record's own fields, never a metric.
    metrics = [c for c in numeric if c not in (step_col, "step", "ts") and c not in internal]
    if not metrics:
        raise SourceError(f"{path} has no numeric metric columns (columns: "
                          f"{', '.join(c for c in columns if c) or 'none'})")
    records: list[dict[str, Any]] = []
    runtimes: dict[int, float] = {}
    # W&B's clock, else a `ts` column (runwatch's own `runs metrics -o csv` writes one)
    clock = "_timestamp" if "_timestamp" in numeric else (
        "ts" if "ts" in columns and step_col != "ts" else None)
    for index, row in enumerate(table):
        where = f"{path}: line {index + first_line}"
        step = index if step_col is None else checked_step(
            int(row[step_col]), where, f"fix or delete that row, or pass --step-column "
            f"with another column than {step_col!r}")
        values = {c: row[c] for c in metrics if is_number(row.get(c))}
        if not values:
            continue
        if held_out(row):  # a `split`/`mode` column saying the row is validation
            values = as_held_out(values, where)
        if clock == "_timestamp" and _finite(row.get("_timestamp")):
            values["ts"] = float(row["_timestamp"])
        elif clock == "ts" and row.get("ts") is not None:
            values["ts"] = _row_time(row["ts"], where)
        if _finite(row.get("_runtime")):
            runtimes.setdefault(step, float(row["_runtime"]))
        # Train and eval rows W&B (or a script) wrote for one step become one record,
        # at the time of the first.
        if records and records[-1]["step"] == step and \
                not (records[-1].keys() & values.keys()) - {"ts"}:
            records[-1].update({k: v for k, v in values.items() if k != "ts"})
        else:
            records.append({"step": step, **values})
    times = _runtime_clock(records, runtimes)
    if clock == "ts":
        _fill_times(records)
    keys = {k.removeprefix("train/") for r in records for k in r}
    # W&B's `_runtime` is used where it times the run (no `_timestamp`), and `_step` where
    # it is the step: otherwise they are left out, and said so as any other column
    used = {*metrics, step_col, clock, *SPLIT_FIELDS, "_runtime" if times else None}
    notes = _left_out_notes(columns, table, numeric, trainer == "wandb", used, step_col)
    return Imported(trainer, guess_method(keys), records, {}, str(path), notes, times)


def _left_out_notes(columns: Sequence[str], table: list[dict[str, Any]], numeric: list[str],
                    wandb: bool, used: set[str | None], step_col: str | None) -> list[str]:
    """A note for each kind of column that holds values and is not imported (none is
    left out in silence): W&B's step where another column is the step, W&B's own, text
    only, or named like a record's own field."""
    left = [c for c in dict.fromkeys(columns) if c and c not in used
            and any(row.get(c) is not None for row in table)]
    steps = [c for c in left if wandb and c == "_step" and c in numeric]
    own = [c for c in left if wandb and c.startswith("_") and c not in steps]
    rest = [c for c in left if c not in steps and c not in own]
    step_is = "the row number" if step_col is None else repr(step_col)
    why = [(steps, f"the run's step is {step_is} (--step-column picks another)"),
           (own, "in a W&B export, a column whose name starts with '_' is W&B's own"),
           ([c for c in rest if c not in numeric], "it holds text, not numbers"),
           ([c for c in rest if c in numeric],
            "a record's own field has that name; rename the column to import it")]
    return [f"{_some(names, repr)} {'is' if len(names) == 1 else 'are'} not imported: {reason}"
            for names, reason in why if names]


def _chart_note(header: list[str], renamed: dict[str, str]) -> str:
    """What reading a W&B chart export did to its columns."""
    series = [(h, renamed[h]) for h in header if h in renamed and h != "Step"]
    bands = [h for h in header if h.endswith(BAND_SUFFIXES)]
    said = f"{_some(series, _read_as)} (a W&B chart "
    return said + ("export names a column by its run and metric)" if not bands else
                   f"export names a column by its run and metric), and "
                   f"{_some(bands, repr)} (the chart's min and max bands) are not imported")


def _read_as(names: tuple[str, str]) -> str:
    return f"column {names[0]!r} is read as {names[1]!r}"


def _some(items: Sequence[Any], show: Callable[[Any], str]) -> str:
    """The first NOTE_NAMES of `items` as `show` writes them, and how many more."""
    shown = ", ".join(show(item) for item in items[:NOTE_NAMES])
    more = len(items) - NOTE_NAMES
    return shown if more <= 0 else f"{shown} and {more} more"


def guess_method(keys: set[str]) -> str:
    """sft, dpo or grpo from the metric names (HF's `train/` prefix already removed)."""
    method = trl.guess_method(keys)
    if method != "sft":
        return method
    framework, rl_method = jsonl.guess(keys)
    if framework != "jsonl":
        return rl_method
    if any("reward" in k or "rew_" in k for k in keys):
        return "grpo"
    return "sft"


def _read_table(path: Path) -> tuple[list[str], list[list[str]], str]:
    """The header (as written: with any spaces around its names), the rows and the
    character that separates the cells."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"cannot read {path} as text: {exc}") from exc
    delimiter = "\t" if path.suffix == ".tsv" else ","
    first = text.split("\n", 1)[0]
    if delimiter == "," and first.count(";") > first.count(","):
        delimiter = ";"
    try:
        # from the text itself, not its lines: a quoted cell keeps its line breaks (a
        # header name "a\nb", as `runs metrics -o csv` writes a key with one, came back "ab")
        lines = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    except csv.Error as exc:
        raise SourceError(f"{path} is not a readable CSV file: {exc}") from exc
    lines = [line for line in lines if any(cell.strip() for cell in line)]
    if not lines:
        return [], [], delimiter
    header = lines[0]
    for number, line in enumerate(lines[1:], start=2):
        if len(line) > len(header):
            raise SourceError(f"{path}: line {number} has {len(line)} cells but the header "
                              f"names {len(header)} columns")
    return header, lines[1:], delimiter


def _cell(text: str) -> float | str | None:
    value = text.strip()
    if value.lower() in MISSING:
        return None
    if value.lower() in NON_FINITE:
        return NON_FINITE[value.lower()]
    try:
        return float(value)
    except ValueError:
        return value


def _step_cell(text: str) -> float | int | str | None:
    """A cell of a step column: a whole number as an int, exactly as written."""
    value = text.strip()
    if WHOLE.fullmatch(value):
        return int(value)
    return _cell(text)


def _chart_export_names(header: list[str], path: Path) -> dict[str, str] | None:
    """A W&B chart export's columns renamed to the metric names, band columns dropped;
    None when `header` is not such an export."""
    if not header or header[0] != "Step":
        return None
    series = [h for h in header[1:] if h and not h.endswith(BAND_SUFFIXES)]
    if not series or not all(RUN_SEPARATOR in h for h in series):
        return None
    runs = sorted({h.split(RUN_SEPARATOR, 1)[0] for h in series})
    if len(runs) > 1:
        raise SourceError(f"{path} is a W&B chart export of {len(runs)} runs "
                          f"({', '.join(runs)}): export the chart of one run, or delete "
                          "the other runs' columns")
    return {"Step": "Step", **{h: h.split(RUN_SEPARATOR, 1)[1] for h in series}}


def _numeric_columns(columns: Sequence[str], table: list[dict[str, Any]], path: Path,
                     first_line: int, decimal_commas: bool) -> list[str]:
    """The columns whose values are numbers (or missing); text-only columns are left out,
    a column mixing numbers and text is refused, and so, in a file whose cells are not
    separated by commas (`decimal_commas`), is one of numbers written with a decimal comma
    (2,5), which would otherwise be left out as text. In a comma-separated file a quoted
    "0,1" is text (a list of devices, a thousands separator), left out as text is."""
    kept: list[str] = []
    for name in dict.fromkeys(c for c in columns if c):
        cells = [(i, row.get(name)) for i, row in enumerate(table)]
        has_number = any(is_number(v) for _, v in cells)
        texts = [(i, v) for i, v in cells if v is not None and not is_number(v)]
        commas = [(i, v) for i, v in texts
                  if decimal_commas and DECIMAL_COMMA.fullmatch(str(v))]
        if commas and (has_number or len(commas) == len(texts)):
            i, value = commas[0]
            raise SourceError(f"{path}: column {name!r} holds a number written with a decimal "
                              f"comma (line {i + first_line}: {str(value)[:40]!r}), and only "
                              "a decimal point is read: export the file with '.' as the "
                              "decimal separator and no thousands separator, or delete that "
                              "column")
        if has_number and texts:
            i, value = texts[0]
            raise SourceError(f"{path}: column {name!r} mixes numbers and text (line "
                              f"{i + first_line}: {str(value)[:40]!r}); clean that column "
                              "or delete it")
        if has_number:
            kept.append(name)
    return kept


def _step_column(wanted: str | None, numeric: list[str], table: list[dict[str, Any]],
                 path: Path) -> str | None:
    """The column that numbers the rows: `wanted`, else the first known step column with
    a whole number in every row, else None (the row index). A `wanted` or `step` column
    without one is refused rather than skipped."""
    candidates = [wanted] if wanted else [c for c in STEP_COLUMNS if c in numeric]
    for name in candidates:
        values = [row.get(name) for row in table]
        if all(_whole(v) for v in values):
            return name
        if name in (wanted, "step"):
            bad = next(i for i, v in enumerate(values) if not _whole(v))
            raise SourceError(f"{path}: step column {name!r} has no whole number in data "
                              f"row {bad + 1} ({values[bad]!r}); pass another --step-column")
    return None


def _is_index(cells: list[Any]) -> bool:
    """Whether a column's cells are a row index: whole numbers, increasing row by row."""
    return all(_whole(v) for v in cells) and all(a < b for a, b in itertools.pairwise(cells))


def _row_time(value: Any, where: str) -> float:
    """A `ts` cell as Unix seconds: a number of them, or a date and time in ISO 8601
    (`2026-12-01T10:00:00Z`; one without a zone is UTC). Anything else is refused: the
    column names the record's own time, so it cannot be kept as a metric."""
    if is_number(value):
        if _finite(value) and float(value) >= EARLIEST_TS and dated(float(value)):
            return float(value)
    else:
        try:
            when = datetime.fromisoformat(str(value).strip())
        except ValueError:
            pass
        else:
            return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
    # a whole number as the file wrote it (the reader made 1767225600000 a float)
    shown = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    raise SourceError(f"{where}: column 'ts' holds {shown[:40]!r}, and a 'ts' column is "
                      "each row's time (Unix seconds since 2000 at the earliest, not "
                      "milliseconds, or an ISO 8601 date and time, as "
                      "`runwatch runs metrics -o csv` writes it): fix that cell, or rename "
                      "the column to import it as a metric")


def _fill_times(records: list[dict[str, Any]]) -> None:
    """Records of a `ts` column whose cell was empty take the time of the record before
    them (the first ones that of the first record with a time)."""
    known = next((r["ts"] for r in records if "ts" in r), None)
    if known is None:
        return
    for record in records:
        known = record.setdefault("ts", known)


def _finite(value: Any) -> bool:
    return is_number(value) and math.isfinite(value)


def _whole(value: Any) -> bool:
    return _finite(value) and float(value).is_integer()


def _runtime_clock(records: list[dict[str, Any]], runtimes: dict[int, float]
                   ) -> MadeTimes | None:
    """A W&B export without `_timestamp` still has `_runtime` (seconds since the run
    started): its records on a clock that keeps their spacing (common.elapsed_clock)."""
    return elapsed_clock(records, runtimes, "_runtime")
