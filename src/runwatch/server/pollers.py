"""One poller per watched run and one per watched run list, fanning out to the streams.

A poller looks at the database with a short-lived connection when the change feed
moves (or every FALLBACK_POLL_S) and offers what each look found to every stream that
watches, through a bounded queue per stream (one item per look). No connection is held
while a stream waits or sends, and all the streams' looks together use at most
STREAM_CONNECTIONS connections at once.

A stream whose client reads too slowly lets its queue fill. The poller never waits for
it: it empties that queue and marks the stream behind. The stream then catches up by
itself from its own cursor (reads of a page at a time, as a reconnecting client would)
and rejoins, so its client misses nothing and the server keeps at most QUEUE_LIMIT
looks' updates for it. A behind list stream is sent every watched run once, as a
reconnecting one is.

A poller reads its run by pk, which names another run (or none) once the index is made
again (its file deleted or replaced: every run is indexed anew, ChangeFeed.reset). Then
each poller ends its streams, and their clients reconnect and find their run by id
afresh, resuming at their cursor (a record's seq is the run folder's, the same in the
index made again). A run poller also ends its streams when its pk names another run than
at its first look, which is how a file replaced shows before the server tells.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool

from runwatch.server.detail import stream_cursor
from runwatch.server.feed import ChangeFeed
from runwatch.server.settle import Gone, by_row
from runwatch.server.state import ServerState
from runwatch.server.updates import (
    RunCursor,
    Update,
    findings_update,
    fingerprint,
    list_state,
    phase_now,
    run_marks,
    run_updates,
)
from runwatch.store.keys import run_keys

log = logging.getLogger("runwatch.server")
T = TypeVar("T")

QUEUE_LIMIT = 64  # looks' updates waiting for one stream before it is marked behind
STREAM_CONNECTIONS = 4  # database connections all live streams use at once, at most
FALLBACK_POLL_S = 2.0  # a poller looks this often even when nothing bumped the feed
LIST_INTERVAL_S = 1.0  # the list poller looks at most this often
RETRY_S = 1.0  # a look that failed is tried again after this
WAKE_S = 1.0  # a waiting stream wakes this often to check its client and the server

BEHIND = object()  # queued for a stream whose queue overflowed: catch up from the cursor
END = object()  # queued when the poller stops (the server is shutting down)
TICK = object()  # what a stream's wait gives after WAKE_S with nothing queued
START = object()  # a new run stream catches up from its cursor
READY = object()  # a new list stream says `ready`
RESEND = object()  # a resumed list stream is sent every watched run


class Subscriber:
    """One stream's bounded queue of looks' updates."""

    def __init__(self, limit: int) -> None:
        self.queue: asyncio.Queue[object] = asyncio.Queue(limit)
        self.behind = False

    def offer(self, item: object) -> None:
        """Queue `item` without ever waiting; a full queue makes the stream behind."""
        if self.behind:
            return
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            self.behind = True
            self._replace_all(BEHIND)

    def end(self) -> None:
        self._replace_all(END)

    def _replace_all(self, item: object) -> None:
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait(item)

    async def next(self) -> object:
        """The next queued item, or TICK after WAKE_S without one."""
        try:
            return await asyncio.wait_for(self.queue.get(), WAKE_S)
        except TimeoutError:
            return TICK


class RunMoved(Exception):
    """A stream's run pk names another run, or none: the index was made again."""


