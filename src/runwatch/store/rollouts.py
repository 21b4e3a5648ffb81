"""The rollouts (samples) a run kept: which steps, and one step's, sorted or in order."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, func, select

from runwatch.store import schema as s
from runwatch.store.queries import json_or_text
from runwatch.store.reward_terms import terms_of


class NoRollouts(LookupError):
    """The run kept no rollouts at the step (and split) asked for."""


def sample_dict(row: Any) -> dict[str, Any]:
    """One stored sample as the API and CLI show it."""
    data = json_or_text(row.data)
    data = data if isinstance(data, dict) else {}
    tokens = data.get("tokens") if isinstance(data.get("tokens"), dict) else {
        k: v for k, v in data.items() if k.endswith("_tokens") and isinstance(v, int | float)}
    return {
        "index": row.idx,
        "prompt": data.get("prompt", json_or_text(row.prompt)),
        "completion": data.get("completion", json_or_text(row.completion)),
        "reward": row.reward,
        "reward_terms": terms_of(data),
        "advantage": row.advantage,
        "group": row.group_id,
        "truncated": row.truncated,
        "tokens": tokens,
        "data": {k: v for k, v in data.items() if k not in ("prompt", "completion")},
    }


def rollouts(
    conn: Connection,
    run_pk: int,
    step: int | None = None,
    split: str | None = None,
    best: int | None = None,
    worst: int | None = None,
    limit: int = 100,
    offset: int = 0,
) -> dict[str, Any]:
    """One step's rollouts: the latest kept step unless `step` is given (train before val).

    `best`/`worst` sort by reward and keep the first N; otherwise the first `limit` in
    scoring order. `offset` skips that many first (in the same order), so a client pages
    through a step's rollouts. Raises NoRollouts when `step` names a step the run did not
    keep.
    """
    c = s.samples.c
    available = conn.execute(
        select(c.step, c.split, func.count()).where(c.run_pk == run_pk)
        .group_by(c.step, c.split).order_by(c.step.desc(), c.split)
    ).all()
    avail = [{"step": a, "split": b, "count": n} for a, b, n in available]
    chosen = [a for a in avail if (step is None or a["step"] == step)
              and (split is None or a["split"] == split)]
    if not chosen:
        if step is not None:
            where = f"{split} " if split else ""
            raise NoRollouts(f"the run kept no {where}rollouts at step {step}")
        return {"available": avail, "step": None, "split": None, "total": 0, "samples": []}
    pick = next((a for a in chosen if a["split"] == "train"), chosen[0])
    stmt = select(s.samples).where(c.run_pk == run_pk, c.step == pick["step"],
                                   c.split == pick["split"])
    if best is not None:
        stmt = stmt.order_by(c.reward.is_(None), c.reward.desc(), c.idx).limit(best)
    elif worst is not None:
        stmt = stmt.order_by(c.reward.is_(None), c.reward.asc(), c.idx).limit(worst)
    else:
        stmt = stmt.order_by(c.file, c.idx).limit(limit)
    rows = conn.execute(stmt.offset(offset) if offset else stmt).all()
    return {"available": avail, "step": pick["step"], "split": pick["split"],
            "total": pick["count"], "samples": [sample_dict(r) for r in rows]}
