"""Turning records, from run-directory files or HTTP batches, into index rows.

The names below load the indexer (and SQLAlchemy) on first use, so a module of this
package that does not need them (ingest/unchanged.py) is imported without them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runwatch.ingest.indexer import Indexer, IndexReport
    from runwatch.ingest.records import IngestResult, ingest_records

__all__ = ["IndexReport", "Indexer", "IngestResult", "ingest_records"]


def __getattr__(name: str) -> Any:
    if name in ("Indexer", "IndexReport"):
        from runwatch.ingest import indexer

        return getattr(indexer, name)
    if name in ("IngestResult", "ingest_records"):
        from runwatch.ingest import records

        return getattr(records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