class Poller:
    """Looks at the database while anyone watches and offers each update to every one."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.subscribers: set[Subscriber] = set()
        self.ready = asyncio.Event()  # set once the first look has taken the baseline
        self.task: asyncio.Task[None] | None = None
        # the index it reads (ChangeFeed.generation), and whether its run left it
        self.generation = hub.feed.generation
        self.moved = False

    @property
    def stopped(self) -> bool:
        return self.task is None or self.task.done()

    @property
    def current(self) -> bool:
        """Whether its looks still read what its streams watch: not once the server
        stops, the index is made again, or its run's pk names another run."""
        feed = self.hub.feed
        return not feed.closed and feed.generation == self.generation and not self.moved

    def look(self) -> list[Update]:
        """One look (in a worker thread, with a connection of its own)."""
        raise NotImplementedError

    async def pause(self, version: int) -> None:
        await self.hub.feed.wait(version, FALLBACK_POLL_S, self.hub.poll_interval)

    def deliver(self, updates: list[Update]) -> None:
        for sub in self.subscribers:
            sub.offer(updates)

    async def run(self) -> None:
        feed = self.hub.feed
        try:
            while self.subscribers and self.current:
                version = feed.version
                try:
                    updates = await self.hub.read(self.look)
                except Exception as exc:  # the database is busy or gone: try again later
                    log.warning("a live stream's look at the database failed (%s); retrying", exc)
                    await asyncio.sleep(RETRY_S)
                    continue
                if not self.current:  # it may have read the index made again by old pks
                    break
                self.ready.set()
                if updates:
                    self.deliver(updates)
                await self.pause(version)
        finally:
            # no await since the last check: no stream can have joined in between
            self.hub.forget(self)
            for sub in self.subscribers:
                sub.end()


class RunPoller(Poller):
    """New points, logs, checkpoints, phase changes and findings of one run."""

    def __init__(self, hub: Hub, run_pk: int) -> None:
        super().__init__(hub)
        self.run_pk = run_pk
        self.cursor: RunCursor | None = None
        self.seen_counts: dict[int, int] = {}
        self.more = False
        self.stamp: float | None = None
        self.last_health: Update | None = None
        self.attempt = 1
        self.run_id: str | None = None  # the id of the run its pk named at the baseline

    def look(self) -> list[Update]:
        gone = self.hub.judge()  # before the rows are read
        with self.hub.engine.connect() as conn:
            marks = run_marks(conn, self.run_pk)
            stamp = marks.findings
            if self.cursor is None:  # the baseline: updates are what comes after it
                self.cursor = RunCursor.parse(
                    stream_cursor(conn, self.run_pk, run_keys(conn, self.run_pk)))
                self.cursor.status, self.cursor.gone = marks.status, gone(marks)
                self.stamp = stamp
                self.attempt = marks.attempt
                self.run_id = marks.run_id
                return []
            if marks.run_id != self.run_id:
                self.moved = True  # its streams end (run)
                return []
            if marks.attempt != self.attempt:
                # A new attempt: the old one's points and checkpoints left the index and
                # the new one's start again at seq 0. Streams still at the old cursor drop
                # them (their client reloads on the phase event's attempt).
                self.attempt = marks.attempt
                self.cursor.metrics = self.cursor.checkpoints = -1
                self.seen_counts = {}
            updates, self.more = run_updates(conn, self.run_pk, self.cursor,
                                             self.seen_counts, marks, gone)
            # findings that change after the baseline, the run's first ones included
            if stamp is not None and stamp != self.stamp:
                self.stamp = stamp
                count = 1 + (self.last_health.seq if self.last_health else 0)
                self.last_health = findings_update(conn, self.run_pk, count)
                updates.append(self.last_health)
            return updates

    async def pause(self, version: int) -> None:
        if not self.more:  # else more waits beyond the page just read: look again at once
            await super().pause(version)


class ListPoller(Poller):
    """Runs that appear or change in the list (of one project, or of all)."""

    def __init__(self, hub: Hub, project: str | None) -> None:
        super().__init__(hub)
        self.project = project
        self.snapshot: dict[str, dict[str, Any]] = {}
        self.prints: dict[str, tuple[Any, ...]] | None = None

    def look(self) -> list[Update]:
        gone = self.hub.judge()  # before the rows are read
        with self.hub.engine.connect() as conn:
            current = list_state(conn, self.project, gone)
        updates = []
        prints = {}
        for run_id, summary in reversed(list(current.items())):  # oldest first
            prints[run_id] = fingerprint(summary)
            if self.prints is not None and self.prints.get(run_id) != prints[run_id]:
                updates.append(Update("run", summary))
        self.snapshot, self.prints = current, prints
        return updates

    async def pause(self, version: int) -> None:
        await super().pause(version)
        if not self.hub.feed.closed:
            await asyncio.sleep(LIST_INTERVAL_S)


