"""`runwatch worker` with a stall timeout of seconds, not STALL_TIMEOUT_S's minutes: the
command's Worker (its indexer, its stop on SIGTERM) for a test that must see a hung loop
taken for a dead worker within its wait. `runwatch worker` has no flag for it.

Usage: short_stall_worker.py RUNS DB --devices N --heartbeat-s S --heartbeat-timeout-s S
--stall-timeout-s S
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

from runwatch.ingest.indexer import Indexer
from runwatch.jobs.worker import Worker
from runwatch.store.db import open_engine


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path)
    ap.add_argument("db")
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--heartbeat-s", type=float, required=True)
    ap.add_argument("--heartbeat-timeout-s", type=float, required=True)
    ap.add_argument("--stall-timeout-s", type=float, required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    engine = open_engine(args.db)
    worker = Worker(engine, args.runs, devices=args.devices, heartbeat_s=args.heartbeat_s,
                    heartbeat_timeout_s=args.heartbeat_timeout_s,
                    stall_timeout_s=args.stall_timeout_s, indexer=Indexer(engine, args.runs))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"worker {worker.id}", flush=True)
    worker.run_forever(stop)


if __name__ == "__main__":
    main()
