"""A runs folder's copy of each project's health thresholds: `.runwatch/thresholds/<project>.yaml`.

The index holds a project's overrides where the rules read them, but the runs folder is
the record: an index made again from the folder (a damaged one deleted, another --db)
reads these files back and judges the runs as before. A file is written whole
(rundir/atomic) and read as a run file is (rundir/safeio: a regular file, never through a
symbolic link, capped). Which file is newer than what an index holds is told by its
mtime against the index row's `updated_ts`, which the index sets to the mtime of the file
it read or wrote (`runwatch.health.store.sync_thresholds`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runwatch.rundir.atomic import write_atomic
from runwatch.rundir.format import STATE_DIR, RunDirError, validate_name
from runwatch.rundir.safeio import MiB, read_capped

FOLDER = Path(STATE_DIR) / "thresholds"
SUFFIX = ".yaml"
# A project's overrides name a few dozen rules at most: far below this.
CAP = 1 * MiB


@dataclass(frozen=True)
class ThresholdsFile:
    """One project's thresholds file, as listed."""

    project: str
    path: Path
    mtime: float


def path_of(runs_dir: Path, project: str) -> Path:
    """Where the runs folder keeps `project`'s thresholds. Raises RunDirError when
    `project` is not a project name (no run could be of it, and it would not be one safe
    file name)."""
    return runs_dir / FOLDER / f"{validate_name(project, 'project name')}{SUFFIX}"


def listed(runs_dir: Path) -> list[ThresholdsFile]:
    """The thresholds files of the runs folder, by project; none when it keeps none.
    A name that is no project's (`<name>.yaml.tmp` being written, a file of the user's) or
    an entry that is not a regular file is not one. Raises OSError when the folder is there
    but cannot be listed."""
    found = []
    try:
        with os.scandir(runs_dir / FOLDER) as entries:
            for entry in entries:
                project = entry.name.removesuffix(SUFFIX)
                if project == entry.name or not _is_name(project):
                    continue
                if entry.is_file(follow_symlinks=False):
                    found.append(ThresholdsFile(project, Path(entry.path),
                                                entry.stat(follow_symlinks=False).st_mtime))
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return []
        raise
    return sorted(found, key=lambda f: f.project)


def newer(files: list[ThresholdsFile], held: Mapping[str, float]) -> list[ThresholdsFile]:
    """Of `files` (`listed`), those newer than what an index holds (`held`: each project's
    `updated_ts`, the mtime of the file it last read or wrote): the ones it has not read."""
    return [f for f in files if f.project not in held or f.mtime > held[f.project]]


def read(path: Path) -> Any:
    """The content of a thresholds file, as YAML loads it. Raises OSError (UnsafeFile for a
    link or a file over CAP) and yaml.YAMLError."""
    import yaml  # not at import: ingest/unchanged lists these files and reads none

    return yaml.safe_load(read_capped(path, CAP).decode("utf-8", errors="replace"))


def write(runs_dir: Path, project: str, overrides: Mapping[str, Any]) -> ThresholdsFile:
    """Write `project`'s overrides (validated: `Overrides.to_dict()`) whole, in place of
    its file, and say what was written. Raises OSError when the folder cannot take it."""
    import yaml

    path = path_of(runs_dir, project)
    head = (f"# The health thresholds of project {project} (docs/health.md). `runwatch "
            f"thresholds {project} FILE` writes\n# this file; an edit by hand is read by the "
            "index's next pass over this runs folder.\n")
    write_atomic(path, (head + yaml.safe_dump(dict(overrides), sort_keys=True)).encode())
    return ThresholdsFile(project, path, os.stat(path, follow_symlinks=False).st_mtime)


def _is_name(text: str) -> bool:
    try:
        validate_name(text, "project name")
    except RunDirError:
        return False
    return True
