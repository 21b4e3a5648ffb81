"""The folder indexer: brings a runs folder's run directories into the index, incrementally.

Each pass reads only what was appended since the last one (byte offsets are stored
per file), so indexing twice changes nothing and a growing folder costs only its growth.
A run is never seen ended before what it recorded before its end is stored: a pass stores
an end event only once it has read the other record files and the samples files after
seeing that event. A pass that listed the whole folder then forgets the runs whose folder
no longer holds them (ingest/forget.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from stat import S_ISREG
from typing import Any

from sqlalchemy import Connection, Engine, insert, select, update

from runwatch.health.store import sync_thresholds
from runwatch.ingest.forget import (
    FEW_GONE,
    FolderRecord,
    device_value,
    folder_record,
    forget_gone,
    record_folder,
)
from runwatch.ingest.gone import copy_problem, holds_run
from runwatch.ingest.jobspec import store_job_spec
from runwatch.ingest.manifest import NotARun, manifest_problems, read_run_manifest
from runwatch.ingest.marks import (
    NOT_READ,
    Stopped,
    holds_unread,
    replaced,
    replaced_message,
    stop_mark,
)
from runwatch.ingest.offsets import (
    Purged,
    lock_offsets,
    move_offsets,
    offset_row,
    offsets_of,
    set_mtime,
    stopped_at,
)
from runwatch.ingest.records import IngestResult, ingest_records
from runwatch.ingest.replaced import forget_file
from runwatch.ingest.samples import store_samples
from runwatch.ingest.wholefiles import whole_file_text
from runwatch.rundir import format as fmt
from runwatch.rundir.reader import read_new
from runwatch.rundir.safeio import SAMPLES_CAP, UnsafeFile, read_capped
from runwatch.store import schema as s
from runwatch.store.db import unusable
from runwatch.store.points import SEQ_LIMIT, PointColumns
from runwatch.store.runs import upsert_run
from runwatch.store.values import INT64_MAX

log = logging.getLogger(__name__)

KNOWN_FILES = frozenset({fmt.MANIFEST, fmt.CONFIG, fmt.ENGINE_CONFIG, fmt.JOB, *fmt.FILES})
# Records are committed in slices of about this many bytes of a file, read and stored
# in pieces of READ_BYTES (small enough that a piece's records stay in cache); a line longer
# than a piece is read alone, up to the format's longest line (fmt.MAX_LINE_BYTES).
SLICE_BYTES = 16 * 1024 * 1024
READ_BYTES = 1024 * 1024
# A run whose indexing failed is tried again after these many seconds, doubling.
RETRY_MIN_S = 1.0
RETRY_MAX_S = 300.0
# A pass whose listing found the run folders it found last time, holding the runs they
# held, looks for runs to forget only once this long after the last look (a row another
# process indexed from a folder made and deleted between two passes); any other pass looks.
FORGET_LOOK_S = 60.0

# Called with each slice's new points by key, inside the transaction that stores them.
PointsHook = Callable[[Connection, int, Mapping[str, PointColumns]], None]
# Called with a run's pk after a pass stored new events of it (its phase may have
# changed), once the pass has stored its metrics too, in a transaction of its own.
EventsHook = Callable[[Connection, int], None]
# Whether a read of a record file leaves a record at its end for later (read_new's hold).
Hold = Callable[[dict[str, Any]], bool]


@dataclass
class IndexReport:
    """What one pass over a folder did."""

    runs: int = 0
    new_runs: int = 0
    rows: int = 0
    problems: list[str] = field(default_factory=list)
    # the names of the run folders the pass did not read (it failed, waits to retry, or
    # reads it again next pass): what they hold may be newer than the index
    unread: set[str] = field(default_factory=set)
    # one line per run the pass took out of the index: its folder is gone, or holds
    # another run now (ingest/forget.py)
    forgotten: list[str] = field(default_factory=list)
    # what the pass said of the runs folder as a whole (it cannot be listed, it is on
    # another disk, runs whose folders are gone kept), in `problems` too, and of each run
    # folder it does not index because it is a copy of another's run, in `problems` only
    # the first time (it is said once); a server logs each when it is new and shows the
    # last pass's in its web app (GET /api/server)
    folder_notes: list[str] = field(default_factory=list)


class RereadNextPass(Exception):
    """What a pass read of a run belongs to an attempt another indexer replaced meanwhile,
    or the pass was asked to stop in the middle of a record file: the folder is read again
    next pass, though it has not changed."""


class StoppedMidFile(RereadNextPass):
    """The pass was asked to stop with record file `args[0]` not read to its end, after
    storing some of it."""


class Indexer:
    """Indexes the run directories under `runs_dir` into `engine`'s database."""

    def __init__(self, engine: Engine, runs_dir: Path, hooks: Sequence[PointsHook] = (),
                 events_hooks: Sequence[EventsHook] = (), log_folder: bool = True,
                 forget_all_gone: bool = False):
        self.engine = engine
        self.runs_dir = Path(runs_dir)
        # Whether a pass forgets every run whose folder is gone, however many, also from a
        # runs folder that holds nothing or whose disk changed: a user said they are gone
        # (`runwatch index --forget-gone`); otherwise ingest/forget.py keeps them.
        self.forget_all_gone = forget_all_gone
        # What the index records of the runs folder (ingest/forget.FolderRecord: its device
        # at the index's last pass over it, whichever process made that pass), read at
        # this indexer's first pass and kept as this indexer writes it: a pass that finds
        # another device (a disk was mounted on it, or unmounted) forgets nothing.
        self._record: FolderRecord | None = None
        self._record_read = False
        # Whether a pass logs (a warning) what it says of the runs folder as a whole: the
        # runs it forgot, and why it listed or forgot nothing. A server has no other word
        # for it; the CLI prints the pass's report instead.
        self.log_folder = log_folder
        # the folder notes of the last whole pass (logged as they came)
        self._folder_said: frozenset[str] = frozenset()
        # the run folders (and their runs) the last look for runs to forget found, when,
        # and what it said of the runs folder (a note of runs kept), if anything
        self._looked: tuple[dict[str, int | None], float, str | None] | None = None
        # New metrics go to each hook in turn, inside the transaction that stores them;
        # the composition roots (`runwatch.server.runner`, `runwatch.cli.context`) pass
        # the health engine's, so findings are current whenever the index is. A run's new
        # events go to `events_hooks` once the pass has read its metrics: the health
        # engine's judges a run that has succeeded on its whole log.
        self.hooks = list(hooks)
        self.events_hooks = list(events_hooks)
        # Per run folder, the (size, mtime) of everything it holds as of the last pass,
        # and its pk: `runwatch ui` passes every 0.2 s, and a run that has not changed
        # must then cost a few stat calls, not a dozen queries.
        self._seen: dict[Path, tuple[tuple[tuple[str, int, int], ...], int]] = {}
        # Per run folder whose indexing raised: its signature then, when to try again
        # though it has not changed, and the wait that came to.
        self._failed: dict[Path, tuple[tuple[tuple[str, int, int], ...], float, float]] = {}

    def start_over(self) -> None:
        """Forget what this indexer holds of the index (the runs' pks and the folders
        unchanged since it read them, the waits of failed runs, the last look for runs to
        forget): the index was made again, and the next pass reads every folder into it."""
        self._seen.clear()
        self._failed.clear()
        self._looked = None
        self._folder_said = frozenset()
        self._record_read = False

    def index_once(self, stop: threading.Event | None = None) -> IndexReport:
        """One pass over the runs folder. With `stop`, the pass ends after the run folder
        under way once it is set, or after the slice under way of a record file with more
        to read (a first read of a long run's metrics file is many slices): a pass is
        bounded per statement (SQLite's 30 s busy wait) and per slice, not as a whole, and
        a server stopping behind another process's long write lock would otherwise wait
        that long for every folder.

        An index on a full disk, or damaged, stops the pass with `store.db.IndexUnusable`,
        which says so in one line: every run would fail alike, and saying it of each (in
        that same index) fails too."""
        try:
            report = self._pass(stop)
        except Exception as exc:
            found = unusable(exc)
            if found is None:
                raise
            raise found from exc
        if stop is None or not stop.is_set():  # a stopped pass may not have met them all
            self._folder_said = frozenset(report.folder_notes)
        return report

    def _pass(self, stop: threading.Event | None) -> IndexReport:
        report = IndexReport()
        if not self.runs_dir.is_dir():
            return report
        try:
            dev = os.stat(self.runs_dir).st_dev
            entries = sorted(os.scandir(self.runs_dir), key=lambda e: e.name)
        except OSError as exc:
            # nothing can be told of its runs: none is forgotten (a folder that is there
            # but cannot be read must not empty the index)
            self._folder_note(f"the runs folder {self.runs_dir} cannot be listed "
                              f"({exc.strerror or exc}): nothing in it was indexed, and no "
                              "run was forgotten", report)
            return report
        if not self._record_read:
            self._record, self._record_read = folder_record(self.engine, self.runs_dir), True
        # the projects' health thresholds the folder keeps, read before its runs are judged
        report.problems += sync_thresholds(self.engine, self.runs_dir, log_new=self.log_folder)
        remounted = self._record is not None and self._record.dev != device_value(dev)
        # each run folder listed, and the run pk it was indexed as (None: not read)
        folders: dict[str, int | None] = {}
        for entry in entries:
            if stop is not None and stop.is_set():
                break
            if entry.name.startswith("."):
                continue
            if entry.is_symlink():
                if entry.is_dir():
                    self._not_indexed(entry.path,
                                      f"{entry.path} is a symbolic link to a folder; a run "
                                      "folder must be a real folder inside the runs folder, "
                                      "so it is not indexed", report)
                continue
            if entry.is_dir(follow_symlinks=False):
                run_dir = Path(entry.path)
                folders[entry.name] = None
                try:
                    folders[entry.name] = self.index_run(run_dir, report, stop)
                except Exception as exc:
                    if unusable(exc) is not None:
                        raise
                    # One run that cannot be indexed must not stop the others; its
                    # transaction is rolled back and it is tried again (see index_run).
                    if self._failed[run_dir][2] == RETRY_MIN_S:
                        log.exception("indexing %s failed", run_dir)
                    else:
                        log.warning("indexing %s failed again: %s", run_dir, exc)
                    self._problem_once(None, str(run_dir),
                                       f"{run_dir}: indexing failed ({type(exc).__name__}: "
                                       f"{str(exc).splitlines()[0][:200] if str(exc) else ''}); "
                                       "the other runs are indexed, and this one is tried "
                                       "again when its files change, and at least every "
                                       f"{RETRY_MAX_S / 60:g} minutes", report)
        if stop is None or not stop.is_set():  # every run folder was looked at
            # recorded only now: a pass stopped before this leaves the next to judge it
            self._record = record_folder(self.engine, self.runs_dir, self._record, dev,
                                         time.time())
            if remounted and not self.forget_all_gone:
                self._looked = None  # the next pass looks
                self._folder_note(f"the runs folder {self.runs_dir} is on another disk than "
                                  "at the last pass (a disk was mounted or unmounted on it): "
                                  "no run was forgotten in this pass", report)
            else:
                self._forget(folders, not entries, report)
        return report

    def _forget(self, folders: dict[str, int | None], empty: bool,
                report: IndexReport) -> None:
        """Forget the runs whose folder no longer holds them, after a pass that looked at
        every run folder of the listing (`folders`; `empty`: it listed nothing at all)."""
        now = time.monotonic()
        # `runwatch ui` passes every 0.2 s: an idle pass costs no query for this
        if (self._looked is None or self._looked[0] != folders
                or now - self._looked[1] >= FORGET_LOOK_S):
            for cache in (self._seen, self._failed):
                for path in [p for p in cache if p.name not in folders]:
                    del cache[path]
            gone = forget_gone(self.engine, self.runs_dir, folders, empty,
                               self.forget_all_gone)
            for name, run_id, folder in gone.runs:
                why = "holds another run now" if Path(folder).name in folders else "is gone"
                line = (f"run {name} ({run_id[:8]}) is no longer indexed: its folder {folder} "
                        f"{why}")
                report.forgotten.append(line)
                if self.log_folder:
                    log.warning("%s", line)
            note = None
            if gone.kept:
                runs, are, they = (("run", "is", "it") if gone.kept == 1 else
                                   ("runs", "are", "they"))
                if empty and gone.kept <= FEW_GONE:
                    note = (f"the runs folder {self.runs_dir} is empty, so the {gone.kept} "
                            f"{runs} indexed from it whose folder is gone {are} kept, in "
                            f"case its disk is not mounted; {they} {are} forgotten once the "
                            "runs folder holds anything")
                else:  # more than FEW_GONE: forget.too_many
                    note = (f"the folders of {gone.kept} of the {gone.indexed} runs indexed "
                            f"from the runs folder {self.runs_dir} are gone at once, so they "
                            "are kept, in case its disk is not mounted or its listing is "
                            "incomplete; if they are gone for good, `runwatch index "
                            f"{self.runs_dir} --forget-gone` (with this index's --db) "
                            "forgets them")
            self._looked = (folders, now, note)
        if self._looked[2] is not None:
            self._folder_note(self._looked[2], report)

    def _folder_note(self, message: str, report: IndexReport) -> None:
        """A problem of the runs folder as a whole: in the report's problems and notes at
        every pass that meets it, in the log when it is new."""
        report.problems.append(message)
        self._note(message, report)

    def _note(self, message: str, report: IndexReport) -> None:
        """A note of the pass (IndexReport.folder_notes), logged when the last whole pass
        did not give it."""
        if self.log_folder and message not in self._folder_said \
                and message not in report.folder_notes:
            log.warning("%s", message)
        report.folder_notes.append(message)

    def index_run(self, run_dir: Path, report: IndexReport,
                  stop: threading.Event | None = None) -> int | None:
        """Index one run directory; returns its run pk, or None if it cannot be indexed
        (or `stop` was set before its record files were read to their end).

        A run whose indexing raised is tried again once its folder changes, or after a
        wait that doubles from RETRY_MIN_S to RETRY_MAX_S while it keeps failing: a run
        that always fails must not cost a traceback and a core on every pass.
        """
        signature = _signature(run_dir)
        seen = self._seen.get(run_dir)
        if seen is not None and seen[0] == signature:
            report.runs += 1
            return seen[1]
        failed = self._failed.get(run_dir)
        if failed is not None and failed[0] == signature and time.monotonic() < failed[1]:
            report.unread.add(run_dir.name)
            return None
        try:
            run_pk = self._index_run(run_dir, report, stop)
        except RereadNextPass:
            report.unread.add(run_dir.name)
            return None
        except Exception as exc:
            report.unread.add(run_dir.name)
            if unusable(exc) is None:  # the index's fault, not the run's: no waiting
                wait = RETRY_MIN_S if failed is None else min(2 * failed[2], RETRY_MAX_S)
                self._failed[run_dir] = (signature, time.monotonic() + wait, wait)
            raise
        self._failed.pop(run_dir, None)
        if run_pk is not None:
            # Taken before reading, so anything written meanwhile is read next pass.
            self._seen[run_dir] = (signature, run_pk)
        else:  # not read: its manifest is missing, unreadable or of another version
            report.unread.add(run_dir.name)
        return run_pk

    def _index_run(self, run_dir: Path, report: IndexReport,
                   stop: threading.Event | None) -> int | None:
        manifest_path = run_dir / fmt.MANIFEST
        try:
            fmt.validate_name(run_dir.name)
        except fmt.RunDirError as exc:
            self._not_indexed(str(run_dir), f"{run_dir}: {exc}; the folder is not indexed "
                              "(rename it)", report)
            return None
        try:
            manifest = read_run_manifest(run_dir)
        except FileNotFoundError:
            if _being_created(run_dir):
                return None  # runwatch.init writes the manifest next: look again next pass
            self._not_indexed(str(run_dir), f"{run_dir} has no manifest.json, so it is not "
                              "indexed (a run directory is made by runwatch.init)", report)
            return None
        except UnsafeFile as exc:
            self._not_indexed(str(manifest_path), f"{exc}; run not indexed", report)
            return None
        except NotARun as exc:
            self._not_indexed(str(manifest_path), str(exc), report)
            return None
        except (OSError, ValueError) as exc:
            self._not_indexed(str(manifest_path),
                              f"{manifest_path} is not readable JSON ({exc}); run not indexed",
                              report)
            return None
        run_id = manifest["run_id"]
        with self.engine.begin() as conn:
            indexed_from = conn.execute(select(s.runs.c.dir).where(
                s.runs.c.run_id == run_id)).scalar()
            if (indexed_from is not None and indexed_from != str(run_dir.resolve())
                    and holds_run(indexed_from, run_id)):
                # a copy (`cp -r runs/a runs/b`): one run, one folder. Once the folder its
                # row names no longer holds it, the run moved here (upsert_run).
                self._not_indexed(str(run_dir), copy_problem(run_dir, run_id, indexed_from),
                                  report, conn)
                return None
            run_pk, is_new = upsert_run(conn, manifest, run_dir)
            for problem in manifest_problems(manifest):
                self._problem_once(run_pk, str(manifest_path), f"{manifest_path}: {problem}",
                                   report, conn)
            job_waits = self._whole_files(conn, run_pk, run_dir, report)
        report.runs += 1
        report.new_runs += int(is_new)
        with self.engine.connect() as conn:  # where each record file stopped, in one query
            stopped = offsets_of(conn, run_pk)
        # Events first: an event may start a new attempt, which forgets where the attempt's
        # files stopped and the engine config just read (purge_attempt), and the new
        # attempt's files are then read from their start in this same pass. But the events
        # that end the file as read, when they end the run, wait (`_ends_run`) until the
        # other files have been read after them, so that no reader sees a run ended before
        # the metrics, checkpoints, logs and samples it wrote before its end; then the
        # events are read on from that end event (`through`, its line).
        new_events = False
        samples_read = False
        through: int | None = None
        try:
            while True:
                stored, held = self._jsonl(run_pk, run_dir / fmt.EVENTS, report,
                                           stopped.get(fmt.EVENTS, NOT_READ),
                                           partial(_ends_run, through), stop)
                if stored or job_waits:  # a job's row is made once its events are read
                    new_events = new_events or stored
                    with self.engine.begin() as conn:
                        job_waits = self._whole_files(conn, run_pk, run_dir, report)
                    with self.engine.connect() as conn:
                        stopped = offsets_of(conn, run_pk)
                for name in fmt.FILES:
                    if name != fmt.EVENTS:
                        self._jsonl(run_pk, run_dir / name, report,
                                    stopped.get(name, NOT_READ), stop=stop)
                if held is None:
                    break
                # the samples files too (each written whole, before the end)
                self._samples_and_foreign(run_pk, run_dir, report)
                samples_read = True
                through = held
        except StoppedMidFile as early:
            # the events stored before the stop (the run's end among them) are judged now:
            # the next pass, finding no new event, would not judge them
            if new_events or early.args[0] == fmt.EVENTS:
                self._after_events(run_pk)
            raise
        if new_events:
            self._after_events(run_pk)
        if not samples_read:
            self._samples_and_foreign(run_pk, run_dir, report)
        return run_pk

    def _after_events(self, run_pk: int) -> None:
        """The events hooks, once a pass stored new events of the run."""
        if self.events_hooks:
            with self.engine.begin() as conn:
                for hook in self.events_hooks:
                    hook(conn, run_pk)

    def _jsonl(self, run_pk: int, path: Path, report: IndexReport, stopped: Stopped | None,
               hold: Hold | None = None, stop: threading.Event | None = None
               ) -> tuple[bool, int | None]:
        """Index a record file slice by slice; `stopped`: where it stopped as of this pass
        (None: ask the index). A file replaced since is read again (ingest/replaced.py).
        Whether a slice was stored, and the line of the first record `hold` left at the
        file's end (see `_jsonl_slice`), if any. Once `stop` is set, no slice follows the
        one under way: each is stored with its offset, so the next pass reads on from it."""
        more = True
        stored = False
        held: int | None = None
        try:
            while more:
                if stored and stop is not None and stop.is_set():
                    raise StoppedMidFile(path.name)
                try:
                    st = path.lstat()
                except FileNotFoundError:
                    return stored, held
                if S_ISREG(st.st_mode):  # else the safe reader says what is wrong with it
                    # a file not written since it was read is judged by lstat alone
                    if stopped is not None and not holds_unread(path, st.st_size, stopped,
                                                                st.st_mtime):
                        return stored, held  # nothing new: no write lock taken
                    with self.engine.connect() as conn:  # another indexer may have read it
                        if not holds_unread(path, st.st_size,
                                            stopped_at(conn, run_pk, path.name), st.st_mtime):
                            return stored, held
                    stopped = None  # after a slice, ask the index again
                with self.engine.begin() as conn:
                    lock_offsets(conn, run_pk, path.name)
                    more, held = self._jsonl_slice(conn, run_pk, path, report, hold)
                stored = True
        except Purged:
            # rolled back: another indexer started a new attempt meanwhile; this pass must
            # not count as reading the folder, so the next reads the new attempt's file
            raise RereadNextPass from None
        except UnsafeFile as exc:
            self._problem_once(run_pk, str(path), f"{exc}; its records are not indexed", report)
        return stored, held

    def _jsonl_slice(self, conn: Connection, run_pk: int, path: Path, report: IndexReport,
                     hold: Hold | None = None) -> tuple[bool, int | None]:
        """Index up to SLICE_BYTES of a record file in one transaction: whether more may be
        left, and the line of the first record `hold` left at the file's end, if any.

        The slice is read and stored in pieces of READ_BYTES, so each piece's records are
        still in the processor's cache when they are stored. The records at the end of a
        piece for which `hold(record)` is true are read again with the next piece; those at
        the end of the file are left for the caller to read later.
        """
        name = path.name
        off = offset_row(conn, run_pk, name)
        offset, line_no, last_seq = off["offset"], off["line_no"], off["last_seq"]
        if replaced(path, Stopped(offset, off["tail"])):
            forget_file(conn, run_pk, path)
            self._problem_once(run_pk, str(path), replaced_message(path), report, conn)
            offset, line_no, last_seq = 0, 0, -1
        total = IngestResult()
        bad: list[str] = []
        start = offset
        more = False
        held: int | None = None
        # a record whose seq no point id (or 64-bit column) can hold is refused; it must
        # not hide the records after it
        seq_limit = SEQ_LIMIT if name == fmt.METRICS else INT64_MAX + 1
        while offset - start < SLICE_BYTES:
            res = read_new(path, offset, line_no, READ_BYTES, max_line=fmt.MAX_LINE_BYTES,
                           hold=hold)
            if res.offset == offset and not res.bad:
                if res.held:
                    more, held = False, res.line_no + 1
                break
            top = last_seq
            fresh = []
            for rec in res.records:
                seq = rec["seq"]
                if seq > last_seq:
                    fresh.append(rec)
                    if top < seq < seq_limit:
                        top = seq
            if fresh:
                total.merge(ingest_records(conn, run_pk, name, fresh))
            bad += [f"{path}: line {b.line_no}: {b.error}" for b in res.bad]
            last_seq = top
            more = res.offset != offset
            offset, line_no = res.offset, res.line_no
            if not more:
                break
        if offset == start and not bad:
            return False, held
        # at most MAX_PROBLEMS_LISTED record problems are itemised per slice, then counted
        problems = [f"{path.parent}/{p}" for p in total.problems]
        extra = total.problem_count - len(total.problems)
        if extra > 0:
            problems.append(f"{path}: {extra} more problems like the above")
        problems += bad
        for p in problems:
            _add_problem(conn, run_pk, str(path), p)
        if problems:
            conn.execute(update(s.runs).where(s.runs.c.pk == run_pk).values(
                problems=s.runs.c.problems + len(problems)))
        if name == fmt.METRICS and total.points:
            for hook in self.hooks:
                hook(conn, run_pk, total.points)
        # last, so that nothing of a slice whose file was purged meanwhile is kept
        if not move_offsets(conn, run_pk, name, offset, line_no, last_seq, len(bad),
                            stop_mark(path, offset)):
            raise Purged
        report.rows += total.rows
        report.problems.extend(problems)
        return more, held

    def _whole_files(self, conn: Connection, run_pk: int, run_dir: Path,
                     report: IndexReport) -> bool:
        """config.yaml, engine_config.json and job.json, when changed; one refused is not
        stored (a refused job.json leaves the jobs row as it was). Whether job.json waits
        for the run's events to be read (ingest/jobspec.py): then it is read again after
        them."""
        job_waits = False
        for name, column in ((fmt.CONFIG, "config"), (fmt.ENGINE_CONFIG, "engine_config"),
                             (fmt.JOB, None)):
            path = run_dir / name
            try:
                mtime = path.lstat().st_mtime
            except FileNotFoundError:
                continue
            off = offset_row(conn, run_pk, name)
            if off["mtime"] == mtime:
                continue
            value: str | None = None
            try:
                if column is None:
                    job_waits = not store_job_spec(conn, run_pk, run_dir)
                else:
                    value = _whole_file(path)
            except (OSError, ValueError) as exc:
                self._problem_once(run_pk, str(path), f"{_said(path, exc)}; not stored",
                                   report, conn)
            if job_waits:
                continue
            if column is not None:
                conn.execute(update(s.runs).where(s.runs.c.pk == run_pk).values({column: value}))
            set_mtime(conn, run_pk, name, mtime)
        return job_waits

    def _samples_and_foreign(self, run_pk: int, run_dir: Path, report: IndexReport) -> None:
        with contextlib.suppress(Purged), self.engine.begin() as conn:
            for entry in os.scandir(run_dir):
                name = entry.name
                if (name in KNOWN_FILES or name.endswith(".tmp")
                        or entry.is_dir(follow_symlinks=False)):
                    continue
                parsed = fmt.parse_sample_file_name(name)
                if parsed is None:
                    self._problem_once(run_pk, str(entry.path),
                                       f"{entry.path}: not a file of run format v1; ignored",
                                       report, conn)
                    continue
                mtime = entry.stat(follow_symlinks=False).st_mtime
                off = offset_row(conn, run_pk, name)
                if off["mtime"] == mtime:
                    continue
                path = Path(entry.path)
                try:
                    raw = read_capped(path, SAMPLES_CAP)
                except OSError as exc:
                    self._problem_once(run_pk, str(path), f"{_said(path, exc)}; skipped",
                                       report, conn)
                else:
                    try:
                        stored, aside = store_samples(conn, run_pk, path.name, raw, parsed)
                    except ValueError as exc:
                        msg = f"{path}: not a samples file ({exc}); skipped"
                        _add_problem(conn, run_pk, str(path), msg)
                        report.problems.append(msg)
                    else:
                        report.rows += stored
                        if aside:
                            self._problem_once(run_pk, str(path), f"{path}: {aside} samples "
                                               "hold a value beyond 64 bits or nested too "
                                               "deep to store as JSON; skipped", report, conn)
                if not set_mtime(conn, run_pk, name, mtime):
                    raise Purged

    def _not_indexed(self, path: str, message: str, report: IndexReport,
                     conn: Connection | None = None) -> None:
        """A folder of the runs folder that is not indexed (a link, a name no run may have,
        no manifest or one that is no run's, a copy of a run's folder): a problem said once
        to the commands, and a note of every pass while it is there, since a server has no
        other word for it (GET /api/server's notes, beside the web app's run list) and the
        folder never shows as a run."""
        self._problem_once(None, path, message, report, conn)
        self._note(message, report)

    def _problem_once(self, run_pk: int | None, path: str, message: str, report: IndexReport,
                      conn: Connection | None = None) -> None:
        def go(c: Connection) -> None:
            seen = c.execute(select(s.ingest_problems.c.id).where(
                s.ingest_problems.c.path == path, s.ingest_problems.c.message == message)).first()
            if seen is None:
                _add_problem(c, run_pk, path, message)
                report.problems.append(message)
                if run_pk is not None:
                    c.execute(update(s.runs).where(s.runs.c.pk == run_pk).values(
                        problems=s.runs.c.problems + 1))

        if conn is not None:
            go(conn)
        else:
            with self.engine.begin() as c:
                go(c)


