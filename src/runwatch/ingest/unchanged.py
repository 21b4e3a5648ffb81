"""Whether a runs folder holds anything its index lacks, from stat calls and a few plain
queries (store/plain.Reader): a command that reads the index skips the indexer, and the
indexer's imports (SQLAlchemy alone is 0.45 s), when nothing changed.

It says "unchanged" only where a pass of the indexer (ingest/indexer.py) would store
nothing: every run folder's run in the index (found by its id, as the indexer finds it)
with the manifest the folder holds, every record file read to its end (or to a last line
not ended yet, which the indexer leaves for later) and not replaced since (its size and
tail, ingest/replaced.py), every whole file and samples file
read at its mtime. Run files are opened as the indexer opens them (rundir/safeio).
Anything it does not recognise (a folder that is not a run yet, a file outside the run
format, a symbolic link) counts as a change, and the indexer decides what it is. So does
a run of the folder in the index that no folder holds now (deleted, moved, or made again
by a new run of its name: the indexer forgets or moves it, ingest/forget.py), but a copy
of a run's folder the indexer has said it does not read (ingest/gone.holds_run). A project's
thresholds file (rundir/thresholdfiles) newer than what the index read of it counts as a
change too, unless the index has already said why it could not read that version.
"""

from __future__ import annotations

import os
from pathlib import Path
from stat import S_ISREG
from typing import NamedTuple

import orjson

from runwatch.ingest.gone import base_of, copy_problem, holds_run, leaf_in
from runwatch.ingest.marks import Stopped, replaced
from runwatch.rundir import format as fmt
from runwatch.rundir import thresholdfiles
from runwatch.rundir.safeio import open_run_file, read_capped
from runwatch.store.plain import Reader

# Files the indexer reads whole, by their mtime (its _whole_files).
WHOLE_FILES = (fmt.CONFIG, fmt.ENGINE_CONFIG, fmt.JOB)
# Bytes of a record file past where the indexer stopped that are read to tell a torn last
# line (no newline yet: the indexer reads none of it, rundir/reader.py) from new lines.
TORN_MAX = 64 * 1024


def unchanged(db: Reader, runs_dir: Path) -> bool:
    """True when indexing `runs_dir` into `db`'s index now would store nothing."""
    try:
        base = base_of(runs_dir)
        runs = {run_id: _Run(pk, manifest, folder) for pk, run_id, manifest, folder in db.rows(
            "SELECT pk, run_id, manifest, dir FROM runs")}
        offsets = {(pk, name): (offset, mtime, tail) for pk, name, offset, mtime, tail in db.rows(
            'SELECT run_pk, file, "offset", mtime, last_error FROM ingest_offsets')}
        held: set[int] = set()  # the runs a folder of runs_dir holds where their row says
        with os.scandir(runs_dir) as entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                if entry.is_symlink():
                    return False
                if entry.is_dir(follow_symlinks=False) and not _run_unchanged(
                        Path(entry.path), os.path.join(base, entry.name), runs, offsets,
                        held, db):
                    return False
        if any(leaf_in(base, run.dir) is not None and run.pk not in held
               for run in runs.values()):
            return False
        if not _thresholds_unchanged(db, runs_dir):
            return False
    except (OSError, ValueError, fmt.RunDirError):
        return False
    except Exception:  # the driver's error: an index older than these tables' columns
        return False
    return True


def _thresholds_unchanged(db: Reader, runs_dir: Path) -> bool:
    """Whether every thresholds file of the folder is one the index has read (its project's
    `updated_ts` is the file's mtime: health.store.sync_thresholds) or has said it cannot
    read (a folder problem said since the file was written). Raises OSError when the
    folder of thresholds cannot be listed (the indexer says so)."""
    files = thresholdfiles.listed(runs_dir)
    if not files:
        return True
    held = {str(project): float(ts) for project, ts in db.rows(
        "SELECT project, updated_ts FROM health_thresholds")}
    fresh = thresholdfiles.newer(files, held)
    if not fresh:
        return True
    said: dict[str, float] = {}
    for path, ts in db.rows("SELECT path, ts FROM ingest_problems WHERE run_pk IS NULL"):
        said[str(path)] = max(float(ts), said.get(str(path), float("-inf")))
    return all(said.get(str(f.path), float("-inf")) >= f.mtime for f in fresh)


class _Run(NamedTuple):
    pk: int
    manifest: str
    dir: str | None


def _run_unchanged(run_dir: Path, folder: str, runs: dict[str, _Run],
                   offsets: dict[tuple[int, str], tuple[int, float | None, str | None]],
                   held: set[int],
                   db: Reader) -> bool:
    """Whether the indexer would store nothing of run folder `run_dir` (absolute: `folder`);
    the run it holds where its row says goes into `held`."""
    fmt.validate_name(run_dir.name)
    # opened as the indexer opens it (a link, a FIFO or a huge file is refused: OSError)
    raw = read_capped(run_dir / fmt.MANIFEST)
    try:
        manifest = orjson.loads(raw)
        # the indexer finds the run by its id and stores the manifest as
        # store/runs.manifest_json does (its other branch: values orjson refuses)
        run = runs.get(manifest["run_id"]) if isinstance(manifest, dict) else None
        if run is None or orjson.dumps(manifest, option=orjson.OPT_NON_STR_KEYS
                                       ).decode() != run.manifest:
            return False
    except (orjson.JSONDecodeError, TypeError, KeyError):
        return False
    if run.dir != folder:
        # moved here (the indexer moves its row), or a copy the indexer does not read:
        # unchanged once the indexer has said so, as it says it (its _problem_once)
        run_id = manifest["run_id"]
        return run.dir is not None and holds_run(run.dir, run_id) and bool(db.rows(
            "SELECT 1 FROM ingest_problems WHERE path = ? AND message = ?", str(run_dir),
            copy_problem(run_dir, run_id, run.dir)))
    pk = run.pk
    held.add(pk)
    with os.scandir(run_dir) as entries:
        for entry in entries:
            name = entry.name
            if name == fmt.MANIFEST or name.endswith(".tmp"):
                continue
            if entry.is_dir(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
            stored = offsets.get((pk, name))
            if name in fmt.FILES:
                if not S_ISREG(st.st_mode):
                    return False
                if st.st_size > (stored[0] if stored else 0) and (
                        stored is None or not _torn(Path(entry.path), stored[0], st.st_size)):
                    return False
                # a file not written since it was read (its size and mtime then) is not
                # replaced; else its tail says (one small read: marks.replaced)
                if stored is not None and replaced(
                        Path(entry.path), Stopped(stored[0], stored[2], stored[1]),
                        st.st_size, st.st_mtime):
                    return False
            elif name in WHOLE_FILES or fmt.parse_sample_file_name(name) is not None:
                if stored is None or stored[1] != st.st_mtime:
                    return False
            else:
                return False  # not of the run format: the indexer says so
    return True


def _torn(path: Path, offset: int, size: int) -> bool:
    """Whether the `size - offset` bytes of a record file after `offset` (where the indexer
    stopped) are one line not ended yet, of which the indexer would store nothing."""
    if size - offset > TORN_MAX:
        return False
    with open_run_file(path) as f:
        f.seek(offset)
        tail = f.read(size - offset)
    return len(tail) == size - offset and b"\n" not in tail
