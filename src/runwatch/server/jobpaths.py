"""Where a recipe job of a project token may read and write: the recipe settings that name a
path on the server (`PATH_SETTINGS`) must lie inside run folders of the token's project.

A worker runs the job as the server's user, so a path that a token of project A gives
would otherwise read another project's checkpoints and data, or write into its folders
(trial 35, D3). The server's own token gives any path, as `runwatch submit` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import Connection, select

from runwatch.cli.recipes import RECIPES
from runwatch.recipes.config import parse_argv
from runwatch.store import schema as s

# the settings of every recipe (TrainConfig) whose value is a file or folder on the server
PATH_SETTINGS = ("init_from", "base_model", "data_path", "val_data_path", "cache_dir")


def foreign_path(conn: Connection, recipe: str, argv: Sequence[str], cwd: Path,
                 projects: frozenset[str]) -> tuple[str, str] | None:
    """The first path setting given in `argv` (the job's `key=value` settings, already
    checked) that does not lie inside a run folder of `projects`, read as the recipe reads
    it from the job's working folder `cwd`, with its value; None when every one does."""
    config = RECIPES[recipe][0]
    # by the names the config takes them under: an alias of a path setting is that setting
    given = {config.ALIASES.get(k, k) for k in (i.partition("=")[0].strip() for i in argv)}
    cfg = parse_argv(config, list(argv))
    for key in PATH_SETTINGS:
        value = getattr(cfg, key, None)
        if key in given and value is not None and not _in_own_run(conn, cwd, value, projects):
            return key, value
    return None


def _in_own_run(conn: Connection, cwd: Path, value: str, projects: frozenset[str]) -> bool:
    """Whether `value` (with its links followed) lies in an indexed run folder of
    `projects`: the nearest run folder above it must be theirs, so a run folder of another
    project inside one of theirs stays another's."""
    try:
        path = (cwd / Path(value).expanduser()).resolve()
    except (OSError, ValueError, RuntimeError):  # a NUL, a loop of links
        return False
    folders = [str(path), *(str(p) for p in path.parents)]
    r = s.runs.c
    found = conn.execute(select(r.dir, r.project).where(r.dir.in_(folders))).all()
    if not found:
        return False
    nearest = max(found, key=lambda row: len(row.dir))
    return nearest.project in projects
