"""`runwatch runs …`: get, metrics and logs of indexed runs (registered in cli/main.py;
list is in cli/runs_list.py).
The options and the run lookup the `runs` commands share are in cli/options.py."""

from __future__ import annotations

import csv
import math
import shlex
import sys
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from sqlalchemy import Connection, Row

from runwatch.analysis.views import log_entry
from runwatch.cli.context import open_context
from runwatch.cli.numpyload import import_numpy
from runwatch.cli.options import (
    DbOpt,
    DirOpt,
    JqOpt,
    OutOpt,
    RawOpt,
    RunArg,
    ServerOpt,
    TokenOpt,
    resolve_or_exit,
)
from runwatch.cli.output import (
    Output,
    console,
    dumps,
    emit,
    escape_controls,
    fail,
    fmt_cell,
    fmt_duration,
    fmt_money,
    line,
    print_table,
    runwatch_command,
    text,
)
from runwatch.cli.remote import remote_for
from runwatch.metrics import Role, find_key
from runwatch.rundir.format import LOG_LEVELS
from runwatch.store import queries as q
from runwatch.store.detail import log_rows, read_run
from runwatch.store.reward_terms import SplitTerms, step_terms

# The metrics `runs metrics` shows by default, by the role they play.
TABLE_ROLES = (Role.TRAIN_LOSS, Role.EVAL_LOSS, Role.ACCURACY, Role.VAL_ACCURACY, Role.REWARD,
               Role.LEARNING_RATE, Role.GRAD_NORM, Role.GRAD_CLIP_FACTOR, Role.ADAPTER_NORM,
               Role.UPDATE_RATIO)


def detail_of(conn: Connection, row: Row[Any], runs_dir: Path, gone: bool,
              db: str | None = None) -> dict[str, Any]:
    """The run detail, as the API sends it, with its tiles from the index (a key's step
    summaries, its series read only where they cannot say: runwatch.store.series
    IndexValues) and its spend at the device profiles of `runs_dir`; `gone`: whether its
    process is gone, as Context.current_run judged it with `row`."""
    # imported here: numpy, which reads series, would slow every other command's start
    import_numpy()
    from runwatch.analysis.detail import run_detail
    from runwatch.jobs.control import queued_waits
    from runwatch.store.series import IndexValues

    rec = read_run(conn, row, gone)
    return run_detail(rec, IndexValues(conn), runs_dir=runs_dir,
                      waits_for=queued_waits(conn, rec.job, row.status, row.dir, time.time(),
                                             lambda *w: runwatch_command(*w, db=db)))


def read_detail(run: str, directory: Path | None, db: str | None, server: str | None,
                token: str | None) -> dict[str, Any]:
    """The run detail from the team server (--server, RUNWATCH_SERVER) or the local index."""
    remote = remote_for(server, token, directory, db)
    if remote is not None:
        return remote.detail(run)
    ctx = open_context(directory, db, read_only=True)
    row, gone = ctx.current_run(run)
    with ctx.engine.connect() as conn:
        return detail_of(conn, row, ctx.directory, gone, db)


def get_cmd(
    run: RunArg, directory: DirOpt = None, db: DbOpt = None, output: OutOpt = Output.table,
    jq: JqOpt = None, raw: RawOpt = False,
    settings: Annotated[bool, typer.Option("--settings", help="Add the run's settings.")] = False,
    server: ServerOpt = None, token: TokenOpt = None,
) -> None:
    """Show a run's state, results and cost (and settings with --settings or -o wide)."""
    detail = read_detail(run, directory, db, server, token)

    def table(wide: bool) -> None:
        c = console()
        line(text(detail["name"], "bold"), "  ", detail["run_id"])
        _section(c, "State", _state_lines(detail))
        if detail["job"]:
            _section(c, "Job", _job_lines(detail["job"]))
        res = detail["results"]
        _section(c, "Results", [(k.replace("_", " ").capitalize(), v) for k, v in res.items()
                                if v is not None and k != "non_finite"])
        _section(c, "Cost", _cost_lines(detail))
        if detail["cost"]["data_fit"]:
            _section(c, "Data fit", _data_fit_lines(detail["cost"]["data_fit"]))
        if len(detail["attempts"]) > 1:
            _section(c, "Attempts", [(f"#{a['attempt']}", _attempt_text(a))
                                     for a in detail["attempts"]])
        if detail["problems"]:
            _section(c, "Problems while indexing", [("", p) for p in detail["problems"]])
        if settings or wide:
            import yaml

            c.print("[bold]Settings[/]")
            shown = {k: detail["settings"][k] for k in ("config", "engine_config")}
            c.print(yaml.safe_dump(shown, sort_keys=False).rstrip(), markup=False)

    emit(detail, output, jq, table, raw)


