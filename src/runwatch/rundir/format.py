"""Names and constants of run directory format v1 (see docs/run-format.md)."""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1


def schema_version_problem(version: Any) -> str | None:
    """Why a manifest's `schema_version` is not the one this runwatch reads, and what to
    do, as the end of a sentence that names the file; None for SCHEMA_VERSION. Only a
    newer version is mended by upgrading runwatch: a missing, older or mistyped one was
    written by hand or by another program."""
    if isinstance(version, int) and not isinstance(version, bool):
        if version == SCHEMA_VERSION:
            return None
        if version > SCHEMA_VERSION:
            return (f"has schema_version {version}, newer than the version {SCHEMA_VERSION} "
                    "this runwatch reads: upgrade runwatch")
        return (f"has schema_version {version}, which no runwatch writes (versions start "
                f"at {SCHEMA_VERSION}): set it to {SCHEMA_VERSION} if the folder holds a "
                "run in the format of docs/run-format.md")
    if version is None:
        return ("has no schema_version, so runwatch.init did not write it: add "
                f'"schema_version": {SCHEMA_VERSION} if the folder holds a run in the format '
                "of docs/run-format.md")
    return (f"has schema_version {version!r}, which is not a whole number: write it as "
            f"the number {SCHEMA_VERSION} if the folder holds a run in the format of "
            "docs/run-format.md")

MANIFEST = "manifest.json"
CONFIG = "config.yaml"
ENGINE_CONFIG = "engine_config.json"
METRICS = "metrics.jsonl"
EVENTS = "events.jsonl"
CHECKPOINTS = "checkpoints.jsonl"
LOGS = "logs.jsonl"
# Written once by `runwatch submit` (runwatch.jobs.spec), never by the run's process.
JOB = "job.json"
# attempts/<n>/ holds attempt n's attempt-scoped files once a new attempt starts, and
# its process's output (OUTPUT_LOG); the indexer reads no subfolder.
ATTEMPTS_DIR = "attempts"
OUTPUT_LOG = "output.log"
# attempts/<n>/ also holds this note when a stopping worker stopped attempt n
# (runwatch.rundir.stopnote).
WORKER_STOPPED = "worker_stopped.json"
# and this one when job control stops attempt n for a cancel (runwatch.rundir.stopnote):
# a SIGTERM without either note came from outside runwatch
CANCEL_ASKED = "cancel_asked.json"
# The folder of a run's checkpoint files (checkpoints.jsonl names them relative to the run
# folder); it belongs to one attempt like checkpoints.jsonl, and moves with it.
CHECKPOINT_DIR = "checkpoints"

# The append-only record files, in the order the indexer reads them.
FILES = (EVENTS, METRICS, CHECKPOINTS, LOGS)
# The longest line of a record file, its newline included: the SDK writes none longer, every
# reader (the indexer, the sender) reads lines up to it and skips a longer one whole, and a
# server takes a record of up to it in a request of its own (runwatch.server.state.Limits).
MAX_LINE_BYTES = 16 * 1024 * 1024
# runwatch's own folder, in a runs folder (the index, job profiles, share keys) and in a
# run folder (a sender's offsets); the indexer reads neither as a run nor as a run's file.
STATE_DIR = ".runwatch"

PHASES = (
    "QUEUED",
    "PREPARING",
    "RUNNING",
    "CANCEL_REQUESTED",
    "SUCCEEDED",
    "FAILED",
    "CANCELLED",
)

# The groups of phases every reader of runs uses (the API's actions, the CLI, health):
# a run has ended in a terminal phase; a process is at work on an active one; a run can
# be cancelled until it is told to stop, and retried once it has ended. A new run starts
# in one of the start phases.
TERMINAL_PHASES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
ACTIVE_PHASES = frozenset({"PREPARING", "RUNNING", "CANCEL_REQUESTED"})
# The phases in which a run trains: its training time is what it spent in them over all its
# attempts (runwatch.analysis.results.training_s; the web app's Cost card, format.gen.ts).
TRAINING_PHASES = ("RUNNING", "CANCEL_REQUESTED")
CANCELLABLE_PHASES = frozenset({"QUEUED", "PREPARING", "RUNNING"})
RETRYABLE_PHASES = TERMINAL_PHASES
START_PHASES = ("QUEUED", "PREPARING", "RUNNING")
# The reason the SDK's final event carries (after any other) when records were not written
# (`records_lost`): "1 record could not be written: the disk refused it", "<n> records
# could not be written: they were larger than a reader reads". RECORDS_LOST is what every
# such reason holds, older runs' "1 records … them" too: the run list marks a run by it.
RECORDS_LOST = "could not be written"


