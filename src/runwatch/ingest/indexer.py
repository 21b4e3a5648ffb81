"""The folder indexer: brings a runs folder's run directories into the index, incrementally.

Each pass reads only what was appended since the last one (byte offsets are stored
per file), so indexing twice changes nothing and a growing folder costs only its growth.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, delete, insert, select, update

from runwatch.ingest.records import IngestResult, ingest_records
from runwatch.ingest.sql import insert_ignore_sql
from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line
from runwatch.rundir.reader import read_new
from runwatch.store import schema as s
from runwatch.store.points import SEQ_LIMIT, PointColumns
from runwatch.store.runs import upsert_run

log = logging.getLogger(__name__)

KNOWN_FILES = frozenset({fmt.MANIFEST, fmt.CONFIG, fmt.ENGINE_CONFIG, *fmt.FILES})
# Records are committed in slices of about this many bytes of a file, read and stored
# in pieces of READ_BYTES (small enough that a piece's records stay in cache).
SLICE_BYTES = 16 * 1024 * 1024
READ_BYTES = 1024 * 1024

# Called with each slice's new points by key, inside the transaction that stores them.
PointsHook = Callable[[Connection, int, Mapping[str, PointColumns]], None]


@dataclass
class IndexReport:
    """What one pass over a folder did."""

    runs: int = 0
    new_runs: int = 0
    rows: int = 0
    problems: list[str] = field(default_factory=list)


class Indexer:
    """Indexes the run directories under `runs_dir` into `engine`'s database."""

    def __init__(self, engine: Engine, runs_dir: Path, hooks: Sequence[PointsHook] = ()):
        self.engine = engine
        self.runs_dir = Path(runs_dir)
        # New metrics go to each hook in turn, inside the transaction that stores them;
        # the composition roots (`runwatch.server.runner`, `runwatch.cli.context`) pass
        # the health engine's, so findings are current whenever the index is.
        self.hooks = list(hooks)
        # Per run folder, the (size, mtime) of everything it holds as of the last pass,
        # and its pk: `runwatch ui` passes every 0.2 s, and a run that has not changed
        # must then cost a few stat calls, not a dozen queries.
        self._seen: dict[Path, tuple[tuple[tuple[str, int, int], ...], int]] = {}

    def index_once(self) -> IndexReport:
        report = IndexReport()
        if not self.runs_dir.is_dir():
            return report
        for entry in sorted(os.scandir(self.runs_dir), key=lambda e: e.name):
            if entry.is_dir() and not entry.name.startswith("."):
                run_dir = Path(entry.path)
                try:
                    self.index_run(run_dir, report)
                except Exception as exc:
                    # One run that cannot be indexed must not stop the others; its
                    # transaction is rolled back and the next pass tries it again.
                    log.exception("indexing %s failed", run_dir)
                    self._problem_once(None, str(run_dir),
                                       f"{run_dir}: indexing failed ({type(exc).__name__}: "
                                       f"{str(exc).splitlines()[0][:200] if str(exc) else ''}); "
                                       "the other runs are indexed, and this one is tried "
                                       "again on the next pass", report)
        return report

    def index_run(self, run_dir: Path, report: IndexReport) -> int | None:
        """Index one run directory; returns its run pk, or None if it cannot be indexed."""
        signature = _signature(run_dir)
        seen = self._seen.get(run_dir)
        if seen is not None and seen[0] == signature:
            report.runs += 1
            return seen[1]
        run_pk = self._index_run(run_dir, report)
        if run_pk is not None:
            # Taken before reading, so anything written meanwhile is read next pass.
            self._seen[run_dir] = (signature, run_pk)
        return run_pk

    def _index_run(self, run_dir: Path, report: IndexReport) -> int | None:
        manifest_path = run_dir / fmt.MANIFEST
        try:
            fmt.validate_name(run_dir.name)
        except fmt.RunDirError as exc:
            self._problem_once(None, str(run_dir), f"{exc}; the folder is not indexed", report)
            return None
        if not manifest_path.is_file():
            if _being_created(run_dir):
                return None  # runwatch.init writes the manifest next: look again next pass
            self._problem_once(None, str(run_dir),
                               f"{run_dir} has no manifest.json, so it is not indexed "
                               "(a run directory is made by runwatch.init)", report)
            return None
        try:
            manifest = loads_line(manifest_path.read_bytes())
            if not isinstance(manifest, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            self._problem_once(None, str(manifest_path),
                               f"{manifest_path} is not readable JSON ({exc}); run not indexed",
                               report)
            return None
        version = manifest.get("schema_version")
        if version != fmt.SCHEMA_VERSION:
            self._problem_once(None, str(manifest_path),
                               f"{manifest_path} has schema_version {version!r}; this runwatch "
                               f"reads version {fmt.SCHEMA_VERSION}: upgrade runwatch", report)
            return None
        run_id = manifest.get("run_id")
        if not isinstance(run_id, str) or not run_id:
            self._problem_once(None, str(manifest_path),
                               f"{manifest_path} has no run_id; run not indexed", report)
            return None
        with self.engine.begin() as conn:
            run_pk, is_new = upsert_run(conn, manifest, run_dir)
            self._whole_files(conn, run_pk, run_dir)
        report.runs += 1
        report.new_runs += int(is_new)
        for name in fmt.FILES:
            self._jsonl(run_pk, run_dir / name, report)
        self._samples_and_foreign(run_pk, run_dir, report)
        return run_pk

    def _jsonl(self, run_pk: int, path: Path, report: IndexReport) -> None:
        more = True
        while more:
            with self.engine.begin() as conn:
                more = self._jsonl_slice(conn, run_pk, path, report)

    def _jsonl_slice(self, conn: Connection, run_pk: int, path: Path,
                     report: IndexReport) -> bool:
        """Index up to SLICE_BYTES of a record file in one transaction; True if more is left.

        The slice is read and stored in pieces of READ_BYTES, so each piece's records are
        still in the processor's cache when they are stored.
        """
        name = path.name
        off = _offset(conn, run_pk, name)
        offset, line_no, last_seq = off["offset"], off["line_no"], off["last_seq"]
        total = IngestResult()
        bad: list[str] = []
        start = offset
        more = False
        # a metrics record whose seq no point id can hold is refused; it must not hide
        # the records after it
        seq_limit = SEQ_LIMIT if name == fmt.METRICS else None
        while offset - start < SLICE_BYTES:
            res = read_new(path, offset, line_no, READ_BYTES, max_line=SLICE_BYTES)
            if res.offset == offset and not res.bad:
                break
            top = last_seq
            fresh = []
            for rec in res.records:
                seq = rec["seq"]
                if seq > last_seq:
                    fresh.append(rec)
                    if seq > top and (seq_limit is None or seq < seq_limit):
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
            return False
        # at most MAX_PROBLEMS_LISTED record problems are itemised per slice, then counted
        problems = [f"{path.parent}/{p}" for p in total.problems]
        extra = total.problem_count - len(total.problems)
        if extra > 0:
            problems.append(f"{path}: {extra} more problems like the above")
        problems += bad
        for p in problems:
            _add_problem(conn, run_pk, str(path), p)
        conn.execute(update(s.ingest_offsets).where(
            s.ingest_offsets.c.run_pk == run_pk, s.ingest_offsets.c.file == name
        ).values(offset=offset, line_no=line_no, last_seq=last_seq,
                 bad_lines=s.ingest_offsets.c.bad_lines + len(bad)))
        if problems:
            conn.execute(update(s.runs).where(s.runs.c.pk == run_pk).values(
                problems=s.runs.c.problems + len(problems)))
        if name == fmt.METRICS and total.points:
            for hook in self.hooks:
                hook(conn, run_pk, total.points)
        report.rows += total.rows
        report.problems.extend(problems)
        return more

    def _whole_files(self, conn: Connection, run_pk: int, run_dir: Path) -> None:
        for name, column in ((fmt.CONFIG, "config"), (fmt.ENGINE_CONFIG, "engine_config")):
            path = run_dir / name
            try:
                mtime = path.stat().st_mtime
            except FileNotFoundError:
                continue
            off = _offset(conn, run_pk, name)
            if off["mtime"] == mtime:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            conn.execute(update(s.runs).where(s.runs.c.pk == run_pk).values({column: text}))
            _set_mtime(conn, run_pk, name, mtime)

    def _samples_and_foreign(self, run_pk: int, run_dir: Path, report: IndexReport) -> None:
        with self.engine.begin() as conn:
            for entry in os.scandir(run_dir):
                name = entry.name
                if name in KNOWN_FILES or name.endswith(".tmp") or entry.is_dir():
                    continue
                parsed = fmt.parse_sample_file_name(name)
                if parsed is None:
                    self._problem_once(run_pk, str(entry.path),
                                       f"{entry.path}: not a file of run format v1; ignored",
                                       report, conn)
                    continue
                mtime = entry.stat().st_mtime
                off = _offset(conn, run_pk, name)
                if off["mtime"] == mtime:
                    continue
                report.rows += _ingest_samples(conn, run_pk, Path(entry.path), parsed, report)
                _set_mtime(conn, run_pk, name, mtime)

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
                    st = entry.stat()
                except OSError:
                    continue
                out.append((entry.name, st.st_size, st.st_mtime_ns))
    except OSError:
        return ()
    return tuple(sorted(out))


def _offset(conn: Connection, run_pk: int, name: str) -> dict[str, Any]:
    o = s.ingest_offsets.c
    row = conn.execute(select(o.offset, o.line_no, o.last_seq, o.mtime).where(
        o.run_pk == run_pk, o.file == name)).first()
    if row is None:
        conn.execute(insert(s.ingest_offsets).values(run_pk=run_pk, file=name, offset=0,
                                                     line_no=0, last_seq=-1, bad_lines=0))
        return {"offset": 0, "line_no": 0, "last_seq": -1, "mtime": None}
    return dict(row._mapping)


def _set_mtime(conn: Connection, run_pk: int, name: str, mtime: float) -> None:
    conn.execute(update(s.ingest_offsets).where(
        s.ingest_offsets.c.run_pk == run_pk, s.ingest_offsets.c.file == name).values(mtime=mtime))


def _add_problem(conn: Connection, run_pk: int | None, path: str, message: str) -> None:
    conn.execute(insert(s.ingest_problems).values(run_pk=run_pk, path=path, message=message,
                                                  ts=time.time()))


def _ingest_samples(conn: Connection, run_pk: int, path: Path, parsed: tuple[int, str, str],
                    report: IndexReport) -> int:
    step, split, kind = parsed
    try:
        payload = loads_line(path.read_bytes())
        items = payload["samples"] if isinstance(payload, dict) else payload
        if not isinstance(items, list):
            raise ValueError("no 'samples' list")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        msg = f"{path}: not a samples file ({exc}); skipped"
        _add_problem(conn, run_pk, str(path), msg)
        report.problems.append(msg)
        return 0
    conn.execute(delete(s.samples).where(s.samples.c.run_pk == run_pk,
                                         s.samples.c.file == path.name))
    rows = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        rows.append((run_pk, path.name, i, step, split, kind, _num(item.get("reward")),
                     _num(item.get("advantage")), _int(item.get("group")),
                     bool(item["truncated"]) if "truncated" in item else None,
                     _text(item.get("prompt")), _text(item.get("completion")),
                     orjson.dumps(item, option=orjson.OPT_NON_STR_KEYS).decode()))
    if rows:
        conn.exec_driver_sql(insert_ignore_sql(s.samples, conn.dialect.name, conn.dialect), rows)
    return len(rows)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and v == v else None


def _int(v: Any) -> int | None:
    return v if type(v) is int else None


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    return orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS).decode()
