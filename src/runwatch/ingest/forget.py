"""Forgetting the runs of a runs folder whose folder no longer holds them: the folder is a
run's record and the index is rebuilt from folders, so a run folder deleted by hand (or
moved out of the runs folder, or made again by a new run of the same name) takes its run
out of the index at the next pass, with its points, findings, samples and job.

A run whose folder went to another runs folder of the same index (`mv runs-a/x runs-b/x`,
both indexed into one index) moved: whichever folder's pass comes first, its row takes the
new folder and keeps its pk, records, findings and job, as a rename in one runs folder does.

Only after a listing of the runs folder that succeeded (the indexer does not get here
otherwise), and never, unless told (`runwatch index --forget-gone`), for a runs folder that
holds nothing at all, nor for more than half of a folder's runs (and more than FEW_GONE)
at once: an unmounted disk leaves its mount point empty, or holding the few folders written
into it meanwhile, and a listing cut short looks the same; neither must empty the index.
A run sent over HTTP (no folder) and the runs of another runs folder in the same index are
not the pass's to judge. Nor is a runs folder found on another device than at the index's
last pass over it (a disk mounted on it or unmounted): the index records each runs folder
it was indexed from (the runs_folders table, `record_folder`), with that device, so a
command's single pass is guarded as a long-lived indexer's next pass is, and the move
search knows every runs folder, also those no run is indexed from yet.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, insert, select, update

from runwatch.ingest.gone import base_of, folder_gone, leaf_in
from runwatch.ingest.manifest import NotARun, read_run_manifest
from runwatch.rundir import format as fmt
from runwatch.store import schema as s
from runwatch.store.db import writing
from runwatch.store.runs import folder_runs, forget_run, upsert_run
from runwatch.store.values import INT64_MAX

# A pass forgets at once at most this share of the runs indexed from a runs folder, or
# FEW_GONE runs, whichever is more; the rest of the time more gone at once is kept until
# a user says they are gone (forget_gone's `confirmed`).
GONE_SHARE = 0.5
FEW_GONE = 3
# A pass writes its runs folder's row (runs_folders) only when it finds another device than
# the row holds, or the row's time is older than this: an idle pass writes nothing.
PASSED_AT_S = 3600.0


@dataclass
class Forgotten:
    """What a pass did with the runs whose folder no longer holds them."""

    # (name, run id, folder) of each run taken out of the index
    runs: list[tuple[str, str, str]] = field(default_factory=list)
    # how many such runs were kept: the runs folder holds nothing, or they are too many
    kept: int = 0
    # how many runs the index holds of the runs folder (those kept among them)
    indexed: int = 0
    # (run id, old folder, new folder) of each run found moved to another runs folder
    moved: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class FolderRecord:
    """What the index records of a runs folder (its runs_folders row): its device at the
    index's last pass over it (`device_value`), and when that pass wrote it."""

    dev: int
    passed_at: float


def device_value(st_dev: int) -> int:
    """`st_dev` as the index stores it: a signed 64-bit value (BigInteger), which the
    unsigned dev_t of a device whose number has the top bit set would overflow."""
    return st_dev - 2 ** 64 if st_dev > INT64_MAX else st_dev


def path_key(path: str) -> str:
    """The key of a runs folder's runs_folders row: the sha256 (hex) of its path's bytes
    (PostgreSQL cannot key a path over about 2.7 KB itself)."""
    return hashlib.sha256(os.fsencode(path)).hexdigest()


def folder_record(engine: Engine, runs_dir: Path) -> FolderRecord | None:
    """What the index records of `runs_dir` (None: no pass indexed it into this index)."""
    t = s.runs_folders
    with engine.connect() as conn:
        row = conn.execute(select(t.c.dev, t.c.passed_at)
                           .where(t.c.path_key == path_key(base_of(runs_dir)))).first()
    return None if row is None else FolderRecord(int(row.dev), float(row.passed_at))


def record_folder(engine: Engine, runs_dir: Path, record: FolderRecord | None, st_dev: int,
                  now: float) -> FolderRecord:
    """Record a pass over `runs_dir` that found it on device `st_dev`, where `record` (what
    the index held) differs or is older than PASSED_AT_S; the record the index holds now."""
    dev = device_value(st_dev)
    if record is not None and record.dev == dev and now - record.passed_at < PASSED_AT_S:
        return record
    t, path = s.runs_folders, base_of(runs_dir)
    key = path_key(path)
    with writing(engine) as conn:  # one writer at a time: the insert cannot race another
        if not conn.execute(update(t).where(t.c.path_key == key)
                            .values(dev=dev, passed_at=now)).rowcount:
            conn.execute(insert(t).values(path_key=key, path=path, dev=dev, passed_at=now))
    return FolderRecord(dev, now)


def too_many(gone: int, indexed: int) -> bool:
    """Whether `gone` runs of the `indexed` of a runs folder are too many to forget at once
    unless told: more than FEW_GONE, and more than GONE_SHARE of them."""
    return gone > FEW_GONE and gone > GONE_SHARE * indexed