def records_lost(count: int, why_one: str = "the disk refused it",
                 why_many: str = "the disk refused them") -> str:
    """The reason (or the part of one) that says `count` records could not be written,
    and why."""
    return f"1 record {RECORDS_LOST}: {why_one}" if count == 1 else \
        f"{count} records {RECORDS_LOST}: {why_many}"


def phase_named(text: str) -> str:
    """The phase `text` names, in any case (`succeeded` is SUCCEEDED); a ValueError that
    lists the phases for a word that is none of them."""
    phase = text.strip().upper()
    if phase not in PHASES:
        raise ValueError(f"{text!r} is not a phase: {', '.join(PHASES)}")
    return phase


# What job control tells a run's process (runwatch.init attaches to that folder).
ENV_RUN_DIR = "RUNWATCH_RUN_DIR"
ENV_RUN_ID = "RUNWATCH_RUN_ID"
ENV_ATTEMPT = "RUNWATCH_ATTEMPT"

CHECKPOINT_KINDS = ("training", "inference")
# Log levels from least to most severe, with the ranks of Python's logging module.
LOG_LEVEL_RANK = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
LOG_LEVELS = tuple(LOG_LEVEL_RANK)
SPLITS = ("train", "val")

MAX_NAME_LENGTH = 128
MAX_KEY_LENGTH = 256
# The most metrics one record may hold, and the most metric keys a run may have: the index
# drops a record over the first (the SDK splits a wider log() into records of one step)
# and the keys over the second (log() refuses them)
MAX_METRICS_PER_RECORD = 2_000
MAX_KEYS_PER_RUN = 10_000
# The fields every metrics record has beside its metrics: no metric takes these names.
RECORD_FIELDS = ("step", "ts", "seq")
# A metrics record's step is a 64-bit integer in the index.
MAX_STEP = 2**63 - 1

# The manifest field a resume adds to: [from, to] spans in which no process of a run started
# by hand lived (killed, then resumed later), which its cost leaves out (jobs.cost)
DEAD_SPANS = "dead_spans"
_FROM_INIT = "give it to runwatch.init(), which writes it once"
_FROM_PROCESS = "the SDK records it for the process that writes the run"
_FROM_RESUME = "a resume (runwatch.init(resume=True)) or job control sets it"
_FROM_IMPORT = "runwatch import writes it for a run it made from another tool's log"
# The manifest fields the format defines (docs/run-format.md), each with what writes it:
# Run.set_manifest_fields() refuses them, since a loop that rewrote `run_id` or `name`
# left the index with two runs, one stuck RUNNING. `wandb_url` is not among them: adding
# it is what set_manifest_fields is for.
MANIFEST_OWNED = {
    "schema_version": "the run format's version: runwatch.init writes it",
    "run_id": "a run's id is made once, by runwatch.init, and never changes",
    "created_at": "runwatch.init writes when the run was made",
    **dict.fromkeys(("name", "project", "group", "tags", "method", "base_model", "dataset",
                     "trainer", "backend"), _FROM_INIT),
    **dict.fromkeys(("host", "pid", "python", "platform", "argv", "packages", "git"),
                    _FROM_PROCESS),
    **dict.fromkeys(("resumed_at", "attached_at", "attempt", "dead_spans"), _FROM_RESUME),
    **dict.fromkeys(("imported_from", "imported_times"), _FROM_IMPORT),
}

# matched whole (fullmatch): `$` would let a name end in a newline
_NAME_RE = re.compile(r"[A-Za-z0-9._-]+")
_SAMPLE_RE = re.compile(r"(step|val)_([0-9]{4,})_([A-Za-z0-9_-]+)\.json")


class RunDirError(ValueError):
    """A run directory, a file in it, or a name for one is not valid format v1."""


def validate_name(name: str, what: str = "run name") -> str:
    """Return `name` if it is safe as a single path component, else raise RunDirError."""
    if not isinstance(name, str) or not name:
        raise RunDirError(f"the {what} is empty: use letters, digits, '.', '_' or '-' "
                          "(letters A-Z and a-z only)")
    if len(name) > MAX_NAME_LENGTH:
        raise RunDirError(f"the {what} {name[:40]!r}… is longer than {MAX_NAME_LENGTH} characters")
    if name in (".", "..") or not _NAME_RE.fullmatch(name):
        raise RunDirError(
            f"the {what} {name!r} may only hold letters, digits, '.', '_' and '-', its "
            "letters A-Z and a-z only (ASCII: no é or 实), no spaces or path separators, "
            "never '..': choose a name of those"
        )
    return name


def default_run_name(prefix: str) -> str:
    """A fresh run name: `<prefix>-<YYYYmmdd-HHMMSS>-<4 hex digits>`."""
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"


