"""The contribution of each reward term at each step: the mean of each numeric term over the
step's rollouts, a split at a time. `runs metrics`, the history route and the TensorBoard
export all report these means."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

import orjson
from sqlalchemy import Connection, select

from runwatch.store import schema as s

# split -> term -> mean over that split's rollouts at one step
SplitTerms = dict[str, dict[str, float]]


def terms_of(data: Any) -> dict[str, Any]:
    """A stored sample's reward terms: its `reward_terms`, else its `terms` (the rule
    `runwatch.store.rollouts.sample_dict` shows them by)."""
    if not isinstance(data, dict):
        return {}
    terms = data.get("reward_terms") or data.get("terms") or {}
    return terms if isinstance(terms, dict) else {}


def term_means(terms: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The mean of each numeric reward term over the rollouts (one mapping of terms each)
    that report it, terms in name order; a boolean or text term is no contribution."""
    values: dict[str, list[float]] = {}
    for one in terms:
        for term, v in one.items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                values.setdefault(str(term), []).append(float(v))
    return {t: sum(vs) / len(vs) for t, vs in sorted(values.items())}


def step_terms(conn: Connection, run_pk: int, step_min: int | None = None,
               step_max: int | None = None, only: Collection[int] | None = None
               ) -> dict[int, SplitTerms]:
    """Each step of [step_min, step_max] (and of `only`, when given: a page's steps, a
    few hundred at most) whose rollouts report a numeric reward term: the mean of each
    term per split (splits in name order).

    Only the rollouts of those steps are read: a caller that pages (the history route) or
    reads in chunks (`runs metrics -o json`) pays for the steps it shows, not for the run.
    """
    c = s.samples.c
    stmt = select(c.step, c.split, c.data).where(c.run_pk == run_pk)
    if only is not None:
        stmt = stmt.where(c.step.in_(list(only)))
    if step_min is not None:
        stmt = stmt.where(c.step >= step_min)
    if step_max is not None:
        stmt = stmt.where(c.step <= step_max)
    grouped: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for step, split, data in conn.execute(stmt):
        try:
            terms = terms_of(orjson.loads(data))
        except orjson.JSONDecodeError:
            continue
        if terms:
            grouped.setdefault((int(step), str(split)), []).append(terms)
    out: dict[int, SplitTerms] = {}
    for (step, split), terms_list in sorted(grouped.items()):
        means = term_means(terms_list)
        if means:
            out.setdefault(step, {})[split] = means
    return out


def terms_page(conn: Connection, run_pk: int, step_min: int | None, step_max: int | None,
               limit: int) -> tuple[dict[int, SplitTerms], int | None]:
    """`step_terms` of the first `limit` steps of [step_min, step_max] that kept rollouts,
    and the step the next page starts at (None: this is the last). A page reads only its
    steps' rollouts, so a client can walk a long run a page at a time (the team server's
    `runs metrics`)."""
    c = s.samples.c
    stmt = select(c.step).distinct().where(c.run_pk == run_pk)
    if step_min is not None:
        stmt = stmt.where(c.step >= step_min)
    if step_max is not None:
        stmt = stmt.where(c.step <= step_max)
    steps = [int(x) for x in conn.execute(stmt.order_by(c.step).limit(limit + 1)).scalars()]
    more = steps[limit] if len(steps) > limit else None
    page = steps[:limit]
    return (step_terms(conn, run_pk, only=page) if page else {}), more
