"""The pollers behind live streams, over a real index the real indexer fills: a stream
that stops reading does not hold the others up, is not queued for without bound, and
when it reads again it catches up from its own cursor, missing nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import Engine

from runwatch.ingest import Indexer
from runwatch.sdk import init
from runwatch.server.detail import stream_cursor
from runwatch.server.feed import ChangeFeed
from runwatch.server.pollers import Hub
from runwatch.server.updates import RunCursor
from runwatch.store.keys import run_keys
from runwatch.store.queries import resolve_run
from tests.support import wait_for

LIMIT = 3  # looks' updates queued for a stream before it is behind
ROUNDS = 8  # looks with news, more than LIMIT
DEADLINE_S = 30.0


def test_a_stream_that_stops_reading_is_dropped_behind_and_catches_up(
        engine: Engine, runs_dir: Path) -> None:
    run = init(name="chatty", dir=runs_dir, flush_interval=0.02)
    indexer = Indexer(engine, runs_dir)
    wait_for(lambda: indexer.index_once().new_runs, what="the run to be indexed")
    with engine.connect() as conn:
        run_pk = int(resolve_run(conn, "chatty").pk)
        start = RunCursor.parse(stream_cursor(conn, run_pk, run_keys(conn, run_pk)))
    feed = ChangeFeed()
    expected = [f"line {r}" for r in range(ROUNDS)]

    def write_rounds(fast: list[str]) -> None:
        """One log line per round, each indexed and read by the fast stream before the next."""
        for r in range(ROUNDS):
            run.log_text(f"line {r}")

            def seen(r: int = r) -> bool:
                indexer.index_once()
                feed.notify()
                return len(fast) > r

            wait_for(seen, what=f"the fast stream to get line {r}")

    async def main() -> tuple[list[str], list[str], bool]:
        hub = Hub(engine, feed, poll_interval=0.01, queue_limit=LIMIT)
        fast_logs: list[str] = []
        slow_logs: list[str] = []

        async def read_fast() -> None:
            async for got in hub.follow_run(run_pk, start):
                if got is not None and got[0].event == "log":
                    fast_logs.append(got[0].data["message"])
                    if len(fast_logs) == ROUNDS:
                        return

        slow = hub.follow_run(run_pk, start)

        async def read_slow() -> None:
            async for got in slow:
                if got is not None and got[0].event == "log":
                    slow_logs.append(got[0].data["message"])
                    if len(slow_logs) == ROUNDS:
                        return

        fast = asyncio.create_task(read_fast())
        first = await asyncio.wait_for(anext(slow), DEADLINE_S)  # joined; now it stops reading
        # nothing was logged yet: a stream begins with the run's phase as it is now
        assert first is not None and first[0].event == "phase"
        await asyncio.to_thread(write_rounds, fast_logs)
        await asyncio.wait_for(fast, DEADLINE_S)
        (poller,) = hub._runs.values()
        behind = [sub for sub in poller.subscribers if sub.behind]
        # the poller let go of what the slow stream did not read: one marker is queued
        was_dropped = len(behind) == 1 and behind[0].queue.qsize() == 1
        await asyncio.wait_for(read_slow(), DEADLINE_S)
        await slow.aclose()
        return fast_logs, slow_logs, was_dropped

    fast_logs, slow_logs, was_dropped = asyncio.run(main())
    assert fast_logs == expected
    assert was_dropped
    assert slow_logs == expected  # every line once, in order, after catching up
    run.finish("SUCCEEDED")
