"""Where the CLI finds runs and their index, and bringing the index up to date."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, Engine

from runwatch.ingest.indexer import Indexer, IndexReport
from runwatch.store import StoreError, open_engine
from runwatch.store.points import PointColumns

DEFAULT_DIR = "runs"
INDEX_DIRNAME = ".runwatch"


def runs_dir(option: Path | None) -> Path:
    """--dir, else RUNWATCH_DIR, else ./runs."""
    if option is not None:
        return option
    return Path(os.environ.get("RUNWATCH_DIR") or DEFAULT_DIR)


def default_db(directory: Path) -> Path:
    """The embedded index of a runs folder lives inside it, in a folder runs never use."""
    return directory / INDEX_DIRNAME / "index.db"


@dataclass
class Context:
    directory: Path
    engine: Engine

    def refresh(self) -> IndexReport:
        """Index what is new in the folder (health findings included), so answers are current."""
        return Indexer(self.engine, self.directory, hooks=[_health_hook]).index_once()


def _health_hook(conn: Connection, run_pk: int, points: Mapping[str, PointColumns]) -> None:
    # the health rules load only when new points come to evaluate
    from runwatch.health.store import on_metrics

    on_metrics(conn, run_pk, points)


def open_context(directory: Path | None, db: str | None, refresh: bool = True,
                 read_only: bool = False) -> Context:
    """The runs folder and its index, brought up to date unless `refresh` is False.

    A `read_only` command (one that only shows what is there) makes nothing: where the
    folder or the index file does not exist it says so instead of creating them."""
    from runwatch.cli.output import fail

    d = runs_dir(directory)
    if directory is not None and not d.is_dir():
        raise fail(f"{d} is not a folder of runs", ["pass --dir DIR with the folder your "
                                                     "training loop gives runwatch.init(dir=…)"])
    if read_only:
        _must_exist(d, db)
    try:
        engine = open_engine(db or default_db(d))
    except StoreError as exc:
        raise fail(str(exc)) from exc
    ctx = Context(d, engine)
    if refresh and (d.is_dir() or not read_only):
        ctx.refresh()
    return ctx


def _must_exist(d: Path, db: str | None) -> None:
    from runwatch.cli.output import fail

    if db is None and not d.is_dir():
        raise fail(f"there is no runs folder here: {d.resolve()} does not exist",
                   ["pass --dir DIR or set RUNWATCH_DIR to the folder your training loop "
                    "gives runwatch.init(dir=…) (./runs by default)"])
    if db is not None and "://" not in db and not Path(db).expanduser().is_file():
        raise fail(f"there is no index at {db}",
                   ["pass --db with an index that `runwatch index` or `runwatch ui` made"])
