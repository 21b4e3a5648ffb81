"""Forgetting the runs of a runs folder whose folder no longer holds them: the folder is a
run's record and the index is rebuilt from folders, so a run folder deleted by hand (or
moved out of the runs folder, or made again by a new run of the same name) takes its run
out of the index at the next pass, with its points, findings, samples and job.

Only after a listing of the runs folder that succeeded (the indexer does not get here
otherwise), and never for a runs folder that holds nothing at all: an unmounted disk
leaves its mount point so, and must not empty the index. A run sent over HTTP (no folder)
and the runs of another runs folder in the same index are not the pass's to judge.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine

from runwatch.ingest.gone import base_of, folder_gone, leaf_in
from runwatch.store.db import writing
from runwatch.store.runs import folder_runs, forget_run


@dataclass
class Forgotten:
    """What a pass did with the runs whose folder no longer holds them."""

    # (name, run id, folder) of each run taken out of the index
    runs: list[tuple[str, str, str]] = field(default_factory=list)
    # how many such runs were kept because the runs folder holds nothing
    kept: int = 0


def forget_gone(engine: Engine, runs_dir: Path, folders: Mapping[str, int | None],
                empty: bool) -> Forgotten:
    """Forget the runs of `runs_dir` whose folder is gone, or holds another run now.

    `folders`: each run folder a listing of `runs_dir` found, by name, with the run pk the
    pass indexed it as (None: not read, so its run is not known); `empty`: the listing
    found nothing at all. A run's folder is gone when its name is not among them and it is
    not a folder now either (`gone.folder_gone`: it may have come after the listing)."""
    base = base_of(runs_dir)
    with engine.connect() as conn:
        rows = folder_runs(conn, base)
    stale = []
    for pk, folder in rows:
        name = leaf_in(base, folder)
        if name is None:
            continue
        if name in folders:
            now = folders[name]
            if now is not None and now != pk:  # `rm -rf runs/x && python train.py`
                stale.append((pk, folder))
        elif folder_gone(folder):
            stale.append((pk, folder))
    out = Forgotten()
    if empty:
        out.kept = len(stale)
        return out
    for pk, folder in stale:
        with writing(engine) as conn:
            forgotten = forget_run(conn, pk, folder)
        if forgotten is not None:
            out.runs.append((*forgotten, folder))
    return out
