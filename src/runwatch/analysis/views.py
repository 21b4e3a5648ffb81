"""The JSON views of a run that the CLI and the API share: its summary, its one-line
description, the actions its phase allows, a checkpoint and a log line.

Both `runwatch runs … -o json` and the HTTP API send exactly these shapes (see
docs/api.md); timestamps are ISO 8601 text in UTC. A row is a SQLAlchemy row or a plain
one with the same attributes (store/runrows.py: `runs list` reads without SQLAlchemy).
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from runwatch.analysis.timing import dead_spans, iso, run_duration_s
from runwatch.rundir.format import CANCELLABLE_PHASES, DEAD_SPANS, RETRYABLE_PHASES
from runwatch.store.runrows import json_or_text, process_gone


def run_summary(row: Any, now: float | None = None, gone: bool | None = None
                ) -> dict[str, Any]:
    """A run's list fields: what the run list, the CLI's table and the streams carry.

    `process_gone` is true for a run that has not ended but whose training process (on
    this host) is no longer alive; its duration then stops at its last record. `gone` is
    that verdict where the caller made it with the row (cli Context.current_run), so the
    summary does not judge again a process that died since."""
    if gone is None:
        gone = process_gone(row)
    try:
        tags = orjson.loads(row.tags or "[]")
    except orjson.JSONDecodeError:
        tags = []
    return {
        "run_id": row.run_id,
        "name": row.name,
        "project": row.project,
        "group": row.group_name,
        "tags": tags,
        "method": row.method,
        "base_model": row.base_model,
        "dataset": row.dataset,
        "trainer": row.trainer,
        "backend": row.backend,
        "status": row.status,
        "process_gone": gone,
        "stage": row.stage,
        "attempt": row.attempt,
        "reason": row.reason,
        "reason_code": row.reason_code,
        "created_at": iso(row.created_at),
        "started_at": iso(row.started_at),
        "ended_at": iso(row.ended_at),
        "duration_s": run_duration_s(row.started_at, row.ended_at, row.updated_at, gone,
                                     time.time() if now is None else now, _idle(row)),
        "observed_step": row.observed_step,
        "saved_step": row.saved_step,
    }


def _idle(row: Any) -> list[tuple[float, float]]:
    """The spans in which no process of a hand-started run lived (its manifest's
    `dead_spans`): no training time. Read only where the manifest's text holds them."""
    text = row.manifest
    if not text or DEAD_SPANS not in (text if isinstance(text, str) else str(text)):
        return []
    try:
        manifest = orjson.loads(text)
    except orjson.JSONDecodeError:
        return []
    return dead_spans(manifest.get(DEAD_SPANS)) if isinstance(manifest, dict) else []


def summary_line(row: Any) -> str:
    """One sentence: "Training <model> with <trainer> on <dataset> via <backend> (<method>)."."""
    parts = [f"Training {row.base_model or 'a model'}"]
    if row.trainer:
        parts.append(f"with {row.trainer}")
    if row.dataset:
        parts.append(f"on {row.dataset}")
    if row.backend:
        parts.append(f"via {row.backend}")
    text = " ".join(parts)
    if row.method:
        text += f" ({row.method.upper()})"
    return text + "."


def actions(status: str, job: bool, process_here: bool) -> dict[str, bool]:
    """Which job-control actions a run allows (`runwatch.jobs.control` does them).

    A job (a run submitted to the queue) can be cancelled until it is told to stop and
    retried once it has ended. A run started by hand has no job to requeue, so it is never
    retried (start its command again), and it can be cancelled only while it is preparing
    or running in a process on this host (`process_here`), which is sent SIGTERM."""
    if job:
        return {"cancel": status in CANCELLABLE_PHASES, "retry": status in RETRYABLE_PHASES}
    return {"cancel": process_here and status in CANCELLABLE_PHASES - {"QUEUED"},
            "retry": False}


def checkpoint_entry(row: Any) -> dict[str, Any]:
    """One checkpoint of a run (a `checkpoints` row); fields beyond the format's are `extra`."""
    return {"seq": row.seq, "ts": iso(row.ts), "step": row.step, "kind": row.kind,
            "id": row.ckpt_id, "path": row.path, "extra": json_or_text(row.data) or {}}


def log_entry(row: Any) -> dict[str, Any]:
    """One log line of a run (a `logs` row): seq, time, level (upper case), message, data."""
    return {"seq": row.seq, "ts": iso(row.ts), "level": row.level.upper(),
            "message": row.message, "data": json_or_text(row.data)}