class Hub:
    """The pollers of one server, started on the first stream and stopped after the last."""

    def __init__(self, engine: Engine, feed: ChangeFeed, poll_interval: float,
                 queue_limit: int = QUEUE_LIMIT, judge: Callable[[], Gone] = by_row) -> None:
        self.engine = engine
        self.judge = judge  # ServerState.judge
        self.feed = feed
        self.poll_interval = poll_interval
        self.queue_limit = queue_limit
        self._loop: asyncio.AbstractEventLoop | None = None
        self._gate = asyncio.Semaphore(STREAM_CONNECTIONS)
        self._runs: dict[int, RunPoller] = {}
        self._lists: dict[str | None, ListPoller] = {}
        self._generation = feed.generation

    def _on_this_loop(self) -> None:
        # pollers and their queues belong to one event loop: a new loop starts afresh
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._gate = asyncio.Semaphore(STREAM_CONNECTIONS)
            self._runs, self._lists = {}, {}

    def _pollers_of_this_index(self) -> None:
        """After the index was made again, a new stream gets new pollers; the old ones end
        their streams as they wake (Poller.current)."""
        if self.feed.generation != self._generation:
            self._generation = self.feed.generation
            self._runs, self._lists = {}, {}

    async def read(self, fn: Callable[[], T]) -> T:
        """Run `fn` (a short database read) in a worker thread, STREAM_CONNECTIONS at most."""
        self._on_this_loop()
        async with self._gate:
            return await run_in_threadpool(fn)

    def forget(self, poller: Poller) -> None:
        if isinstance(poller, RunPoller) and self._runs.get(poller.run_pk) is poller:
            del self._runs[poller.run_pk]
        if isinstance(poller, ListPoller) and self._lists.get(poller.project) is poller:
            del self._lists[poller.project]

    async def _follow(self, poller: Poller, first: object) -> AsyncGenerator[object]:
        """For a new stream: `first`, then each item the poller queues for it (a list of
        updates, or BEHIND), and TICK after each WAKE_S without one. Ends when the server
        stops."""
        sub = Subscriber(self.queue_limit)
        poller.subscribers.add(sub)
        if poller.task is None:
            poller.task = asyncio.get_running_loop().create_task(poller.run())
        try:
            while not poller.ready.is_set():  # the baseline, before anything is compared to it
                if poller.stopped:
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(poller.ready.wait(), WAKE_S)
            item = first
            while item is not END:
                if item is BEHIND:
                    sub.behind = False  # rejoin before catching up: what comes is queued
                yield item
                if item is TICK and poller.stopped:
                    return
                item = await sub.next()
        finally:
            poller.subscribers.discard(sub)

    async def follow_run(self, run_pk: int, start: RunCursor
                         ) -> AsyncGenerator[tuple[Update, str] | None]:
        """Every update of the run after `start`, each with the cursor after it, in order;
        None after each WAKE_S without one. Ends when the server stops, or when the index
        is made again (then `run_pk` names another run, or none)."""
        self._on_this_loop()
        self._pollers_of_this_index()
        poller = self._runs.get(run_pk)
        if poller is None:
            poller = self._runs[run_pk] = RunPoller(self, run_pk)
        cur = start.copy()
        with contextlib.suppress(RunMoved):  # its pk names another run now: the stream ends
            async with contextlib.aclosing(self._follow(poller, START)) as items:
                async for item in items:
                    if item is START or item is BEHIND:
                        if item is START:  # findings are sent when they change from now on
                            cur.health = poller.last_health.seq if poller.last_health else 0
                        # first the phase as it is now, whatever the cursor: a client that
                        # (re)connects learns the run's state before its records; job control
                        # may have changed it in the index alone, or its process died, which
                        # no cursor can tell (a stream that fell behind lost the poller's phase
                        # event with its queue)
                        now = await self._phase_now(run_pk, poller.run_id)
                        if now is not None:
                            yield now, str(cur)
                        async for got in self._catch_up(run_pk, poller.run_id, cur):
                            yield got
                        # and the findings, if they changed while the stream was behind
                        item = [poller.last_health] if poller.last_health else []
                    if isinstance(item, list):
                        for update in item:
                            fresh = _advance(cur, update)
                            if fresh is not None:
                                yield fresh, str(cur)
                    elif item is TICK:
                        yield None

    async def _phase_now(self, run_pk: int, run_id: str | None) -> Update | None:
        try:
            return await self.read(partial(_read_phase, self.engine, run_pk, run_id,
                                           self.judge))
        except RunMoved:
            raise
        except Exception as exc:  # the database is busy or gone: the poller will tell
            log.warning("a live stream's phase read failed (%s)", exc)
            return None

    async def _catch_up(self, run_pk: int, run_id: str | None, cur: RunCursor
                        ) -> AsyncIterator[tuple[Update, str]]:
        """What is stored after `cur`, read a page at a time until nothing is new."""
        seen: dict[int, int] = {}
        more = True
        while more:
            try:
                updates, more = await self.read(partial(
                    _read_run, self.engine, run_pk, run_id, cur.copy(), seen, self.judge))
            except RunMoved:
                raise
            except Exception as exc:  # the database is busy or gone: try again later
                log.warning("a live stream's catch-up read failed (%s); retrying", exc)
                await asyncio.sleep(RETRY_S)
                continue
            for update in updates:
                fresh = _advance(cur, update)
                if fresh is not None:
                    yield fresh, str(cur)

    async def follow_list(self, project: str | None, resumed: bool
                          ) -> AsyncGenerator[Update | None]:
        """`ready` (or, for a resumed stream, every watched run), then a `run` update per
        new or changed run; None after each WAKE_S without one. Ends when the server stops
        or the index is made again."""
        self._on_this_loop()
        self._pollers_of_this_index()
        poller = self._lists.get(project)
        if poller is None:
            poller = self._lists[project] = ListPoller(self, project)
        async with contextlib.aclosing(self._follow(poller, RESEND if resumed else READY)) as items:
            async for item in items:
                if item is READY:
                    yield Update("ready", {"runs": len(poller.snapshot)})
                elif item is RESEND or item is BEHIND:
                    # a resumed or lagging stream is sent every watched run once
                    for summary in reversed(list(poller.snapshot.values())):
                        yield Update("run", summary)
                elif isinstance(item, list):
                    for update in item:
                        yield update
                elif item is TICK:
                    yield None


