"""What every request handler shares: the engine, the series cache, the change feed, limits,
and the pollers of the live streams."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import Request
from sqlalchemy import Connection, Engine

from runwatch.jobs.control import RETRY_WAIT_S
from runwatch.rundir.format import MAX_LINE_BYTES
from runwatch.server.feed import ChangeFeed
from runwatch.server.series_cache import SeriesCache
from runwatch.server.settle import Gone, by_row

if TYPE_CHECKING:  # the pollers read through modules that import this one
    from runwatch.server.pollers import Hub


# What a request of one record holds beside its line: `{"batches":[{"run_id", "file",
# "records":[…]}]}` (a run id is at most 64 characters; the sender sends no manifest with it).
ONE_RECORD_ENVELOPE = 4096


@dataclass(frozen=True)
class Limits:
    """Size limits of the ingest API (each is documented in docs/api.md)."""

    max_body_bytes: int = 8 * 1024 * 1024
    max_records: int = 10_000
    max_batches: int = 100
    # A request of one batch of one record may be larger than max_body_bytes, up to the
    # longest line of a record file and its envelope, so that every line a reader of the
    # run folder reads can be sent; it says its Content-Length up front (or is gzip).
    max_one_record_bytes: int = MAX_LINE_BYTES + ONE_RECORD_ENVELOPE


@dataclass
class ServerState:
    engine: Engine
    cache: SeriesCache = field(default_factory=SeriesCache)
    feed: ChangeFeed = field(default_factory=ChangeFeed)
    runs_dir: Path | None = None
    token: str | None = None
    limits: Limits = field(default_factory=Limits)
    poll_interval: float = 0.1
    heartbeat: float = 15.0
    hub: Hub | None = None  # made by the first live stream (`runwatch.server.pollers.hub`)
    # how long a retry waits for a process to let go of the run's folder before its 503
    lock_wait_s: float = RETRY_WAIT_S
    # what says whether a run's process is gone, taken before the rows it judges are
    # read (server/settle.py: once the indexer has read the folder since it saw it dead)
    judge: Callable[[], Gone] = by_row
    # what the indexer's last whole pass said of the runs folder as a whole (IndexReport.
    # folder_notes), replaced in place by the runner after each pass
    folder_notes: list[str] = field(default_factory=list)


def state(request: Request) -> ServerState:
    st: ServerState = request.app.state.runwatch
    return st


def connection(request: Request) -> Iterator[Connection]:
    """A read connection for one request."""
    with state(request).engine.connect() as conn:
        yield conn