def _section(c: Any, title: str, lines: list[tuple[str, Any]]) -> None:
    c.print(f"[bold]{title}[/]")
    for label, value in lines:
        c.print(f"  {label + ':' if label else ''} {fmt_cell(value)}".rstrip(), markup=False)


def _state_lines(detail: dict[str, Any]) -> list[tuple[str, Any]]:
    st, job = detail["state"], detail["job"]
    phase = st["phase"] + (" (the training process is gone: it stopped before it finished)"
                           if st["process_gone"] else "")
    if job and (job["attempt"] > 1 or job["max_attempts"] > 1):
        phase += f", attempt {job['attempt']}" + (
            f" of at most {job['max_attempts']}" if job["attempt"] <= job["max_attempts"]
            else " (retried by hand, past its automatic attempts)")
    lines = [("Project", st["project"]), ("Method", st["method"]),
             ("Base model", _model_text(detail["model"], st["base_model"])),
             ("Dataset", st["dataset"]),
             ("Trainer", st["trainer"]), ("Phase", phase)]
    if st["stage"]:
        prog = st["progress"]
        extra = f" ({prog['done']}/{prog['total']})" if prog else ""
        lines.append(("Stage", f"{st['stage']}{extra}"))
    lines += [("Observed step", st["observed_step"]), ("Saved step", st["saved_step"])]
    failure = detail["failure"]
    if failure:
        code = f" [{failure['code']}]" if failure["code"] else ""
        lines.append(("Reason", f"{failure['reason'] or '-'}{code}"))
        if failure["what_to_do"]:
            lines.append(("What to do", failure["what_to_do"]))
    elif st["reason"]:
        lines.append(("Reason", st["reason"]))
    return lines


def _model_text(model: dict[str, Any], base_model: str | None) -> str | None:
    """The model a run trains as the detail's `model` (runwatch.analysis.detail
    model_origin) and the web app name it: a run started from an earlier run's checkpoint
    names the base model at the start of the chain and the run it started from, not its
    bare `init_from:<path>`."""
    if not model["init_from"]:
        return base_model
    base = model["base_model"] or "unknown base model"
    if model["parent"]:
        return f"{base} (from run {model['parent']['name']})"
    return f"{base} (from {model['init_from']}: no run in the index holds it)"


def _job_lines(job: dict[str, Any]) -> list[tuple[str, Any]]:
    what = f"recipe {job['recipe']}" if job["recipe"] else "command"
    lines = [("Runs", f"{what}: {shlex.join(job['argv'])}"), ("In", job["cwd"]),
             ("Devices", f"{job['devices']} × {job['device_profile']}"),
             ("Priority", job["priority"]), ("Worker", job["worker_id"])]
    if job.get("waits_for"):  # a queued job no worker would start, and how to start one
        lines.append(("Waits", job["waits_for"]))
    return lines


