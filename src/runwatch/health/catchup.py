"""Judging again the runs whose findings another rule catalogue made (an upgrade's).

A run's engine state records the catalogue that judged it (`store.CATALOGUE_MARK`). A run
that gets new points is judged again by the new rules at once (`store.on_metrics` finds
its state stale), but one that has ended gets none: it would keep the old engine's
findings until someone read it with `runwatch runs health`. `sweep` finds such runs with
one query, newest first, and judges each again on its stored points, reading on a
connection of its own and writing only to put the new findings in place of the old
(`store.replace`: a finding found again keeps its id and opened time), so the server's
answers never wait for it. The server runs one sweep when it starts (`Runner`), and
`runwatch index` one after its pass, so an index kept by the CLI alone is judged again too
(the other read commands show no findings; `runwatch runs health` judges the run it shows).
The catalogue's mark covers every rule field a stored finding copies (its advice, message
and severity: `runwatch.health.engine.catalogue_fingerprint`), so an upgrade that changes
only a rule's advice is one too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from sqlalchemy import Connection, Engine, select

from runwatch.health.store import CATALOGUE_MARK, replace, run_engine, stored_points
from runwatch.store import schema as s
from runwatch.store.db import unusable, writing

log = logging.getLogger(__name__)
# Stale runs read from the index at a time.
CHUNK = 100


def stale_runs(conn: Connection, below: int | None, limit: int) -> list[int]:
    """Up to `limit` runs judged by another catalogue, newest (highest pk) first, of pk
    below `below` (None: any)."""
    h = s.health_state.c
    query = select(h.run_pk).where(h.state.not_like(CATALOGUE_MARK + "%"))
    if below is not None:
        query = query.where(h.run_pk < below)
    return [int(pk) for pk in conn.execute(query.order_by(h.run_pk.desc()).limit(limit))
            .scalars()]


def rejudge(db: Engine, run_pk: int) -> bool:
    """Judge run `run_pk` again on its stored points if another catalogue judged it;
    whether its findings were replaced. The run is read and judged outside any write
    lock; the new findings are stored only if its state is still the one read (else
    new points or a reader judged it meanwhile, with these rules)."""
    h = s.health_state.c
    seen_q = select(h.state, h.last_seq).where(h.run_pk == run_pk)
    with db.connect() as conn:
        seen = conn.execute(seen_q).first()
        if seen is None or seen.state.startswith(CATALOGUE_MARK):
            return False
        try:
            engine = run_engine(conn, run_pk, None)
        except LookupError:  # the run left the index
            return False
        cols, last_seq = stored_points(conn, run_pk, -1)
    found = engine.feed(cols)
    with writing(db) as conn:
        if tuple(conn.execute(seen_q.with_for_update()).first() or ()) != tuple(seen):
            return False
        replace(conn, run_pk, engine, found, last_seq)
    return True


def sweep(db: Engine, chunk: int = CHUNK) -> Iterator[tuple[int, bool]]:
    """Judge again every run of the index that another catalogue judged, newest first:
    yields each run's pk, and whether its findings changed, after judging it (the caller
    may stop, or give way, between runs). A run whose judgement fails is logged and
    left as it was: health never stops the server. An index that cannot be used (a full
    disk, a damaged file) stops the sweep with `store.db.IndexUnusable`: every run would
    fail alike."""
    below: int | None = None
    while True:
        with db.connect() as conn:
            pks = stale_runs(conn, below, chunk)
        if not pks:
            return
        for pk in pks:
            below = pk
            try:
                changed = rejudge(db, pk)
            except Exception as exc:
                found = unusable(exc)
                if found is not None:
                    raise found from exc
                log.exception("judging run %s again with this runwatch's rules failed; "
                              "it keeps its findings", pk)
                changed = False
            yield pk, changed
