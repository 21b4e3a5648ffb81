"""A change counter the indexer and the ingest API bump, so idle streams query nothing.

The live streams' pollers (`runwatch.server.pollers`) still look at the database every
few seconds, which covers writers in other processes (a second server, `runwatch sync`)
that cannot bump this counter. Its generation moves when the index is made again (`reset`):
what was read of the index before (a run's pk, a key's id) names nothing, or another run,
in the one after.
"""

from __future__ import annotations

import asyncio
import threading
import time


class ChangeFeed:
    """A thread-safe version number; `wait` returns when it moves or after a timeout. The
    generation counts the times the index was made again."""

    def __init__(self) -> None:
        self._version = 0
        self._generation = 0
        self._lock = threading.Lock()
        self.closed = False

    @property
    def version(self) -> int:
        return self._version

    @property
    def generation(self) -> int:
        return self._generation

    def notify(self) -> None:
        with self._lock:
            self._version += 1

    def reset(self) -> None:
        """The index was made again (its file deleted or replaced, every run indexed anew
        under new pks): the live streams end, and their clients reconnect and find their
        runs by id afresh."""
        with self._lock:
            self._generation += 1
            self._version += 1

    def close(self) -> None:
        """The server is stopping: waits return at once and streams end."""
        self.closed = True

    async def wait(self, seen: int, timeout: float, poll: float = 0.05) -> int:
        """Wait until the version differs from `seen` or `timeout` passes; return the version."""
        deadline = time.monotonic() + timeout
        while self._version == seen and not self.closed and time.monotonic() < deadline:
            await asyncio.sleep(poll)
        return self._version