def _ends_run(through: int | None, rec: dict[str, Any]) -> bool:
    """Whether an events record ends the run (a terminal phase), unless it is the one at
    line `through`, which the pass has read the other files after."""
    phase = rec.get("phase")
    return isinstance(phase, str) and phase in fmt.TERMINAL_PHASES and rec["_line"] != through


def _being_created(run_dir: Path) -> bool:
    """An empty folder, or one holding only .tmp files: `runwatch.init` is making it."""
    try:
        return all(name.endswith(".tmp") for name in os.listdir(run_dir))
    except OSError:
        return True


def _signature(run_dir: Path) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime) of every file in a run folder: equal signatures, nothing new."""
    try:
        with os.scandir(run_dir) as entries:
            out = []
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                out.append((entry.name, st.st_size, st.st_mtime_ns))
    except OSError:
        return ()
    return tuple(sorted(out))


def _add_problem(conn: Connection, run_pk: int | None, path: str, message: str) -> None:
    conn.execute(insert(s.ingest_problems).values(run_pk=run_pk, path=path, message=message,
                                                  ts=time.time()))


def _whole_file(path: Path) -> str:
    """config.yaml as text; engine_config.json as JSON that every reader parses."""
    return whole_file_text(path.name, read_capped(path), str(path))


def _said(path: Path, exc: Exception) -> str:
    """What went wrong with a file: a refusal or a ValueError says it all, an OSError less."""
    if isinstance(exc, OSError) and not isinstance(exc, UnsafeFile):
        return f"{path} cannot be read ({exc.strerror or exc})"
    return str(exc)
