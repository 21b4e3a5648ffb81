"""The run detail: state, results, cost and settings of one run, as the CLI and API show it."""

from __future__ import annotations

import math
from typing import Any

import orjson
import yaml
from sqlalchemy import Connection, Row, func, select

from runwatch.analysis.timing import duration_s, phase_millis
from runwatch.store import queries as q
from runwatch.store import schema as s
from runwatch.store.points import in_key

RESULT_KEYS = {
    "train_loss": "loss",
    "val_loss": "val/loss",
    "val_accuracy": "val/accuracy",
    "accuracy": "accuracy",
    "reward_mean": "reward_mean",
    "val_reward_mean": "val/reward_mean",
    "val_preference_accuracy": "val/preference_accuracy",
    "val_mean_margin": "val/mean_margin",
}


def run_detail(conn: Connection, run: Row[Any], settings: bool = True) -> dict[str, Any]:
    """Everything known about a run, as plain JSON-ready data."""
    evs = q.events(conn, run.pk)
    last = q.last_values(conn, run.pk)
    ckpts = q.checkpoints(conn, run.pk)
    manifest = orjson.loads(run.manifest) if run.manifest else {}
    gone = q.process_gone(run)
    millis = phase_millis(evs)
    finished = run.status in ("SUCCEEDED", "FAILED", "CANCELLED")
    detail: dict[str, Any] = {
        "run_id": run.run_id,
        "name": run.name,
        "state": {
            "project": run.project,
            "group": run.group_name,
            "tags": orjson.loads(run.tags or "[]"),
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
            "process_gone": gone,
            "created_at": run.created_at,
            "started_at": run.started_at,
            "ended_at": run.ended_at,
            "updated_at": run.updated_at,
        },
        "results": {
            **{name: _last(last, key) for name, key in RESULT_KEYS.items() if key in last},
            "best_train_loss": _best_loss(conn, run.pk) if "loss" in last else None,
            "registered_model": next((c["id"] for c in reversed(ckpts)
                                      if c["kind"] == "inference"), None),
        },
        "cost": {
            "duration_s": duration_s(evs),
            "timing": {"phaseMillis": millis},
            # Device time is the training time times the devices the run says it used;
            # it is marked as an estimate until the run ends.
            "device_seconds": millis.get("RUNNING", 0) / 1000 * int(manifest.get("devices") or 1),
            "device_seconds_estimate": not finished,
            "last_step_time_s": _last(last, "timing/step_total_s"),
            "peak_memory_bytes": {k.split("/", 1)[1]: v["value"] for k, v in last.items()
                                  if k.startswith("memory/")},
        },
        "checkpoints": ckpts,
        "metrics": sorted(last),
        "manifest": manifest,
        "problems": q.problems(conn, run.pk),
        "dir": run.dir,
    }
    if settings:
        detail["settings"] = {
            "config": _yaml(run.config),
            "engine_config": orjson.loads(run.engine_config) if run.engine_config else None,
        }
    return detail


def _last(last: dict[str, Any], key: str, field: str = "value") -> Any:
    entry = last.get(key)
    return None if entry is None else entry[field]


def _best_loss(conn: Connection, run_pk: int) -> float | None:
    kid = q.metric_keys(conn, run_pk).get("loss")
    if kid is None:
        return None
    p = s.metric_points.c
    best = conn.execute(select(func.min(p.value)).where(in_key(p.id, kid)))
    value = best.scalar()
    return None if value is None or not math.isfinite(value) else float(value)


def _yaml(text: str | None) -> Any:
    if not text:
        return None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text
