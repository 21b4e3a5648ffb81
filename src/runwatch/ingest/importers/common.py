"""What every importer produces, and writing it out as a run directory (format v1).

An importer reads another tool's log into an `Imported` (records plus what is known
about the run); `write_run_dir` turns that into a finished run directory, which the
indexer then picks up like any other.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

import yaml

from runwatch.ingest.points import MAX_KEYS_PER_RECORD, MAX_KEYS_PER_RUN, RECORD_FIELDS
from runwatch.metrics.catalogue import Role
from runwatch.metrics.lookup import find_key
from runwatch.rundir import format as fmt
from runwatch.rundir.atomic import write_atomic
from runwatch.rundir.jsonl import dumps_line, loads_line
from runwatch.rundir.manifest import build_manifest
from runwatch.store.values import finite, to_float


class SourceError(ValueError):
    """The source cannot be imported; the message says why and what to pass instead."""


# How an import timed a log that holds no wall clock (`MadeTimes.basis`): from the log's
# own step durations (their sum is the run's duration, an estimate), from the log's own
# time since the run started (W&B's `_runtime`: its spacing is the log's), or one second
# per logged step (made up: the log says nothing of how long the run took).
STEP_TIMES = "step_times"
ELAPSED = "elapsed"
ONE_SECOND_PER_STEP = "one_second_per_step"


@dataclass(frozen=True)
class MadeTimes:
    """The wall times an import gave records whose log holds none, and how. A run's
    manifest keeps it as `imported_times` (docs/run-format.md), so that what reads a
    duration from those times (the run's duration, device time and spend) can tell them
    from a clock the log recorded. Every basis places the run so that it ends at the
    import: its dates are not the run's."""

    basis: str  # STEP_TIMES, ELAPSED or ONE_SECOND_PER_STEP
    steps: int  # the steps given a time
    key: str | None = None  # the metric (or column) the times come from
    timed_steps: int | None = None  # STEP_TIMES: the steps that log it
    start: float | None = None  # when the first step began, where the times say

    def manifest(self) -> dict[str, Any]:
        """The manifest's `imported_times`."""
        out: dict[str, Any] = {"basis": self.basis, "steps": self.steps}
        if self.key is not None:
            out["key"] = self.key
        if self.timed_steps is not None:
            out["timed_steps"] = self.timed_steps
        return out

    def note(self) -> str:
        """What the import says of the times it made."""
        if self.basis == STEP_TIMES:
            timed = (f"logged at all {self.steps} steps" if self.timed_steps == self.steps
                     else f"logged at {self.timed_steps} of {self.steps} steps; the others "
                     "count as their median")
            return (f"the log has no wall clock: the run's times are rebuilt from its step "
                    f"times ({self.key!r}, {timed}), ending at the import, so its duration is "
                    "their sum, an estimate")
        if self.basis == ELAPSED:
            return (f"the log has no dates, only the time since the run started "
                    f"({self.key!r}): the run's times keep that spacing and end at the import")
        return (f"the log has no wall clock and no step times: {self.steps} steps are given "
                "made-up times, one second apart, ending at the import, so the run's "
                "duration is not known")


@dataclass
class Imported:
    """A run read from another tool's log."""

    trainer: str  # the tool that wrote the log: "trl", "verl", "tinker-cookbook", …
    method: str | None
    records: list[dict[str, Any]]  # {"step": int, "ts": float?, metric: number, …}
    config: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    # what the import did that the user should know of (steps logged twice)
    notes: list[str] = field(default_factory=list)
    # the times the import gave records the log holds no wall clock for (None: the log's)
    times: MadeTimes | None = None


def read_bytes(path: Path) -> bytes:
    """The bytes of a file to import; a clear error when it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror}") from exc


def json_rows(path: Path, raw: bytes) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSON-lines file with their line numbers (blank lines skipped);
    a line that is not a JSON object is refused, naming it."""
    rows = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = loads_line(line)
        except ValueError as exc:
            raise SourceError(f"{path}: line {number} is not JSON ({exc})") from exc
        if not isinstance(row, dict):
            raise SourceError(f"{path}: line {number} is not a JSON object")
        rows.append((number, row))
    return rows


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# A row a log tags as held out (`"split": "val"`, a `mode` column of `eval`): loops that
# write training and validation rows into one file under the same names (CS336's GRPO
# logs: `{"split": "val", "accuracy": …}` beside `{"split": "train", …}`).
SPLIT_FIELDS = ("split", "mode")
HELD_OUT_SPLITS = frozenset({"val", "valid", "validation", "eval", "evaluation", "test",
                             "dev", "heldout", "held_out"})
HELD_OUT_PREFIXES = ("val/", "val_", "valid/", "valid_", "validation/", "validation_",
                     "eval/", "eval_", "test/", "test_")


def held_out(row: dict[str, Any]) -> bool:
    """Whether a row's own split field says it was measured on held-out data."""
    return any(isinstance(row.get(f), str) and row[f].strip().lower() in HELD_OUT_SPLITS
               for f in SPLIT_FIELDS)


def as_held_out(values: dict[str, Any], where: str) -> dict[str, Any]:
    """A held-out row's metrics under `val/` names (a name that already says held out is
    kept), so they never read as the training metrics of the same name; a row (at `where`)
    that holds both `loss` and `val/loss` is refused, as one would overwrite the other."""
    out = {k if k.startswith(HELD_OUT_PREFIXES) else f"val/{k}": v for k, v in values.items()}
    if len(out) < len(values):
        both = next(k for k in values if f"val/{k}" in values)
        raise SourceError(f"{where}: the row is held out (its split says so), and holds both "
                          f"{both!r} and 'val/{both}', which would be one metric: rename "
                          "one of them")
    return out


def numeric_items(entry: dict[str, Any], skip: frozenset[str]) -> dict[str, float | int]:
    """The entry's numeric fields (NaN and ±Infinity kept), without the `skip` keys."""
    return {k: v for k, v in entry.items() if k not in skip and is_number(v)}


def checked_step(step: Any, where: str, fix: str) -> int:
    """`step` if the run format takes it as a step (`rundir.format.validate_step`: a whole
    number from 0 to 2**63-1), else a SourceError naming `where` (the row, the line) and
    saying what to do: the indexer would skip that record."""
    problem = fmt.validate_step(step)
    if problem:
        raise SourceError(f"{where}: {problem}; {fix}")
    return step


def synthesize_ts(records: list[dict[str, Any]], end: float) -> MadeTimes | None:
    """Give records without a wall time one, the last step's at `end`; say how (None: every
    record had one). A log with no clock that logs its step times is timed by them
    (`by_step_times`). Otherwise each step gets one second (in a log that times some of
    its records, the others): a log with no clock says nothing of how far apart its steps
    were, so no gap is made up (a jump in the step numbers is no stall), and the times
    stay near `end` however large the steps (a log numbered by tokens, steps of 1e10 and
    more)."""
    untimed = [r for r in records if finite(r.get("ts")) is None]
    if not untimed:
        return None
    made = by_step_times(records, end)
    if made is not None:
        return made
    order = {step: i for i, step in enumerate(sorted({r["step"] for r in untimed}))}
    last = len(order) - 1
    for r in untimed:
        r["ts"] = end - (last - order[r["step"]])
    return MadeTimes(ONE_SECOND_PER_STEP, len(order))


def by_step_times(records: list[dict[str, Any]], end: float) -> MadeTimes | None:
    """Time the records of a log with no clock (none has a `ts`) by the durations its
    steps log under the key that plays the step-time role (`timing/step_total_s`,
    tinker-cookbook's `time/total`: the one a run's cost shows as its step time), the
    last step ending at `end`; None when the log has a clock or logs no step time."""
    if any(finite(r.get("ts")) is not None for r in records):
        return None
    key = find_key({k for r in records for k in r if k not in NOT_METRICS}, Role.STEP_TIME)
    return None if key is None else _by_step_times(records, key, end)


def _by_step_times(records: list[dict[str, Any]], key: str, end: float) -> MadeTimes | None:
    """Time `records` by the durations their steps log under `key` (a step logged twice:
    its last; a step that logs none: their median), each step's time its end, the last
    at `end`; None when no step logs a duration."""
    logged: dict[int, float] = {}
    for r in records:
        took = finite(r.get(key))
        if took is not None and took >= 0:
            logged[r["step"]] = took
    if not logged:
        return None
    typical = median(logged.values())
    steps = sorted({r["step"] for r in records})
    start = end - sum(logged.get(step, typical) for step in steps)
    ends: dict[int, float] = {}
    clock = start
    for step in steps:
        clock += logged.get(step, typical)
        ends[step] = clock
    for r in records:
        r["ts"] = ends[r["step"]]
    return MadeTimes(STEP_TIMES, len(steps), key, len(logged), start)


def elapsed_clock(records: list[dict[str, Any]], elapsed: dict[int, float], key: str
                  ) -> MadeTimes | None:
    """A log with no dates whose every step says how long the run had been going (W&B's
    `_runtime`, LLaMA-Factory's `elapsed_time`, under `key`): place the records on a clock
    ending now so their spacing is kept (None: the log has its clock, or a step says no
    elapsed time)."""
    if any("ts" in r for r in records) or not all(r["step"] in elapsed for r in records):
        return None
    start = time.time() - max(elapsed.values())
    for record in records:
        record["ts"] = start + elapsed[record["step"]]
    return MadeTimes(ELAPSED, len({r["step"] for r in records}), key, start=start)


def clock_seconds(value: Any) -> float | None:
    """Seconds from a duration as Python's timedelta writes it (`0:01:23`, `1:02:03.5`,
    `2 days, 3:04:05`), which LLaMA-Factory logs as `elapsed_time`; None for anything else."""
    if not isinstance(value, str):
        return None
    days = 0
    text = value.strip()
    if "," in text:
        head, text = (part.strip() for part in text.split(",", 1))
        count, _, unit = head.partition(" ")
        if unit not in ("day", "days") or not count.lstrip("-").isdigit():
            return None
        days = int(count)
    parts = text.split(":")
    if len(parts) != 3 or not all(parts):
        return None
    try:
        hours, minutes, seconds = int(parts[0]), int(parts[1]), float(parts[2])
    except ValueError:
        return None
    total = days * 86400 + hours * 3600 + minutes * 60 + seconds
    return total if math.isfinite(total) and total >= 0 else None


def place_times(imported: Imported, end: float) -> None:
    """Time `imported`'s records by their step times where the log has no clock but logs
    those (`by_step_times`), and say in its `notes` how the import timed them, where it
    did (by step times, or by the time since the run started: W&B's `_runtime`,
    LLaMA-Factory's `elapsed_time`). A log with none of these is timed when it is written
    (`write_run_dir`), one second per step, which its manifest records."""
    made = by_step_times(imported.records, end)
    if made is not None:
        imported.times = made
    if imported.times is not None:
        imported.notes.append(imported.times.note())


def repeated_steps(records: list[dict[str, Any]]) -> list[int]:
    """The steps at which some metric is logged again with another value (a later record
    of the step hides the earlier value); the same value twice hides nothing."""
    if len({r["step"] for r in records}) == len(records):  # no step logged twice
        return []
    seen: dict[int, dict[str, Any]] = {}
    repeated: set[int] = set()
    for r in records:
        logged = seen.setdefault(r["step"], {})
        for key, value in r.items():
            if key in NOT_METRICS:
                continue
            if key in logged and not _same(logged[key], value):
                repeated.add(r["step"])
            logged[key] = value
    return sorted(repeated)


def _same(a: Any, b: Any) -> bool:
    return bool(a == b or (a != a and b != b))  # NaN is NaN


def repeats_note(steps: list[int], what: str = "row") -> str:
    """What a user reads of steps logged twice: which, and which value each shows."""
    shown = ", ".join(map(str, steps[:5])) + (f" and {len(steps) - 5} more" if len(steps) > 5
                                             else "")
    steps_log = f"steps {shown} log" if len(steps) > 1 else f"step {shown} logs"
    return (f"{steps_log} a metric more than once with different values: each shows the "
            f"value of the step's last {what}, as for a run resumed from a checkpoint; the "
            "run's metrics.jsonl keeps them all")


NOT_METRICS = frozenset({"step", "ts"})


def check_records(records: list[dict[str, Any]], source: str) -> None:
    """Refuse, with what to do, records the indexer would drop in part or whole: a step the
    run format does not take, a metric name that is not a key (or is a record's own field),
    a value no float holds, more metric keys than a run may have."""
    keys: set[str] = set()
    for rec in records:
        checked_step(rec["step"], source, "fix or delete that step's row")
        for key, value in rec.items():
            if key in NOT_METRICS:
                continue
            if key not in keys:
                problem = fmt.validate_key(key) or (
                    f"metric {key!r} has the name of a record's own field"
                    if key in RECORD_FIELDS else None)
                if problem:
                    raise SourceError(f"{source}: {problem}: rename it in a copy of the "
                                      "file and import that")
                keys.add(key)
            if type(value) is not float and to_float(value) is None:  # a float is one
                raise SourceError(f"{source}: {key!r} at step {rec['step']} is "
                                  f"{value!r:.40}, not a number a float holds; fix that value")
    if len(keys) > MAX_KEYS_PER_RUN:
        raise SourceError(f"{source} has {len(keys)} metrics, and a run holds at most "
                          f"{MAX_KEYS_PER_RUN}: import a copy without the ones you do not "
                          "need")


def split_wide(record: dict[str, Any]) -> list[dict[str, Any]]:
    """A record's metrics in records of one step of at most MAX_KEYS_PER_RECORD metrics
    each (the most the index takes in one record); readers join them into one step."""
    if len(record) <= MAX_KEYS_PER_RECORD:  # the usual record: as it is
        return [record]
    metrics = [(k, v) for k, v in record.items() if k not in NOT_METRICS]
    head = {"step": record["step"], "ts": record["ts"]}
    return [{**head, **dict(metrics[i:i + MAX_KEYS_PER_RECORD])}
            for i in range(0, max(len(metrics), 1), MAX_KEYS_PER_RECORD)]


def write_run_dir(imported: Imported, runs_dir: Path, name: str, project: str = "default",
                  method: str | None = None, finished: bool = True) -> Path:
    """Write `imported` as the finished run `runs_dir`/`name` (with `finished` False, as
    a run still running: health-eval's replay appends the rest and the end); refuses to
    overwrite."""
    fmt.validate_name(name)
    fmt.validate_name(project, "project name")
    if not imported.records:
        raise SourceError(f"{imported.source} holds no metrics to import")
    run_dir = runs_dir / name
    if run_dir.exists():
        raise SourceError(f"{run_dir} already exists: pass --name with another run name")
    records = sorted(imported.records, key=lambda r: r["step"])
    check_records(records, imported.source)
    made = synthesize_ts(records, end=time.time()) or imported.times
    # the run began with its first step, where the times say when that was
    first_ts = made.start if made is not None and made.start is not None else records[0]["ts"]
    last_ts = records[-1]["ts"]
    extra: dict[str, Any] = {"imported_from": imported.source}
    if made is not None:
        extra["imported_times"] = made.manifest()
    manifest = build_manifest(name, project, tags=["imported"], method=method or imported.method,
                              trainer=imported.trainer, created_at=first_ts, **extra)
    tmp = runs_dir / f".{name}.importing-{os.getpid()}"
    tmp.mkdir(parents=True)
    write_atomic(tmp / fmt.MANIFEST, dumps_line(manifest))
    with open(tmp / fmt.METRICS, "wb") as fh:
        parts = (part for rec in records for part in split_wide(rec))
        for seq, part in enumerate(parts):
            fh.write(dumps_line({"step": part["step"], "ts": part["ts"], "seq": seq,
                                 **{k: v for k, v in part.items() if k not in NOT_METRICS}}))
    with open(tmp / fmt.EVENTS, "wb") as fh:
        fh.write(dumps_line({"ts": first_ts, "seq": 0, "phase": "RUNNING"}))
        if finished:
            fh.write(dumps_line({"ts": last_ts, "seq": 1, "phase": "SUCCEEDED"}))
    if imported.config:
        write_atomic(tmp / fmt.CONFIG, yaml.safe_dump(imported.config, sort_keys=True).encode())
    # Appear complete or not at all: the indexer may be watching the folder.
    tmp.rename(run_dir)
    return run_dir
