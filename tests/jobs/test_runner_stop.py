"""`Runner.stop()` returns only once the threads it started have ended.

It used to join its index thread for 5 s at most, so it could return while an index pass
still ran: the caller then saved the series cache, shut the OTLP export, disposed of the
engine or removed the index while the pass wrote to it (and at exit the interpreter tore
down a thread in the middle of a database call). Here a pass waits on the database as
it does behind another process's write (a CLI import, a second server): a real SQLite
write transaction held by the test, which the pass waits for up to its busy timeout;
the test ends it once stop() says it waits for the pass.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

import runwatch
from runwatch.ingest.indexer import Indexer
from runwatch.server.runner import Runner
from runwatch.store.db import database_url, open_engine
from tests.jobs.stacks import runs_in
from tests.support.wait import DEADLINE_S, wait_for


def test_stop_returns_once_the_index_pass_under_way_has_ended(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    engine = open_engine(database_url(tmp_path / "index.db"))
    before = set(threading.enumerate())
    runner = Runner(engine, runs_dir=runs, port=0, interval=0.05, prewarm=False, warm=False,
                    save_series=False).start()
    [indexer] = [t for t in threading.enumerate()
                 if t not in before and t.name == "runwatch-indexer"]
    writer = sqlite3.connect(tmp_path / "index.db", isolation_level=None,
                             check_same_thread=False)
    # the write ends once stop() says it waits for the pass (past the old 5 s)
    waiting = _Said("waiting for runwatch-indexer")

    def end_the_write() -> None:
        waiting.said.wait(DEADLINE_S)
        writer.rollback()

    ender = threading.Thread(target=end_the_write)
    logger = logging.getLogger("runwatch.server")
    logger.addHandler(waiting)
    try:
        writer.execute("BEGIN IMMEDIATE")  # another process's write: the pass waits for it
        with runwatch.init(dir=runs, name="new") as run:
            run.log({"loss": 1.0})
        wait_for(lambda: runs_in(indexer, Indexer.index_run), what="an index pass over the new run")
        ender.start()
        runner.stop()
        assert not indexer.is_alive(), "stop() returned while an index pass still ran"
        assert waiting.said.is_set()
    finally:
        logger.removeHandler(waiting)
        waiting.said.set()
        if ender.ident is not None:
            ender.join()
        writer.close()
        runner.stop()
        engine.dispose()


class _Said(logging.Handler):
    """A log handler whose `said` is set once a record starting with `prefix` is emitted."""

    def __init__(self, prefix: str) -> None:
        super().__init__(logging.WARNING)
        self.prefix = prefix
        self.said = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(self.prefix):
            self.said.set()
