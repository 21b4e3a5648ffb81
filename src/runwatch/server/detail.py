"""The run detail for the API: the store's detail plus tiles, summary line and stream cursor."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from sqlalchemy import Connection, Row, func, select

from runwatch.server.runs import ACTIVE, TERMINAL, run_summary, summary_line
from runwatch.server.state import ServerState
from runwatch.store import detail as store_detail
from runwatch.store import schema as s
from runwatch.store.points import newest_seq
from runwatch.store.series import KeyInfo, run_keys

TRAIN_LOSS = ("loss", "train_loss", "train/loss")
EVAL_LOSS = ("val/loss", "val_loss", "eval/loss", "eval_loss")
REWARD = ("reward_mean", "reward", "train/reward_mean")
EXAMPLES = ("samples", "examples", "num_examples")
TOKENS = ("trained_tokens", "tokens", "num_tokens")
GRAD_ACCUM = ("gradient_accumulation_steps", "grad_accum", "grad_accum_steps",
              "gradient_accumulation")


def _first(by_key: dict[str, KeyInfo], names: tuple[str, ...]) -> KeyInfo | None:
    return next((by_key[n] for n in names if n in by_key), None)


def _find_setting(config: Any, names: tuple[str, ...]) -> Any:
    """The first of `names` anywhere in a nested config mapping."""
    if isinstance(config, dict):
        for k, v in config.items():
            if k in names and isinstance(v, int | float):
                return v
        for v in config.values():
            found = _find_setting(v, names)
            if found is not None:
                return found
    return None


def stream_cursor(conn: Connection, run_pk: int, keys: list[KeyInfo]) -> str:
    """The high-water marks (metrics.logs.events.checkpoints seq) a stream resumes after."""
    newest = newest_seq(conn, [k.id for k in keys])
    marks = [-1 if newest is None else newest]
    for table in (s.logs, s.events, s.checkpoints):
        top = conn.execute(select(func.max(table.c.seq)).where(table.c.run_pk == run_pk)).scalar()
        marks.append(-1 if top is None else int(top))
    return ".".join(str(x) for x in marks)


def run_detail(conn: Connection, st: ServerState, row: Row[Any]) -> dict[str, Any]:
    """The store's run detail (as the CLI shows it) plus what the web app needs."""
    now = time.time()
    keys = run_keys(conn, row.pk)
    by_key = {k.key: k for k in keys}

    def series_stat(names: tuple[str, ...], how: str) -> float | None:
        info = _first(by_key, names)
        if info is None:
            return None
        values = st.cache.get(conn, row.pk, info).value
        finite = values[np.isfinite(values)]
        if not finite.size:
            return None
        return float(finite.min() if how == "min" else finite.sum())

    detail = store_detail.run_detail(conn, row, settings=True)
    train, evl, reward = (_first(by_key, n) for n in (TRAIN_LOSS, EVAL_LOSS, REWARD))
    config = detail.get("settings", {}).get("config")
    summary = run_summary(row, now)
    steps = row.observed_step
    if steps is None and keys:
        steps = max((k.last_step for k in keys if k.last_step is not None), default=None)
    detail["settings"]["config_text"] = row.config
    detail.update({
        "ok": True,
        "run": summary,
        "summary": summary_line(row),
        "scalars": {
            "steps": steps,
            "examples": series_stat(EXAMPLES, "sum"),
            "tokens": series_stat(TOKENS, "sum"),
            "grad_accum": _find_setting(config, GRAD_ACCUM),
            "best_train_loss": series_stat(TRAIN_LOSS, "min"),
            "latest_train_loss": _finite(train.last_value) if train else None,
            "eval_loss": _finite(evl.last_value) if evl else None,
            "mean_reward": _finite(reward.last_value) if reward else None,
        },
        "actions": {"cancel": row.status in ACTIVE, "retry": row.status in TERMINAL},
        "cursor": stream_cursor(conn, row.pk, keys),
    })
    return detail


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