def _cost_lines(detail: dict[str, Any]) -> list[tuple[str, Any]]:
    # imported here: numpy, which the module imports, would slow every other command's start
    from runwatch.analysis.results import training_s

    cost = detail["cost"]
    estimate = " (estimate: the run has not ended)" if cost["device_seconds_estimate"] else ""
    phase_millis = detail["timing"]["phaseMillis"]
    phases = ", ".join(f"{k.lower()} {fmt_duration(v / 1000)}" for k, v in phase_millis.items())
    # made-up times (an imported log with no clock, no step times) tell no duration
    made_up = cost["duration_s"] is None and cost.get("times") is not None
    lines = [("Training time", "unknown" if made_up else fmt_duration(training_s(phase_millis))),
             ("Queue wait", fmt_duration(cost["queue_wait_s"])), ("Phases", phases),
             ("Device time", f"{_device_seconds(cost['device_seconds'])}s on {cost['devices']} × "
                             f"{cost['device_profile']}{estimate}")]
    rates = sorted({a["hourly_rate"] for a in detail["attempts"]
                    if a["hourly_rate"] is not None and a["device_seconds"] > 0})
    spend = _spend(cost["spend"], cost["device_seconds"])
    if cost["spend"] is None:
        lines.append(("Spend", cost["problem"]))
    elif len(rates) > 1:  # each attempt at the rate it ran at (Attempts lists them)
        lines.append(("Spend", f"{spend}, its attempts at "
                               f"{' and '.join(fmt_money(r) for r in rates)} per "
                               f"device-hour{estimate}"))
    else:
        lines.append(("Spend", f"{spend} at {fmt_money(cost['hourly_rate'])} per "
                               f"device-hour{estimate}"))
    if cost.get("times"):  # an imported log without a clock: what the figures rest on
        lines.append(("Times", cost["times"]))
    if cost.get("pipeline"):  # started from an earlier run: the chain's stages and total
        lines.append(("Pipeline", _pipeline_text(cost["pipeline"])))
    return lines + _memory_lines(cost["peak_memory_bytes"])


def _pipeline_text(pipeline: dict[str, Any]) -> str:
    """A pipeline's stages, first first, each with its device time and spend, then the
    total, as the web app's Cost card shows them."""
    stages = " → ".join(
        f"{st['name']} {_device_seconds(st['device_seconds'])}s"
        f" ({_spend(st['spend'], st['device_seconds'])})" for st in pipeline["stages"])
    spend = ("spend unknown" if pipeline["spend"] is None
             else f"spend {_spend(pipeline['spend'], pipeline['device_seconds'])}")
    estimate = " (estimate)" if pipeline["estimate"] else ""
    return (f"{stages}; total {_device_seconds(pipeline['device_seconds'])} device-seconds, "
            f"{spend}{estimate}")


def _device_seconds(seconds: float) -> str:
    return f"{seconds:.1f}"


def _spend(spend: float | None, device_seconds: float) -> str:
    """A spend as table text, at the precision its device time is shown with: a device
    time shown as 0.0 spent nothing (a job whose process never started held its devices
    for the worker's few milliseconds), not "< 0.0001"."""
    if spend is not None and round(device_seconds, 1) == 0:  # shown as 0.0
        spend = 0.0
    return fmt_money(spend)


# The memory key that is the process's own peak (host memory), no part of the device's
# step (runwatch.analysis.results PROCESS_PEAK), and what the table calls it.
PROCESS_PEAK = ("process_peak_rss_bytes", "Process peak RSS (host memory)")
# What each data fit count counts (cost.data_fit); the web app's Cost card names them alike
# (web/src/costcard.ts DATA_FIT).
DATA_FIT_LABELS = {"rows": "Rows drawn", "rows_at_max_length": "Rows at max_seq_length",
                   "rows_lost_target_end": "Rows that lost their target's end",
                   "rows_dropped_empty": "Rows dropped (nothing to train on)",
                   "padding_fraction": "Padding"}


def _words(key: str) -> str:
    return key.removesuffix("_bytes").replace("_", " ").capitalize()


def _memory_lines(memory: dict[str, Any]) -> list[tuple[str, Any]]:
    """The memory at the step that held the most: the total, and the parts of that step
    under it; a run that logs no total, the peak of each part (runwatch.analysis.results
    peak_memory). The process's own peak is apart from either."""
    key, label = PROCESS_PEAK
    parts = {k: v for k, v in memory.items() if k != key}
    if "total_bytes" in parts:
        total = parts.pop("total_bytes")
        lines = [("Peak memory", f"{_bytes(total)} (the step that held the most)")]
        lines += [(f"  {_words(k)}", _bytes(v)) for k, v in parts.items()]
    else:
        lines = [(f"Peak memory ({_words(k).lower()})", _bytes(v)) for k, v in parts.items()]
    return lines + ([(label, _bytes(memory[key]))] if key in memory else [])


