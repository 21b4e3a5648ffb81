"""A change counter the indexer and the ingest API bump, so idle streams query nothing.

The live streams' pollers (`runwatch.server.pollers`) still look at the database every
few seconds, which covers writers in other processes (a second server, `runwatch sync`)
that cannot bump this counter.
"""

from __future__ import annotations

import asyncio
import threading
import time


class ChangeFeed:
    """A thread-safe version number; `wait` returns when it moves or after a timeout."""

    def __init__(self) -> None:
        self._version = 0
        self._lock = threading.Lock()
        self.closed = False

    @property
    def version(self) -> int:
        return self._version

    def notify(self) -> None:
        with self._lock:
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