def _read_phase(engine: Engine, run_pk: int, run_id: str | None,
                judge: Callable[[], Gone]) -> Update:
    gone = judge()  # before the row is read
    with engine.connect() as conn:
        update = phase_now(conn, run_pk, gone)
    if update.data["run_id"] != run_id:
        raise RunMoved
    return update


def _read_run(engine: Engine, run_pk: int, run_id: str | None, cur: RunCursor,
              seen: dict[int, int], judge: Callable[[], Gone]) -> tuple[list[Update], bool]:
    gone = judge()  # before the rows are read
    with engine.connect() as conn:
        marks = run_marks(conn, run_pk)
        if marks.run_id != run_id:
            raise RunMoved
        return run_updates(conn, run_pk, cur, seen, marks, gone)


def hub(st: ServerState) -> Hub:
    """The server's hub of pollers, made on first use."""
    if st.hub is None:
        st.hub = Hub(st.engine, st.feed, st.poll_interval, judge=st.judge)
    return st.hub


def _advance(cur: RunCursor, update: Update) -> Update | None:
    """`update` less what the stream at `cur` has already sent (None if all of it); moves
    `cur` past it."""
    mark = update.mark
    if mark is None:
        return update
    have = getattr(cur, mark)
    if update.seq <= have:
        return None
    if update.event == "points" and update.data[0]["seq"] <= have:
        update = Update("points", [r for r in update.data if r["seq"] > have], mark, update.seq)
    setattr(cur, mark, update.seq)
    return update
