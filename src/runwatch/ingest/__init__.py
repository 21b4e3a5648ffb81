"""Turning records, from run-directory files or HTTP batches, into index rows."""

from runwatch.ingest.indexer import Indexer, IndexReport
from runwatch.ingest.records import IngestResult, ingest_records

__all__ = ["IndexReport", "Indexer", "IngestResult", "ingest_records"]