def forget_gone(engine: Engine, runs_dir: Path, folders: Mapping[str, int | None],
                empty: bool, confirmed: bool = False) -> Forgotten:
    """Forget the runs of `runs_dir` whose folder is gone, or holds another run now; move
    to its new folder a run found in another runs folder of the index.

    `folders`: each run folder a listing of `runs_dir` found, by name, with the run pk the
    pass indexed it as (None: not read, so its run is not known); `empty`: the listing
    found nothing at all. A run's folder is gone when its name is not among them and it is
    not a folder now either (`gone.folder_gone`: it may have come after the listing).
    Nothing is forgotten when the listing is empty or when the runs to forget are too many
    (`too_many`), unless `confirmed`: they are counted in `kept` instead."""
    base = base_of(runs_dir)
    with engine.connect() as conn:
        rows = folder_runs(conn, base)
    stale = []
    gone: dict[int, str] = {}
    for pk, folder in rows:
        name = leaf_in(base, folder)
        if name is None:
            continue
        if name in folders:
            now = folders[name]
            if now is not None and now != pk:  # `rm -rf runs/x && python train.py`
                stale.append((pk, folder))
        elif folder_gone(folder):
            gone[pk] = folder
    out = Forgotten(indexed=sum(leaf_in(base, folder) is not None for _, folder in rows))
    if gone:
        moved = _move_found_elsewhere(engine, base, gone)
        out.moved = list(moved.values())
        stale += [(pk, folder) for pk, folder in gone.items() if pk not in moved]
    if not confirmed and (empty or too_many(len(stale), out.indexed)):
        out.kept = len(stale)
        return out
    for pk, folder in stale:
        with writing(engine) as conn:
            forgotten = forget_run(conn, pk, folder)
        if forgotten is not None:
            out.runs.append((*forgotten, folder))
    return out


def _move_found_elsewhere(engine: Engine, base: str, gone: Mapping[int, str]
                          ) -> dict[int, tuple[str, str, str]]:
    """Move each run of `gone` (pk: its folder, gone) whose run a folder of another runs
    folder of the index holds now to that folder (store.runs.upsert_run, as that folder's
    own pass would): (run id, old folder, new folder) by pk of each one moved.

    The other runs folders are every one the index knows: those a pass indexed into it
    (runs_folders, also those it holds no run of yet) and those it holds runs of (a row of
    an index from before runs_folders); one no longer there is skipped. Each is listed
    once, and only the folders no run of the index is indexed from are read (their
    manifest): the cost is one listing per runs folder, and only on a pass that has a run
    to forget."""
    with engine.connect() as conn:
        run_ids = {str(run_id): int(pk) for run_id, pk in conn.execute(
            select(s.runs.c.run_id, s.runs.c.pk).where(s.runs.c.pk.in_(list(gone))))}
        known = {str(d) for d in conn.execute(select(s.runs.c.dir).where(
            s.runs.c.dir.is_not(None))).scalars()}
        indexed = {str(p) for p in conn.execute(select(s.runs_folders.c.path)).scalars()}
    found = _folders_holding(sorted(({os.path.dirname(d) for d in known} | indexed) - {base}),
                             known, run_ids)
    moved: dict[int, tuple[str, str, str]] = {}
    for run_id, (folder, manifest) in found.items():
        pk = run_ids[run_id]
        with writing(engine) as conn:
            if _still_at(conn, pk, gone[pk]):
                upsert_run(conn, manifest, Path(folder))
                moved[pk] = (run_id, gone[pk], folder)
    return moved


def _folders_holding(bases: list[str], known: Collection[str], run_ids: Collection[str]
                     ) -> dict[str, tuple[str, dict[str, Any]]]:
    """The run folder and manifest of each run of `run_ids` that a run folder right inside
    one of `bases` holds, of those no row of the index names (`known`)."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for other in bases:
        try:
            with os.scandir(other) as entries:
                folders = [e.path for e in entries if not e.name.startswith(".")
                           and e.is_dir(follow_symlinks=False) and e.path not in known]
        except OSError:
            continue  # not there, or not listable: nothing found in it
        for folder in folders:
            manifest = _run_manifest(folder)
            if manifest is not None and manifest["run_id"] in run_ids:
                out.setdefault(manifest["run_id"], (folder, manifest))
    return out


def _run_manifest(folder: str) -> dict[str, Any] | None:
    """The manifest of run folder `folder` where the indexer would read it as a run (a
    valid name, and ingest.manifest.read_run_manifest's checks)."""
    try:
        fmt.validate_name(os.path.basename(folder))
        return read_run_manifest(Path(folder))
    except (OSError, ValueError, NotARun):  # fmt.RunDirError and UnsafeFile among them
        return None


def _still_at(conn: Connection, pk: int, folder: str) -> bool:
    """Whether run `pk`'s row still names `folder` (another indexer may have moved it)."""
    return conn.execute(select(s.runs.c.pk).where(s.runs.c.pk == pk, s.runs.c.dir == folder)
                        .with_for_update()).first() is not None
