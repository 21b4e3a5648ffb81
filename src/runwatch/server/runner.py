"""Running the server: uvicorn plus, when a runs folder is given, an indexer thread and
the embedded workers' threads (`workers`, none by default; `runwatch ui` runs one), and a
thread that judges again the runs an older rule catalogue judged (health/catchup.py).

`ui`, `server`, the browser tests and the benchmarks all start the server this way. The
indexer is one, shared by the index loop and the workers (each use holds `_index_lock`),
so a run folder is never indexed by two passes at once.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from sqlalchemy import Engine, select

from runwatch.health.catchup import sweep
from runwatch.health.store import on_events as health_end
from runwatch.health.store import on_metrics as health_hook
from runwatch.ingest import Indexer
from runwatch.ingest.indexer import IndexReport, PointsHook
from runwatch.ingest.lease import Lease, index_name
from runwatch.interop.otel import OtelExport
from runwatch.interop.otel import from_env as otel_from_env
from runwatch.jobs.control import RETRY_WAIT_S
from runwatch.jobs.worker import Worker
from runwatch.rundir import format as fmt
from runwatch.server.app import create_app
from runwatch.server.deadline import HEAD_TIMEOUT_S, with_head_timeout
from runwatch.server.feed import ChangeFeed
from runwatch.server.routes_prom import ServerMetrics
from runwatch.server.series_cache import SeriesCache, default_disk_dir
from runwatch.server.settings import DEFAULT_PORT, INDEX_INTERVAL_S
from runwatch.server.settle import Settle, by_row
from runwatch.server.warm import build_routes
from runwatch.store import schema as s
from runwatch.store.db import IndexFile, IndexMoved, StoreError
from runwatch.store.keys import run_keys
from runwatch.store.series import pausing

log = logging.getLogger("runwatch.server")
# At startup the newest runs are read into the series cache, up to this share of it.
PREWARM_RUNS = 50
PREWARM_SHARE = 0.5
# How often the warming looks again while requests wait for their answers.
PREWARM_YIELD_S = 0.02
# How long an idle keep-alive connection stays open. Clients' pools drop an idle connection
# after their own expiry (httpx and the SDK's sender: 5 s); a server that closed at the same
# 5 s raced them, and a request sent on a connection as it closed was lost (ReadError).
KEEP_ALIVE_S = 65
# stop() says what it waits for once a thread has not ended after this long.
STOP_NOTE_S = 5.0
# An index that cannot be used (full disk, damaged file) is said in the log at most this
# often while each pass meets it, and again when what is wrong changes.
UNUSABLE_NOTE_S = 60.0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def all_finished(engine: Engine) -> bool:
    """True when the index holds runs and every one has reached a terminal phase."""
    with engine.connect() as conn:
        statuses = conn.execute(select(s.runs.c.status)).scalars().all()
    return bool(statuses) and all(st in fmt.TERMINAL_PHASES for st in statuses)


@dataclass
class Runner:
    """The server and its indexer; `start()` returns once the server accepts requests."""

    engine: Engine
    runs_dir: Path | None = None
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = None
    interval: float = INDEX_INTERVAL_S
    exit_when_done: bool = False
    prewarm: bool = True
    # serve one small request in-process before listening (runwatch.server.warm: first
    # calls, not data), so the first user's answer does not pay for them
    warm: bool = True
    # how long a retry waits for a process to let go of the run's folder (create_app)
    lock_wait_s: float = RETRY_WAIT_S
    # keep long series as files beside a SQLite index, for fast reads after a restart
    save_series: bool = True
    # how long a connection has to deliver a request's head (server/deadline.py)
    head_timeout_s: float = HEAD_TIMEOUT_S
    feed: ChangeFeed = field(default_factory=ChangeFeed)
    cache: SeriesCache = field(default_factory=SeriesCache)
    metrics: ServerMetrics = field(default_factory=ServerMetrics)
    # spans and metrics over OTLP, when OTEL_EXPORTER_OTLP_ENDPOINT is set
    otel: OtelExport | None = field(default_factory=lambda: otel_from_env(time.time()))
    # embedded workers (they need runs_dir), each offering `devices` of `device_profile`
    # (worker k hands out device_ids[k*devices:(k+1)*devices], see jobs.worker.device_ids);
    # worker_settings are further Worker arguments (heartbeat_s, grace_s, ...)
    workers: int = 0
    devices: int = 1
    device_profile: str = "cpu"
    device_ids: list[str] | None = None
    worker_settings: dict[str, Any] = field(default_factory=dict)
    # whether start() returns only once the runs folder's first index pass is done (as a
    # test or a script wants); else (`runwatch ui`, `runwatch server`) the server answers
    # at once and the first pass runs in the indexer's thread, the embedded workers
    # starting after it: a folder of millions of points took a minute to answer anything
    index_first: bool = True
    # whether a run's process is gone: judged by a pass that began after it died
    settle: Settle = field(default_factory=Settle)
    # what the last whole pass said of the runs folder as a whole (GET /api/server's notes)
    folder_notes: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _workers: list[tuple[Worker, threading.Thread]] = field(default_factory=list)
    _server: uvicorn.Server | None = None
    _index: Indexer | None = None
    _index_lock: threading.Lock = field(default_factory=threading.Lock)
    # the index's file as opened (store.db.IndexFile), taken as the server starts
    _index_file: IndexFile | None = None
    _index_moved_said: bool = False
    # the note /api/server shows while passes cannot write the index (its disk full, its
    # file damaged), and since when (wall time): what the pages show stops there
    _unwritable_note: str | None = None
    _unwritable_since: float | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def _indexer(self) -> Indexer:
        """The indexer with this server's hooks: health findings, the series cache, the
        /metrics counts, then the OTLP export's step timing (when configured)."""
        if self._index is None:
            assert self.runs_dir is not None
            hooks: list[PointsHook] = [health_hook, self.cache.warm, self.metrics.on_points]
            if self.otel is not None:
                hooks.append(self.otel.on_points)
            self._index = Indexer(self.engine, self.runs_dir, hooks=hooks,
                                  events_hooks=[health_end])
        return self._index

    def _index_loop(self) -> None:
        assert self.runs_dir is not None
        # the folder's lease, which read commands find (ingest.lease): they wait for this
        # indexer's next pass instead of indexing beside it (not held: another server
        # indexes the folder, or it is not writable; commands then index it themselves)
        lease = Lease(self.runs_dir, index_name(self.engine))
        lease.take()
        assert self._index_file is not None
        self._index_file.owner = threading.get_ident()
        try:
            self._index_forever(lease)
        finally:
            lease.release()

    def _index_forever(self, lease: Lease) -> None:
        indexer = self._indexer()
        workers_started = self.index_first
        said: tuple[str, float] | None = None  # what was said of an unusable index, when
        while not self._stop.is_set():
            try:
                with self._index_lock:
                    self._follow_index_file(indexer, lease)
                    report = self._index_pass(indexer, self._stop)
                lease.passed()
                if self.otel is not None:
                    self.otel.after_pass(self.engine)
                if said is not None:
                    log.warning("the index can be written again; indexing %s goes on",
                                self.runs_dir)
                    said = None
                self._writable_again()
            except IndexMoved:
                # met within the pass: the next opens the index again (_follow_index_file)
                self._stop.wait(0.05)
                continue
            except StoreError as exc:
                # each pass meets it until space returns or the file is replaced (or, for
                # an index file deleted, until it can be made again): one line a minute, no
                # traceback; the runs whose end it could not store stay unjudged (settle),
                # not dead
                now = time.monotonic()
                if said is None or said[0] != str(exc) or now - said[1] >= UNUSABLE_NOTE_S:
                    log.error("%s", exc)
                    said = (str(exc), now)
                self._unwritable(exc)
                self._stop.wait(max(self.interval, 1.0))
                continue
            except Exception:
                log.exception("indexing %s failed; retrying", self.runs_dir)
                self._stop.wait(1.0)
                continue
            if not workers_started and not self._stop.is_set():
                # the first pass is done: the workers' jobs find their runs indexed, and
                # their loops do not wait on the index lock the first pass held
                self._start_workers()
                workers_started = True
            if report.rows or report.new_runs or report.forgotten:
                self.feed.notify()
            elif self.exit_when_done and all_finished(self.engine):
                self.stop()
                return
            self._stop.wait(self.interval)

    def _unwritable(self, exc: StoreError) -> None:
        """A pass could not write the index: say so among the server's notes (the web app
        shows them beside the run list, /metrics as `runwatch_index_writable 0`), with
        since when, so that a live run that stopped moving is not taken for a stalled one.
        The log says it once a minute; the note stays until a pass succeeds."""
        if self._unwritable_since is None:
            self._unwritable_since = time.time()
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self._unwritable_since))
        note = (f"Nothing has been indexed since {since}: {exc}. What these pages show of "
                f"a run may be behind its folder; it catches up once the index can be "
                f"written again.")
        kept = [n for n in self.folder_notes if n != self._unwritable_note]
        self.folder_notes[:] = [*kept, note]
        self._unwritable_note = note
        self.metrics.index_writable = False

    def _writable_again(self) -> None:
        """A pass wrote the index: its note is gone (the pass replaced the notes)."""
        self._unwritable_note = self._unwritable_since = None
        self.metrics.index_writable = True

    def _follow_index_file(self, indexer: Indexer, lease: Lease) -> None:
        """Before a pass: when the index's file was deleted or replaced since it was opened
        (`rm` of it or of its folder, a copy restored over it), open the index at its path
        again (made anew, or the file found there) and forget all that was held of the old
        one, so that the pass reads every run folder into it. Without this the indexer wrote
        on into the deleted file, which the server alone still read, and the commands read
        an empty index (or failed, sharing the old file's WAL). The run folders are the
        record: nothing they hold is lost. Said once, in the log."""
        assert self._index_file is not None
        why = self._index_file.moved()
        if why is None:
            return
        if not self._index_moved_said:  # not said again while making it again fails
            log.warning("the index %s %s while this server ran: it is opened again there "
                        "and %s is indexed into it again", self._index_file.path, why,
                        self.runs_dir)
            self._index_moved_said = True
        self._index_file.reopen()
        self._index_moved_said = False
        indexer.start_over()
        self.cache.clear()
        self.settle.clear()
        if self.otel is not None:
            self.otel.start_over()
        # the lease's files lay beside the old index (gone with its folder): read commands
        # find this indexer again only through new ones
        lease.release()
        lease.take()
        # the live streams, which read their run by its old pk, end: their pages reconnect,
        # find the run by id in this index and resume at their cursor (the pass that
        # follows notifies as it stores the runs)
        self.feed.reset()

    def _index_pass(self, indexer: Indexer, stop: threading.Event | None) -> IndexReport:
        """One pass over the runs folder, noting for `settle` which unfinished runs'
        processes were dead as it began."""
        dead = self.settle.look(self.engine)
        report = indexer.index_once(stop=stop)
        if stop is None or not stop.is_set():  # a stopped pass may not have read every run
            self.settle.passed(dead, report.unread)
            self.folder_notes[:] = report.folder_notes
        return report

    def _prewarm(self) -> None:
        """Read the newest runs' series into the cache, so a restarted server answers fast.

        A series at a time, and only while no request waits for its answer: reading beside
        a request, the two threads took turns on the interpreter and a fresh server's first
        compare took 2-3 s, not its 0.2 s of reading."""
        budget = int(self.cache.max_points * PREWARM_SHARE)
        with self.engine.connect() as conn, pausing(self._give_way):
            pks = conn.execute(select(s.runs.c.pk).order_by(s.runs.c.created_at.desc())
                               .limit(PREWARM_RUNS)).scalars().all()
            for pk in pks:
                for info in run_keys(conn, pk):
                    self._give_way()
                    if self._stop.is_set() or self.cache.held_points + info.points > budget:
                        return
                    self.cache.get(conn, pk, info)

    def _judge_again(self) -> None:
        """Judge again, with this runwatch's rules, the runs an older one judged (after
        an upgrade: `health.catchup`), newest first, a run at a time while no request
        waits for its answer; live streams are told of each run whose findings changed."""
        try:
            for _run_pk, changed in sweep(self.engine):
                if changed:
                    self.feed.notify()
                self._give_way()
                if self._stop.is_set():
                    return
        except Exception:  # the index cannot be read: runs are judged on their next points
            log.exception("looking for runs to judge again with this runwatch's rules failed")

    def _give_way(self) -> None:
        """Wait while a request waits for its answer (between the warming's series and
        between pieces of one: `store.series.pausing`), or until the server stops."""
        while self.metrics.answering and not self._stop.is_set():
            self._stop.wait(PREWARM_YIELD_S)

    def _make_server(self) -> uvicorn.Server:
        app = create_app(self.engine, runs_dir=self.runs_dir, token=self.token, feed=self.feed,
                         cache=self.cache, metrics=self.metrics, warm=self.warm,
                         lock_wait_s=self.lock_wait_s, folder_notes=self.folder_notes,
                         judge=by_row if self.runs_dir is None else self.settle.judge)
        # Built here, not at the first request that reaches each router: building one
        # swaps the process's warning handlers from the server's thread (warm.build_routes).
        # Not in create_app: an app called in-process (tests, the warm-up) needs no such
        # care, and building costs 0.06-0.09 s an app.
        build_routes(app.router.routes)
        config = uvicorn.Config(app, host=self.host, port=self.port, log_level="warning",
                                access_log=False, lifespan="off", timeout_graceful_shutdown=1,
                                timeout_keep_alive=KEEP_ALIVE_S,
                                http=with_head_timeout(self.head_timeout_s))
        return uvicorn.Server(config)

    def _listen(self) -> socket.socket:
        """The server's listening socket, bound here (port 0: a free one, then `port`),
        before anything starts: a taken port fails at once and leaves nothing running,
        and a caller that asks for port 0 gets a port no other process can take between
        finding it free and binding it (as one from `free_port` can be, under load)."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # made as socket.create_server makes it, but with its protocol named (TCP): asyncio
        # turns Nagle's algorithm off (TCP_NODELAY) only on the connections of a socket
        # whose protocol is IPPROTO_TCP, and with it on, each answer after the first on a
        # kept-open connection waited about 40 ms for the client's delayed ACK
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen()
        except OSError as exc:
            sock.close()
            raise OSError(f"the server could not listen on {self.url} ({exc.strerror or exc}): "
                          "is the port taken? choose another with --port") from None
        self.port = int(sock.getsockname()[1])
        return sock

    def start(self) -> Runner:
        """Start indexing and serving in background threads."""
        sock = self._listen()
        try:
            return self._start(sock)
        except BaseException:
            sock.close()
            self.stop()
            raise

    def _start(self, sock: socket.socket) -> Runner:
        self._index_file = IndexFile(self.engine)
        if self.save_series and self.cache.disk_dir is None:
            self.cache.disk_dir = default_disk_dir(self.engine)
        if self.runs_dir is not None:
            if self.index_first:
                self._index_pass(self._indexer(), None)
                self.metrics.index_writable = True
                self._start_workers()
            t = threading.Thread(target=self._index_loop, name="runwatch-indexer", daemon=True)
            t.start()
            self._threads.append(t)
        if self.prewarm:
            t = threading.Thread(target=self._prewarm, name="runwatch-prewarm", daemon=True)
            t.start()
            self._threads.append(t)
        t = threading.Thread(target=self._judge_again, name="runwatch-health", daemon=True)
        t.start()
        self._threads.append(t)
        self._server = self._make_server()
        t = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                             name="runwatch-http", daemon=True)
        t.start()
        self._threads.append(t)
        while not self._server.started:
            if not t.is_alive():
                raise OSError(f"the server could not start on {self.url}")
            time.sleep(0.02)
        return self

    def _start_workers(self) -> None:
        """Start the embedded workers (after the runs folder's first index pass)."""
        assert self.runs_dir is not None
        for n in range(self.workers):
            ids = (None if self.device_ids is None
                   else self.device_ids[n * self.devices:(n + 1) * self.devices])
            worker = Worker(self.engine, self.runs_dir, devices=self.devices,
                            device_profile=self.device_profile, indexer=self._indexer(),
                            index_lock=self._index_lock, device_ids=ids,
                            **self.worker_settings)
            t = threading.Thread(target=worker.run_forever, args=(self._stop,),
                                 name=f"runwatch-worker-{n}", daemon=True)
            t.start()
            self._workers.append((worker, t))

    def wait(self) -> None:
        """Block until the server stops (Ctrl-C, or --exit-when-done)."""
        try:
            while not self._stop.is_set() and any(t.is_alive() for t in self._threads):
                self._stop.wait(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop serving, indexing and the workers; return once every thread this runner
        started has ended, so nothing writes to the index or the cache after it (an
        index pass under way ends after the run folder it is at, or the slice of a long
        record file; a worker stops its jobs first: SIGTERM, their grace period,
        SIGKILL). A second Ctrl-C while it waits leaves at once."""
        self._stop.set()
        self.feed.close()
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = False
        for t in [*self._threads, *(t for _, t in self._workers)]:
            if t is threading.current_thread():
                continue
            t.join(timeout=STOP_NOTE_S)
            if t.is_alive():
                log.warning("waiting for %s to end (an index pass or a job's stop under "
                            "way); Ctrl-C again to leave now", t.name)
                t.join()
        self.cache.save_all()
        if self.otel is not None:
            self.otel.shutdown()

    def __enter__(self) -> Runner:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
