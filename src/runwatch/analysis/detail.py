"""The run detail: one run's state, results, cost, tiles and settings, as both
`runwatch runs get -o json` and `GET /api/runs/{run}` send it (see docs/api.md)."""

from __future__ import annotations

import time
from typing import Any

import orjson
import yaml

from runwatch.analysis.results import SeriesValues, cost, results, scalars
from runwatch.analysis.views import actions, checkpoint_entry, run_summary, summary_line
from runwatch.rundir.format import TERMINAL_PHASES
from runwatch.store.detail import RunRecords


def run_detail(rec: RunRecords, values: SeriesValues, now: float | None = None
               ) -> dict[str, Any]:
    """Everything known about a run, as plain JSON-ready data.

    `values` gives a key's series values (the server passes its cache, the CLI reads
    the index)."""
    now = time.time() if now is None else now
    run = rec.row
    manifest = _json(run.manifest) or {}
    config = _yaml(run.config)
    summary = run_summary(run, now)
    tiles = scalars(rec.keys, values, config, run.observed_step)
    return {
        "run_id": run.run_id,
        "name": run.name,
        "run": summary,
        "summary": summary_line(run),
        "state": {
            "project": run.project,
            "group": run.group_name,
            "tags": summary["tags"],
            "method": run.method,
            "base_model": run.base_model,
            "dataset": run.dataset,
            "trainer": run.trainer,
            "backend": run.backend,
            "phase": run.status,
            "stage": run.stage,
            "progress": ({"done": run.progress_done, "total": run.progress_total}
                         if run.progress_total is not None else None),
            "observed_step": run.observed_step,
            "saved_step": run.saved_step,
            "reason": run.reason,
            "process_gone": rec.process_gone,
            "created_at": run.created_at,
            "started_at": run.started_at,
            "ended_at": run.ended_at,
            "updated_at": run.updated_at,
        },
        "results": results(rec.keys, tiles["best_train_loss"], rec.checkpoints),
        # a run whose process is gone stopped at its last record, not now
        "cost": cost(rec.events, rec.keys, int(manifest.get("devices") or 1),
                     summary["duration_s"], run.status in TERMINAL_PHASES,
                     run.updated_at if rec.process_gone and run.updated_at else now),
        "scalars": tiles,
        "actions": actions(run.status),
        "checkpoints": [checkpoint_entry(c) for c in rec.checkpoints],
        "metrics": [k.key for k in rec.keys],
        "manifest": manifest,
        "problems": rec.problems,
        "dir": run.dir,
        "settings": {
            "config": config,
            "config_text": run.config,
            "engine_config": _json(run.engine_config),
        },
    }


def _json(text: str | None) -> Any:
    return orjson.loads(text) if text else None


def _yaml(text: str | None) -> Any:
    if not text:
        return None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text
