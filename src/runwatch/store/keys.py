"""The one reader of a run's metric keys (`metric_keys` table).

Every layer that needs a run's keys (ingest, the series, history, health, the API)
reads them here: `run_keys` for the key records with the counts the ingest keeps
current, `metric_keys` for the name-to-id map the point readers take.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, select

from runwatch.store import schema as s


@dataclass(frozen=True)
class KeyInfo:
    """One metric key of a run, with the counts the ingest keeps current."""

    id: int
    key: str
    points: int
    last_step: int | None
    last_value: float | None


def run_keys(conn: Connection, run_pk: int) -> list[KeyInfo]:
    """The metric keys of a run, sorted by name."""
    k = s.metric_keys.c
    rows = conn.execute(
        select(k.id, k.key, k.points, k.last_step, k.last_value)
        .where(k.run_pk == run_pk).order_by(k.key)
    )
    return [KeyInfo(r.id, r.key, int(r.points or 0), r.last_step, r.last_value) for r in rows]


def metric_keys(conn: Connection, run_pk: int) -> dict[str, int]:
    """The id of each metric key of a run, by name (sorted by name)."""
    return {info.key: info.id for info in run_keys(conn, run_pk)}