def validate_step(step: object) -> str | None:
    """Return why a metrics record's step is unusable, or None when it is fine: a step is
    an int (a bool is not one) from 0 to MAX_STEP, what the index's step column holds."""
    if type(step) is not int:
        return (f"step {step!r:.40} is a {type(step).__name__}; steps are whole numbers "
                "(int, not bool) >= 0")
    if step < 0:
        return f"step {step} is negative; steps are whole numbers >= 0"
    if step > MAX_STEP:
        return f"step {step} is past 2**63-1, the largest step"
    return None


def validate_key(key: object) -> str | None:
    """Return why a metric key is unusable, or None when it is fine: a key is a string of
    1 to MAX_KEY_LENGTH characters (the SDK refuses any other at log(), the indexer drops
    it from a record)."""
    if not isinstance(key, str):
        return f"metric key {key!r} is not a string"
    if not key:
        return "a metric key is empty"
    if len(key) > MAX_KEY_LENGTH:
        return f"metric key {key[:40]!r}… is longer than {MAX_KEY_LENGTH} characters"
    return None


def levels_from(level: str) -> tuple[str, ...]:
    """The log levels at least as severe as `level` (one of LOG_LEVELS)."""
    return tuple(lv for lv in LOG_LEVELS if LOG_LEVEL_RANK[lv] >= LOG_LEVEL_RANK[level])


def typescript() -> str:
    """web/src/format.gen.ts: the log levels and phase groups for the web app (a test
    keeps it current)."""
    ranks = ", ".join(f"{name}: {rank}" for name, rank in LOG_LEVEL_RANK.items())
    return ("// Generated from src/runwatch/rundir/format.py by its typescript(); do not edit:\n"
            "// change format.py and write this file again (see docs/web.md).\n\n"
            "// Log levels from least to most severe, with their ranks.\n"
            f"export const LOG_LEVEL_RANK: Record<string, number> = {{ {ranks} }};\n"
            "\n// Phases in which a run has ended, and in which it holds its devices.\n"
            f"export const TERMINAL_PHASES: readonly string[] = "
            f"{json.dumps(sorted(TERMINAL_PHASES))};\n"
            f"export const ACTIVE_PHASES: readonly string[] = "
            f"{json.dumps(sorted(ACTIVE_PHASES))};\n"
            "\n// Phases in which a run trains: its training time is its time in them.\n"
            f"export const TRAINING_PHASES: readonly string[] = "
            f"{json.dumps(list(TRAINING_PHASES))};\n"
            "\n// What the reason of the SDK's final event holds when records were not written "
            "(the disk refused them, they were too large for a reader, the writer failed).\n"
            f"export const RECORDS_LOST = {json.dumps(RECORDS_LOST)};\n")


def sample_file_name(step: int, split: str, kind: str = "completions") -> str:
    """The file of one step's samples: step_NNNN_<kind>.json (train) or val_NNNN_<kind>.json."""
    if split not in SPLITS:
        raise RunDirError(f"split {split!r} is not one of {', '.join(SPLITS)}")
    if not kind or "." in kind:
        raise RunDirError(f"sample kind {kind!r} must be letters, digits, '_' or '-'")
    prefix = "val" if split == "val" else "step"
    return f"{prefix}_{step:04d}_{validate_name(kind, 'sample kind')}.json"


def is_attempt_file(name: str) -> bool:
    """Whether a run folder's file `name` belongs to one attempt (metrics, checkpoints,
    samples, engine config): a new attempt moves these into attempts/<n>/, while the
    manifest, job.json, config, events and logs stay whole across attempts."""
    return (name in (METRICS, CHECKPOINTS, ENGINE_CONFIG)
            or parse_sample_file_name(name) is not None)


def is_attempt_folder(name: str) -> bool:
    """Whether a run folder's subfolder `name` belongs to one attempt: the checkpoint files,
    which move into attempts/<n>/ with the checkpoints.jsonl that names them relative to
    the folder it lies in."""
    return name == CHECKPOINT_DIR


def attempt_dir(run_dir: Path, attempt: int) -> Path:
    """The folder of attempt `attempt`'s files and output: <run>/attempts/<attempt>."""
    return run_dir / ATTEMPTS_DIR / str(attempt)


def parse_sample_file_name(name: str) -> tuple[int, str, str] | None:
    """(step, split, kind) for a samples file name, or None if `name` is not one."""
    m = _SAMPLE_RE.fullmatch(name)
    if not m:
        return None
    split = "val" if m.group(1) == "val" else "train"
    return int(m.group(2)), split, m.group(3)


def event_rate(record: dict[str, Any]) -> float | None:
    """An event's `hourly_rate` (a worker's PREPARING: the rate per device-hour it started
    the attempt at), when it is one: a finite number from 0; None for anything else, and
    the attempt is then priced at its device profile's rate."""
    value = record.get("hourly_rate")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None
