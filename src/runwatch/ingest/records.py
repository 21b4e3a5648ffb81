"""Turning run-directory records into rows, idempotently on (run, file, seq).

Both the folder indexer and the HTTP ingest API call `ingest_records`; rows whose
(run, file, seq) is already stored are ignored, so a batch may be sent twice. Metrics
take the fast path of `runwatch.ingest.points`; events, checkpoints and logs are the
run's lifecycle (`runwatch.ingest.lifecycle`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection

from runwatch.ingest.lifecycle import store_checkpoints, store_events, store_logs
from runwatch.ingest.points import store_metrics
from runwatch.ingest.result import IngestResult
from runwatch.rundir import format as fmt

__all__ = ["IngestResult", "ingest_records"]


def ingest_records(
    conn: Connection, run_pk: int, file: str, records: Iterable[dict[str, Any]]
) -> IngestResult:
    """Store `records` of one record file of a run; returns counts and problems."""
    if file == fmt.METRICS:
        return store_metrics(conn, run_pk, records)
    if file == fmt.EVENTS:
        return store_events(conn, run_pk, records)
    if file == fmt.CHECKPOINTS:
        return store_checkpoints(conn, run_pk, records)
    if file == fmt.LOGS:
        return store_logs(conn, run_pk, records)
    raise ValueError(f"{file!r} is not a record file of format v1 ({', '.join(fmt.FILES)})")
