"""`runwatch runs compare RUN BASELINE`: a supervised run's training loss against a
baseline's, window by window (runwatch.analysis.compare computes it, as for the API)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from runwatch.cli.context import open_reader
from runwatch.cli.numpyload import import_numpy
from runwatch.cli.options import DbOpt, DirOpt, JqOpt, OutOpt, RawOpt, RunArg, ServerOpt, TokenOpt
from runwatch.cli.output import Output, emit, fail, fmt_cell, para, print_table, text
from runwatch.cli.remote import remote_for

if TYPE_CHECKING:
    from pathlib import Path

    from runwatch.analysis.compare import Side
    from runwatch.store.plain import Reader

# The defaults of runwatch.analysis.compare, written out: importing it (numpy) here would
# slow every other command's start (a test checks that they agree).
WINDOW, MARGIN, SPIKE_FACTOR = 10, 0.03, 10.0
# A longer report shows these windows: the first and last few, the reported one and
# those around it, and those with a spike; -o json lists every one.
EDGE_ROWS = 5
NEAR_ROWS = 2
SPIKE_ROWS = 10
ALL_ROWS = 30
SPIKES_LISTED = 20
# What the API adds to its refusal of runs whose plans differ (the CLI says --across-plans).
ACROSS_PLANS_API = "; across_plans=true compares them anyway"


def read_side(db: Reader, ref: str, saved: Path | None = None) -> Side:
    """The run `ref` names, as the comparison reads it (exit 2 where it names no run, or
    several); its series saved in `saved` (beside a SQLite index) and read from there
    while the index holds the same points (the server reads through the same files)."""
    return read_sides(db, [ref], saved)[0]


def read_sides(db: Reader, refs: list[str], saved: Path | None = None) -> list[Side]:
    """The runs `refs` name, as `read_side` reads each (the first that names no run, or
    several, exits 2 before any series is read); the series of two runs not saved yet
    are read at once, each in a process of its own (analysis/compare.read_sides)."""
    from runwatch.analysis import compare as cmp
    from runwatch.store import plain, plain_series

    rows = []
    for ref in refs:
        try:
            rows.append(plain.resolve_run(db, ref))
        except plain.NoSuchRun as exc:
            hints = (["candidates:"] + [f"  {c}" for c in exc.candidates] if exc.candidates
                     else [])
            raise fail(str(exc), hints) from exc
    return cmp.read_sides(db, rows, plain_series.SavedSeries(saved))


def compare_cmd(
    run: RunArg,
    baseline: Annotated[str, typer.Argument(help="The baseline run: id, or a unique prefix "
                                            "of an id or name.")],
    directory: DirOpt = None, db: DbOpt = None, output: OutOpt = Output.table,
    jq: JqOpt = None, raw: RawOpt = False,
    window: Annotated[int, typer.Option(min=1, help="The number of steps averaged into each "
                                        "row.")] = WINDOW,
    margin: Annotated[float, typer.Option(min=0.0, help="The mean loss difference over a "
                                          "window above which the window is reported.")
                      ] = MARGIN,
    spike_factor: Annotated[float, typer.Option(
        "--spike-factor",
        help="How many times its run's median a gradient norm must be to count as a spike.")
    ] = SPIKE_FACTOR,
    across_plans: Annotated[bool, typer.Option(
        "--across-plans", help="Compare two runs whose configurations or base models "
        "differ.")] = False,
    server: ServerOpt = None, token: TokenOpt = None,
) -> None:
    """Compare the training loss of a supervised run with a baseline run's: the mean
    difference (run − baseline) over each window of steps, the steps where either run's
    gradient norm spiked, and the first full window whose mean differs by more than the
    margin. Runs whose plans differ are refused, with the differences, unless
    --across-plans."""
    remote = remote_for(server, token, directory, db)
    if remote is not None:  # the server compares them (GET /api/compare)
        report = remote.compare(run, baseline, window, margin, spike_factor, across_plans)
        if "error" in report:
            said = str(report["error"]).removesuffix(ACROSS_PLANS_API)
            raise _refused(said, report.get("differences"))
        emit(report, output, jq, lambda wide: show(report, wide), raw)
        return
    import_numpy()
    from runwatch.analysis import compare as cmp

    try:
        options = cmp.Options(window, margin, spike_factor, across_plans)
    except cmp.CompareError as exc:
        raise fail(str(exc)) from exc
    with open_reader(directory, db) as (reader, saved):
        sides = read_sides(reader, [run, baseline], saved)
    try:
        report = cmp.compare(sides[0], sides[1], options)
    except cmp.PlansDiffer as exc:
        raise _refused(str(exc), exc.differences) from exc
    except cmp.CompareError as exc:
        raise fail(str(exc)) from exc
    emit(report, output, jq, lambda wide: show(report, wide), raw)


def _refused(message: str, differences: list[dict[str, Any]] | None) -> typer.Exit:
    """Exit 2 with why two runs are not compared (and how their plans differ)."""
    if not differences:
        return fail(message)
    return fail(message, [f"{d['field']}: {_value(d['run'])} (run) vs "
                          f"{_value(d['baseline'])} (baseline)" for d in differences]
                + ["--across-plans compares them anyway"])


def _value(v: Any) -> str:
    return "(not set)" if v is None else fmt_cell(v)


def _division(d: dict[str, Any]) -> str:
    per_pass = "?" if d["sequences_per_pass"] is None else d["sequences_per_pass"]
    total = "?" if d["sequences_per_update"] is None else d["sequences_per_update"]
    return (f"{d['devices']} device(s) × {per_pass} sequence(s) a pass × "
            f"{d['accumulation']} pass(es) accumulated = {total} sequences per update")


def show(report: dict[str, Any], wide: bool) -> None:
    """The report as a terminal reads it."""
    run, base, opts = report["run"], report["baseline"], report["options"]
    para(text(run["name"], "bold"), " against the baseline ", text(base["name"], "bold"),
         f": {report['compared_steps']} steps compared"
         + (f" (steps {report['first_step']}–{report['last_step']})"
            if report["compared_steps"] else ""))
    plan = report["plan"]
    if plan["differences"]:
        para(text("the plans differ", "yellow"), " (compared with --across-plans): "
             + "; ".join(f"{d['field']} {_value(d['run'])} vs {_value(d['baseline'])}"
                         for d in plan["differences"]))
    elif plan["divided_differently"]:
        para("same plan, and the same sequences per update divided differently:")
        para("  run:      ", _division(run["division"]))
        para("  baseline: ", _division(base["division"]))
    else:
        para("same plan: data set, seed, base model, sequences per update and config")
    for problem in report["problems"]:
        para(text("warning: ", "yellow"), problem)
    if report["nonfinite_steps"]:
        n = len(report["nonfinite_steps"])
        para(f"{n} step(s) where a loss is NaN or infinite are left out (first: step "
             f"{report['nonfinite_steps'][0]})")
    windows = report["windows"]
    if windows:
        para(f"mean loss over windows of {opts['window']} steps; DIFF is run − baseline")
        _windows_table(windows, report["reported"], wide)
    _spikes(report, opts)
    _verdict(report, opts)


def _windows_table(windows: list[dict[str, Any]], reported: dict[str, Any] | None,
                   wide: bool) -> None:
    from rich.text import Text

    shown = _rows_to_show(windows, reported)
    rows: list[list[Any]] = []
    last = -1
    for i in shown:
        if i > last + 1:
            gap = i - last - 1
            rows.append([f"… {gap} window{'s' if gap > 1 else ''}", "", "", "", "", ""])
        w = windows[i]
        mark = "  ← reported" if reported and i == reported["index"] else (
            "" if w["full"] else "  (not full)")
        rows.append([f"{w['first_step']}–{w['last_step']}", w["steps"], w["run_loss"],
                     w["baseline_loss"], Text(f"{w['mean_diff']:+.4g}{mark}"),
                     w["spikes"] or None])
        last = i
    print_table(["STEPS", "COMPARED", "RUN", "BASELINE", "DIFF", "SPIKES"], rows, wide=wide,
                drop=("SPIKES", "BASELINE", "RUN"))
    if len(shown) < len(windows):
        para(f"{len(shown)} of {len(windows)} windows shown; -o json lists every one")


def _rows_to_show(windows: list[dict[str, Any]], reported: dict[str, Any] | None
                  ) -> list[int]:
    n = len(windows)
    if n <= ALL_ROWS:
        return list(range(n))
    keep = set(range(EDGE_ROWS)) | set(range(n - EDGE_ROWS, n))
    if reported:
        i = reported["index"]
        keep |= set(range(max(0, i - NEAR_ROWS), min(n, i + NEAR_ROWS + 1)))
    keep |= set([i for i, w in enumerate(windows) if w["spikes"]][:SPIKE_ROWS])
    return sorted(keep)


def _spikes(report: dict[str, Any], opts: dict[str, Any]) -> None:
    spikes = report["spikes"]
    medians = ", ".join(f"{report[side]['name']} {fmt_cell(report[side]['grad_norm_median'])}"
                        for side in ("run", "baseline"))
    if not any(report[side]["grad_norm_key"] for side in ("run", "baseline")):
        para("no gradient norm logged by either run, so no spikes are looked for")
        return
    if not spikes:
        para(f"no gradient-norm spike above {opts['spike_factor']:g} × its run's median "
             f"(medians: {medians})")
        return
    para(f"gradient-norm spikes above {opts['spike_factor']:g} × its run's median "
         f"(medians: {medians}):")
    for s in spikes[:SPIKES_LISTED]:
        parts = [f"{side} {fmt_cell(s[side])}" + ("" if side in s["spiked"] else " (no spike)")
                 for side in ("run", "baseline") if s[side] is not None]
        para(f"  step {s['step']}: " + ", ".join(parts))
    if len(spikes) > SPIKES_LISTED:
        para(f"  … and {len(spikes) - SPIKES_LISTED} more; -o json lists every one")


def _verdict(report: dict[str, Any], opts: dict[str, Any]) -> None:
    found = report["reported"]
    if found:
        para(text("reported: ", "bold"),
             f"steps {found['first_step']}–{found['last_step']}, the first full window "
             f"whose mean differs by more than {opts['margin']:g}: the run's loss is "
             f"{found['direction']} than the baseline's by {abs(found['mean_diff']):.4g} on "
             "average")
        para("the backward pass is nondeterministic and a spike can move a run's loss for "
             "many steps: check the window against repeated runs of one plan before acting")
        return
    windows = report["windows"]
    short = "" if not windows or windows[-1]["full"] else (
        f" (the last window, {windows[-1]['steps']} of {opts['window']} steps, is not full "
        "and cannot be reported)")
    para(f"no full window differs by more than {opts['margin']:g} on average{short}")
