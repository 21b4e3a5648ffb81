"""Which runs of a runs folder lost their folder, and whether a folder is a copy of one
indexed from another folder: the rules the indexer (ingest/forget.py, ingest/indexer.py)
and the check that skips it (ingest/unchanged.py) share. Stat calls and a manifest read,
no SQLAlchemy: the CLI's fast path imports this module.

A run's row keeps the absolute folder it was indexed from (`runs.dir`, as
`store.runs.upsert_run` resolves it), and only the folders right inside a runs folder are
run folders, so a row is of runs folder `base` when its folder's parent is `base`.
"""

from __future__ import annotations

import os
from pathlib import Path
from stat import S_ISDIR

from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line
from runwatch.rundir.safeio import read_capped


def base_of(runs_dir: Path) -> str:
    """The runs folder as its runs' rows name their parent: absolute, links resolved."""
    return str(Path(runs_dir).resolve())


def leaf_in(base: str, folder: str | None) -> str | None:
    """The name of run folder `folder` (a row's `dir`) when it lies right inside `base`;
    None for a run sent over HTTP (no folder) or one of another runs folder."""
    if folder is None or os.path.dirname(folder) != base:
        return None
    return os.path.basename(folder)


def folder_gone(folder: str) -> bool:
    """Whether run folder `folder` is no longer a folder: nothing is there, or a file or a
    symbolic link (which the indexer does not read as a run) stands in its place. A folder
    that cannot be looked at (a disk error, no permission) is not gone: nobody knows."""
    try:
        st = os.lstat(folder)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return not S_ISDIR(st.st_mode)


def holds_run(folder: str, run_id: str) -> bool:
    """Whether run folder `folder` (absolute) still holds run `run_id`: its manifest reads,
    and gives that id. A folder whose run is also found in another folder is then a copy
    of it, which the indexer does not read; otherwise the run moved to the other folder."""
    try:
        manifest = loads_line(read_capped(Path(folder) / fmt.MANIFEST))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("run_id") == run_id


def copy_problem(run_dir: Path, run_id: str, indexed_from: str) -> str:
    """What the indexer says, once, of run folder `run_dir`, a copy of the folder
    `indexed_from` that holds run `run_id` too."""
    return (f"{run_dir} holds run {run_id}, which is indexed from {indexed_from}: a copy of "
            "a run folder is not indexed (move the copy out of the runs folder)")