def _data_fit_lines(fit: dict[str, Any]) -> list[tuple[str, Any]]:
    """How the rows fitted max_seq_length, and the share of the batches that was padding."""
    lines: list[tuple[str, Any]] = []
    for k, v in fit.items():
        shown = (f"{v * 100:.1f}% of the batches' tokens"
                 if k == "padding_fraction" and isinstance(v, int | float) and math.isfinite(v)
                 else v)
        lines.append((DATA_FIT_LABELS.get(k, _words(k)), shown))
    return lines


def _attempt_text(attempt: dict[str, Any]) -> str:
    text = f"{attempt['phase']}, {_device_seconds(attempt['device_seconds'])} device-seconds"
    if attempt.get("spend") is not None:
        text += (f", spend {_spend(attempt['spend'], attempt['device_seconds'])} at "
                 f"{fmt_money(attempt['hourly_rate'])}")
    if attempt["reason"]:
        text += f": {attempt['reason']}"
    return text


def _bytes(n: Any) -> str:
    if not isinstance(n, int | float) or n != n:
        return fmt_cell(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def parse_steps(text: str | None) -> tuple[int | None, int | None]:
    """'A:B', 'A:' or ':B' as an inclusive step range."""
    if not text:
        return None, None
    a, sep, b = text.partition(":")
    try:
        lo = int(a) if a.strip() else None
        hi = int(b) if b.strip() else None
    except ValueError:
        raise fail(f"--steps {text!r} is not A:B with integer steps", ["e.g. --steps 100:200, "
                                                                       "--steps 500:"]) from None
    if not sep:
        hi = lo
    if lo is not None and hi is not None and lo > hi:
        raise fail(f"--steps {text!r} ends before it starts", [f"e.g. --steps {hi}:{lo}"])
    return lo, hi


class MetricsOutput(StrEnum):
    table = "table"
    wide = "wide"
    json = "json"
    csv = "csv"


def metrics_cmd(
    run: RunArg, directory: DirOpt = None, db: DbOpt = None,
    output: Annotated[MetricsOutput, typer.Option("-o", "--output", help="table, wide, json "
                                                  "or csv.")] = MetricsOutput.table,
    jq: JqOpt = None, raw: RawOpt = False,
    key: Annotated[list[str] | None, typer.Option("--key", "-k", help="Only these metrics "
                                                  "(repeatable).")] = None,
    steps: Annotated[str | None, typer.Option(help="Step range A:B (inclusive).")] = None,
    limit: Annotated[int, typer.Option(min=1, help="Table: show the last N steps (json and "
                                       "csv show all).")] = 30,
    server: ServerOpt = None, token: TokenOpt = None,
) -> None:
    """The metrics a run logged at each step (every field under `measured`) and, for a run
    that kept rollouts, the mean of each reward term over the step's rollouts per split
    (under `rewardTerms`; the table's `term/NAME` columns); -o csv writes a row a step and
    a column a metric."""
    lo, hi = parse_steps(steps)
    remote = remote_for(server, token, directory, db)
    if remote is not None:
        found = remote.detail(run)
        run_id = found["run_id"]
        sent = _Sent(remote.history(run_id, key, lo, hi))

        def sent_terms(first: int, last: int) -> dict[int, SplitTerms]:
            return remote.reward_terms(run_id, first, last)

        show_history(sent, run_id, found["name"], output, jq, raw, key, limit, sent_terms)
        return
    import_numpy()
    ctx = open_context(directory, db, read_only=True)
    with ctx.engine.connect() as conn:
        row = resolve_or_exit(conn, run)
        try:
            hist = q.History(conn, row.pk, key, lo, hi)
        except KeyError as exc:
            raise fail(str(exc.args[0])) from exc
        pk = row.pk

        def terms(first: int, last: int) -> dict[int, SplitTerms]:
            return step_terms(conn, pk, first, last)

        try:
            show_history(hist, row.run_id, row.name, output, jq, raw, key, limit, terms)
        except q.HistoryChanged as exc:
            raise fail(str(exc)) from exc


# The reward terms of the steps from the first to the last given, by step (store.reward_terms)
TermsOf = Callable[[int, int], dict[int, SplitTerms]]


def _with_terms(entries: list[dict[str, Any]], terms: TermsOf) -> list[dict[str, Any]]:
    """The steps (ascending), each with its `rewardTerms` where its rollouts report any."""
    if entries:
        found = terms(entries[0]["step"], entries[-1]["step"])
        for e in entries:
            if e["step"] in found:
                e["rewardTerms"] = found[e["step"]]
    return entries


class _Sent:
    """A history the team server sent whole, read as a `q.History` is."""

    def __init__(self, rows: list[q.StepRow]) -> None:
        self.rows = rows

    def tail(self, n: int) -> tuple[list[q.StepRow], list[str]]:
        return self.rows[-n:], self.present()

    def count(self) -> int:
        return len(self.rows)

    def present(self) -> list[str]:
        return list(dict.fromkeys(k for h in self.rows for k in h.values))

    def blocks(self) -> list[q.StepBlock]:
        import_numpy()
        return [q.StepBlock.of_rows(self.rows)] if self.rows else []

    def row_chunks(self) -> list[list[q.StepRow]]:
        return [self.rows]

    def step_chunks(self) -> list[list[tuple[int, float, dict[str, float]]]]:
        return [[(h.step, h.ts, h.values) for h in self.rows]]


def show_history(hist: q.History | _Sent, run_id: str, name: str, output: MetricsOutput,
                 jq: str | None, raw: bool, key: list[str] | None, limit: int,
                 terms: TermsOf) -> None:
    """Write a run's history as `runs metrics` was asked to: the exports as they are read,
    a table from the last `limit` steps alone; JSON and the table add each step's reward
    terms (`terms`), read a chunk of steps at a time."""
    if jq:  # the filter reads the whole document
        data = {"run_id": run_id, "name": name,
                "steps": [e for rows in hist.row_chunks() for e in _with_terms(
                    [{"step": h.step, "ts": h.ts, "measured": h.values} for h in rows],
                    terms)]}
        emit(data, Output.table if output is MetricsOutput.csv else Output(output.value), jq,
             lambda wide: None, raw)
        return
    if output is MetricsOutput.csv:
        write_csv(hist.blocks(), key or sorted(hist.present()))
        return
    if output is MetricsOutput.json and not raw:
        write_json(run_id, name, hist.step_chunks(), terms)
        return
    tail, present = hist.tail(limit)
    total = hist.count() if len(tail) == limit else len(tail)
    tail_terms = terms(tail[0].step, tail[-1].step) if tail else {}
    # a column per split and term, train's first: `term/NAME`, and for another split
    # `SPLIT/term/NAME`, as a held-out metric is `val/NAME`
    term_cols = sorted({(split, term) for by_split in tail_terms.values()
                        for split, means in by_split.items() for term in means},
                       key=lambda st: (st[0] != "train", st))

    def table(wide: bool) -> None:
        keys = sorted(present)
        if not wide and not key:
            found = (find_key(keys, role) for role in TABLE_ROLES)
            shown = [k for k in found if k is not None] or keys[:8]
        else:
            shown = keys
        rows = [[h.step, *[h.values.get(k) for k in shown],
                 *[tail_terms.get(h.step, {}).get(split, {}).get(term)
                   for split, term in term_cols]] for h in tail]
        heads = [("" if split == "train" else f"{split}/") + f"term/{term}"
                 for split, term in term_cols]
        # a narrow terminal leaves out the reward terms first (another split's before
        # train's), then the roles last in TABLE_ROLES
        drop = heads[::-1] + shown[:0:-1]
        print_table(["STEP", *shown, *heads], rows, wide=wide or bool(key), drop=drop)
        if total > len(tail):
            line(f"showing the last {len(tail)} of {total} steps "
                 "(--limit N, --steps A:B, or -o json for all)")
        if len(keys) > len(set(shown)):
            line(f"{len(keys) - len(set(shown))} more metrics not shown "
                 "(-o wide shows every one, --key NAME one)")

    # a table, or -r without --jq, which emit refuses
    emit(None, Output(output.value), None, table, raw)


def write_csv(blocks: Iterable[q.StepBlock], names: list[str]) -> None:
    """The steps as CSV: step, ts (unix seconds), then each metric of `names` (an empty
    cell where a step logged no value; NaN and infinities as nan, inf and -inf), a block
    of steps at a time. No cell but the header's needs quoting: a number's repr holds no
    comma, quote or line break."""
    out = sys.stdout
    csv.writer(out, lineterminator="\n").writerow(["step", "ts",
                                                   *[escape_controls(k) for k in names]])
    for block in blocks:
        n = block.step.size
        by_name = {name: (at, values) for name, at, values in block.columns}
        cols = [list(map(str, block.step.tolist())), list(map(repr, block.ts.tolist()))]
        for name in names:
            at, values = by_name.get(name, (None, None))
            if values is None:
                cols.append([""] * n)
                continue
            cells = list(map(repr, values.tolist()))
            if at is not None:
                spread = [""] * n
                for i, cell in zip(at.tolist(), cells, strict=True):
                    spread[i] = cell
                cells = spread
            cols.append(cells)
        out.write("\n".join(map(",".join, zip(*cols, strict=True))) + "\n")


def write_json(run_id: str, name: str,
               chunks: Iterable[list[tuple[int, float, dict[str, float]]]],
               terms: TermsOf) -> None:
    """{"run_id", "name", "steps": [{"step", "ts", "measured", "rewardTerms"?}, ...]}, as
    `emit` writes it, a chunk of (step, ts, values) and its steps' reward terms at a time."""
    head = dumps({"run_id": run_id, "name": name, "steps": []})
    out = sys.stdout
    out.write(head[:-len("[]}")] + "[")
    sep = ""
    for steps in chunks:
        if steps:
            entries = [{"step": step, "ts": ts, "measured": values}
                       for step, ts, values in steps]
            out.write(sep + dumps(_with_terms(entries, terms))[1:-1])
            sep = ", "
    out.write("]}\n")


def logs_cmd(
    run: RunArg, directory: DirOpt = None, db: DbOpt = None, output: OutOpt = Output.table,
    jq: JqOpt = None, raw: RawOpt = False,
    level: Annotated[str | None, typer.Option(help="Only this level and above "
                                              "(debug, info, warning, error, critical).")
                     ] = None,
    tail: Annotated[int, typer.Option(min=1, help="The last N lines.")] = 200,
    server: ServerOpt = None, token: TokenOpt = None,
) -> None:
    """The structured log lines of a run."""
    if level is not None and level.lower() not in LOG_LEVELS:
        raise fail(f"--level {level!r} is not one of {', '.join(LOG_LEVELS)}")
    remote = remote_for(server, token, directory, db)
    if remote is not None:
        data = remote.logs(run, level.lower() if level else None, tail)
    else:
        ctx = open_context(directory, db, read_only=True)
        with ctx.engine.connect() as conn:
            row = resolve_or_exit(conn, run)
            data = [log_entry(r) for r in reversed(
                log_rows(conn, row.pk, level.lower() if level else None, limit=tail))]

    def table(wide: bool) -> None:
        rows = []
        for d in data:
            stamp = _local_time(d["ts"])
            row = [stamp, d["level"], d["message"]]
            if wide:
                row.append("" if d["data"] is None else str(d["data"]))
            rows.append(row)
        cols = ["TIME", "LEVEL", "MESSAGE"] + (["DATA"] if wide else [])
        print_table(cols, rows, wide=wide, prose=("MESSAGE",))

    emit(data, output, jq, table, raw)


def _local_time(ts: str | None) -> str:
    """An ISO 8601 UTC time as local "YYYY-MM-DD HH:MM:SS"."""
    if ts is None:
        return ""
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone().strftime(
        "%Y-%m-%d %H:%M:%S")
