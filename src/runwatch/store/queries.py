"""Read queries over the index shared by the CLI and the server (portable SQL only)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice, repeat
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Connection, Row, func, or_, select

from runwatch.rundir import format as fmt
from runwatch.store import schema as s
from runwatch.store.keys import KeyInfo, run_keys
from runwatch.store.plain import split_ref
from runwatch.store.points import SEQ_LIMIT, SEQ_MASK, id_range, newest_seq

# json_or_text, process_gone and process_here are read without SQLAlchemy (runs list);
# this module's readers find them here too
from runwatch.store.runrows import SEARCH_COLUMNS, escape_like
from runwatch.store.runrows import json_or_text as json_or_text
from runwatch.store.runrows import process_gone as process_gone
from runwatch.store.runrows import process_here as process_here

if TYPE_CHECKING:  # numpy loads with the first history read: most commands never read one
    import numpy as np
    import numpy.typing as npt

    IntArray = npt.NDArray[np.int64]
    FloatArray = npt.NDArray[np.float64]
    Points = npt.NDArray[np.void]  # _ROW_FIELDS rows


class RunNotFound(LookupError):
    """A run reference matched no run, or more than one."""

    def __init__(self, message: str, candidates: Sequence[str] = (), ambiguous: bool = False,
                 projects: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.candidates = list(candidates)
        # True when several runs matched (the caller must be more precise), False when none.
        self.ambiguous = ambiguous
        # the projects whose runs all bear the name given: the caller must say which
        self.projects = list(projects)


def resolve_run(conn: Connection, ref: str, projects: frozenset[str] | None = None,
                project: str | None = None) -> Row[Any]:
    """The run whose id is `ref`, or whose id or name uniquely starts with `ref`; with
    `projects`, among those projects' runs only (a scoped token's candidates and
    ambiguities never name another project's runs); with `project`, or `ref` written
    `PROJECT/RUN`, among that project's runs. A name is a run's own within its project
    only, so a name two projects' runs bear is ambiguous (RunNotFound with `projects`)."""
    r = s.runs.c
    named, ref = split_ref(ref)
    if named is not None and project is not None and named != project:
        raise RunNotFound(f"{named}/{ref} names project {named!r} and the request "
                          f"project {project!r}; name one project")
    project = named if named is not None else project
    within: list[ColumnElement[bool]] = (
        [r.project.in_(sorted(projects))] if projects is not None else [])
    if project is not None:
        within.append(r.project == project)
    where = f" in project {project!r}" if project is not None else ""
    if len(ref) > fmt.MAX_NAME_LENGTH or "\x00" in ref:
        # no name or id is longer (nor holds a NUL), and SQLite refuses a LIKE pattern of
        # some 50,000 characters: said without a query, and without echoing all of it
        shown = ref[:40].replace("\x00", "\\0") + ("…" if len(ref) > 40 else "")
        raise RunNotFound(f"no run has the id or name {shown!r} ({len(ref)} characters; "
                          f"a run's name has at most {fmt.MAX_NAME_LENGTH}, its id 32, and "
                          "neither holds a NUL)", [])
    exact = conn.execute(select(s.runs).where(or_(r.run_id == ref, r.name == ref),
                                              *within)).all()
    if len(exact) == 1:
        return exact[0]
    if len(exact) > 1:
        held = sorted({x.project for x in exact})
        if len(held) > 1:
            raise RunNotFound(
                f"{ref!r} names runs of {len(held)} projects ({', '.join(held)}); say which "
                f"as PROJECT/{ref} (e.g. {held[0]}/{ref}), or use a run id",
                _labels(exact), ambiguous=True, projects=held)
        raise RunNotFound(f"{ref!r} names {len(exact)} runs; use a run id",
                          _labels(exact), ambiguous=True)
    pattern = escape_like(ref) + "%"
    found = conn.execute(
        select(s.runs).where(or_(r.run_id.like(pattern, escape="\\"),
                                 r.name.like(pattern, escape="\\")), *within)
        .order_by(r.created_at.desc()).limit(20)
    ).all()
    if len(found) == 1:
        return found[0]
    if found:
        raise RunNotFound(f"{ref!r} matches {len(found)} runs{where}; give more of the id "
                          "or name", _labels(found), ambiguous=True)
    recent = conn.execute(select(r.run_id, r.name, r.project).where(*within)
                          .order_by(r.created_at.desc()).limit(10)).all()
    raise RunNotFound(f"no run has the id or name {ref!r}{where}", _labels(recent))


def _labels(rows: Sequence[Any]) -> list[str]:
    """Runs as a list of candidates names them: `id  name`, or `id  project/name` where
    they are of several projects."""
    several = len({x.project for x in rows}) > 1
    return [f"{x.run_id}  {x.project}/{x.name}" if several else f"{x.run_id}  {x.name}"
            for x in rows]


# What a list row carries (runwatch.analysis.views.run_summary's fields, the cursor's pk,
# the manifest for process_gone): not a run's config or engine config, which can be large.
LIST_COLUMNS = tuple(c for c in s.runs.c
                     if c.name not in ("config", "engine_config", "dir", "progress_done",
                                       "progress_total", "problems"))


def list_runs(
    conn: Connection,
    search: str | None = None,
    project: str | None = None,
    status: str | None = None,
    limit: int = 100,
    before: tuple[float, int] | None = None,
    group: str | None = None,
) -> list[Row[Any]]:
    """Runs newest first; `before` = (created_at, pk) of the last row of the previous page;
    `group` keeps the runs of one group (a sweep's arms share one). Rows carry
    LIST_COLUMNS, enough for `run_summary`."""
    r = s.runs.c
    q = select(*LIST_COLUMNS)
    if search:
        pattern = "%" + escape_like(search.lower()) + "%"
        if conn.dialect.name == "sqlite":
            # SQLite's LIKE ignores ASCII case, as its lower() folds only ASCII: the same
            # matches as lower(column) LIKE, without a function call per column and row
            q = q.where(or_(*[getattr(r, c).like(pattern, escape="\\")
                              for c in SEARCH_COLUMNS]))
        else:
            # one lower() of the columns joined (by a control character no search holds)
            # instead of one per column: about 1.6x faster over 10,000 runs on PostgreSQL
            joined = func.concat_ws("\x1f", *[getattr(r, c) for c in SEARCH_COLUMNS])
            q = q.where(func.lower(joined).like(pattern, escape="\\"))
    if project:
        q = q.where(r.project == project)
    if group:
        q = q.where(r.group_name == group)
    if status:
        q = q.where(r.status == status.upper())
    if before is not None:
        ts, pk = before
        # `created_at <= ts` bounds the index range; the OR alone made a deep page walk
        # every newer run first
        q = q.where(r.created_at <= ts, or_(r.created_at < ts, r.pk < pk))
    return list(conn.execute(q.order_by(r.created_at.desc(), r.pk.desc()).limit(limit)).all())


def last_values(conn: Connection, run_pk: int) -> dict[str, Any]:
    """The newest value of every metric of a run, with its step."""
    return {k.key: {"step": k.last_step, "value": _nan(k.last_value), "points": k.points}
            for k in run_keys(conn, run_pk)}


def _nan(value: float | None) -> float:
    return float("nan") if value is None else value


@dataclass
class StepRow:
    step: int
    ts: float
    values: dict[str, float]


class HistoryChanged(RuntimeError):
    """A key's points came out of step order while its history was read: a step was
    logged again (a resumed run) after the key was found to have none logged again."""


# A key with more points than this is read in seq order once its step summaries
# (runwatch.store.summaries) show that none of its steps was logged again; a shorter one
# is sorted by step by the database, which costs less than that proof.
PROVE_ORDER_POINTS = 5_000
# A whole history is read at most about this many points at a time, shared among its
# keys (at least MIN_KEY_CHUNK a key), and handed on as it is read: an export's memory
# does not grow with the run.
HISTORY_CHUNK_POINTS = 1 << 16
MIN_KEY_CHUNK = 64


@dataclass
class StepBlock:
    """Consecutive steps of a history as columns: each step, its time (the earliest of the
    values shown), and per key (in the history's order of keys, only keys with a value
    here) the rows that have its value (None: every row) and those values (NaN for NaN)."""

    step: IntArray
    ts: FloatArray
    columns: list[tuple[str, IntArray | None, FloatArray]]

    def measured(self) -> list[dict[str, float]]:
        """Each step's values by key, keys in column order."""
        if all(at is None for _, at, _ in self.columns):
            names = [name for name, _, _ in self.columns]
            rows = zip(*[v.tolist() for _, _, v in self.columns], strict=True)
            return list(map(dict, map(zip, repeat(names), rows)))
        out: list[dict[str, float]] = [{} for _ in range(self.step.size)]
        for name, at, values in self.columns:
            for i, v in zip(range(self.step.size) if at is None else at.tolist(),
                            values.tolist(), strict=True):
                out[i][name] = v
        return out

    def steps(self) -> list[tuple[int, float, dict[str, float]]]:
        """(step, ts, values by key) of each step."""
        return list(zip(self.step.tolist(), self.ts.tolist(), self.measured(), strict=True))

    def rows(self) -> list[StepRow]:
        return [StepRow(*step) for step in self.steps()]

    def last(self, n: int) -> StepBlock:
        """The block's last `n` steps."""
        cut = max(self.step.size - n, 0)
        columns: list[tuple[str, IntArray | None, FloatArray]] = []
        for name, at, values in self.columns:
            if at is None:
                columns.append((name, None, values[cut:]))
            else:
                kept = at >= cut
                if kept.any():
                    columns.append((name, at[kept] - cut, values[kept]))
        return StepBlock(self.step[cut:], self.ts[cut:], columns)

    @classmethod
    def of_rows(cls, rows: Sequence[StepRow]) -> StepBlock:
        """The block of `rows` (steps rising), keys in the order they first appear."""
        import numpy as np

        names = list(dict.fromkeys(k for r in rows for k in r.values))
        columns: list[tuple[str, IntArray | None, FloatArray]] = []
        for name in names:
            at = [i for i, r in enumerate(rows) if name in r.values]
            columns.append((name, None if len(at) == len(rows) else np.array(at, np.int64),
                            np.array([rows[i].values[name] for i in at], np.float64)))
        return cls(np.array([r.step for r in rows], np.int64),
                   np.array([r.ts for r in rows], np.float64), columns)


@dataclass(frozen=True)
class _Column:
    """A key of a history; `first_step` (None where not proved) says that its steps rise
    with its seqs, each logged once, up to seq `upto`."""

    name: str
    id: int
    points: int
    last_step: int | None
    first_step: int | None = None
    upto: int = SEQ_MASK


class History:
    """A run's metrics at each step of [step_min, step_max], as `history` gives them, read
    without holding the run: its last steps (`tail`), how many there are (`count`), the
    keys that logged any (`present`), and every step a block at a time (`blocks`).

    Per key and step the newest point (highest seq) is shown: a key whose steps rise with
    its seqs is read in seq order (from the end for `tail`); another is sorted by step by
    the database. A step's time is the earliest time of the points shown.
    """

    def __init__(self, conn: Connection, run_pk: int, keys: Sequence[str] | None = None,
                 step_min: int | None = None, step_max: int | None = None) -> None:
        self.conn, self.step_min, self.step_max = conn, step_min, step_max
        infos = run_keys(conn, run_pk)
        by_name = {k.key: k for k in infos}
        if keys:
            missing = [k for k in keys if k not in by_name]
            if missing:
                raise KeyError(f"run has no metric {missing[0]!r}; it has: "
                               + ", ".join(sorted(by_name)[:30]))
            infos = [by_name[k] for k in dict.fromkeys(keys)]
        self.columns = _columns(conn, run_pk, infos)
        self._m = "?" if conn.dialect.paramstyle == "qmark" else "%s"

    def _where(self, col: _Column) -> tuple[str, list[int]]:
        """The condition on metric_points that picks the key's points in the step range."""
        m = self._m
        low, high = id_range(col.id, upto_seq=col.upto)
        sql, params = f"id BETWEEN {m} AND {m}", [low, high]
        if self.step_min is not None:
            sql += f" AND step >= {m}"
            params.append(self.step_min)
        if self.step_max is not None:
            sql += f" AND step <= {m}"
            params.append(self.step_max)
        return sql, params

    def tail(self, n: int) -> tuple[list[StepRow], list[str]]:
        """The last `n` steps, and the keys that logged any step of the range."""
        parts: list[tuple[str, Points]] = []
        for col in self.columns:
            where, params = self._where(col)
            if col.first_step is not None:  # its last n points are its last n steps
                found = _points(_fetch(self.conn, "SELECT step, ts, value FROM metric_points "
                                       f"WHERE {where} ORDER BY id DESC LIMIT {int(n)}",
                                       params))[::-1]
                _check_rising(col, found["step"], None)
            else:  # its points at its n highest steps, sorted
                found = _newest(_points(_fetch(
                    self.conn, f"SELECT step, ts, value FROM metric_points WHERE {where} AND "
                    f"step >= COALESCE((SELECT DISTINCT step FROM metric_points WHERE {where} "
                    f"ORDER BY step DESC LIMIT 1 OFFSET {int(n) - 1}), step) "
                    "ORDER BY step, id", params + params)))
            parts.append((col.name, found))
        present = [name for name, found in parts if found.size]
        return _merge(parts).last(n).rows(), present

    def count(self) -> int:
        """How many steps the range holds: those of keys that logged every step from
        their first to their last counted from those two, the others' by the database."""
        import numpy as np

        lo = self.step_min if self.step_min is not None else -(1 << 63)
        hi = self.step_max if self.step_max is not None else (1 << 63) - 1
        spans: list[tuple[int, int]] = []
        others: list[_Column] = []
        for col in self.columns:
            if (col.first_step is not None and col.last_step is not None
                    and col.points == col.last_step - col.first_step + 1):
                if max(col.first_step, lo) <= min(col.last_step, hi):
                    spans.append((max(col.first_step, lo), min(col.last_step, hi)))
            else:
                others.append(col)
        merged: list[list[int]] = []
        for first, last in sorted(spans):
            if merged and first <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], last)
            else:
                merged.append([first, last])
        total = sum(last - first + 1 for first, last in merged)
        if not others:
            return total
        steps = self._distinct_steps(others)
        if merged:  # steps inside a span are counted already
            starts = np.array([first for first, _ in merged], dtype=np.int64)
            ends = np.array([last for _, last in merged], dtype=np.int64)
            i = np.searchsorted(starts, steps, side="right") - 1
            inside = (i >= 0) & (steps <= ends[np.maximum(i, 0)])
            return total + int(np.count_nonzero(~inside))
        return total + int(steps.size)

    def _distinct_steps(self, cols: list[_Column]) -> IntArray:
        """Every step of the range any of `cols` logged, sorted, each once (by the
        database: no point crosses the driver)."""
        import numpy as np

        m, base = self._m, f"CAST(k.id AS BIGINT) * {SEQ_LIMIT}"
        sql = (f"SELECT DISTINCT p.step FROM metric_keys AS k JOIN metric_points AS p ON "
               f"p.id BETWEEN {base} AND {base} + {SEQ_MASK} "
               f"WHERE k.id IN ({', '.join(str(int(c.id)) for c in cols)})")
        params: list[int] = []
        if self.step_min is not None:
            sql += f" AND p.step >= {m}"
            params.append(self.step_min)
        if self.step_max is not None:
            sql += f" AND p.step <= {m}"
            params.append(self.step_max)
        cur = _cursor(self.conn)
        try:
            cur.execute(sql + " ORDER BY p.step", params)
            steps: IntArray = np.fromiter((s for (s,) in cur), dtype=np.int64)
        finally:
            cur.close()
        return steps

    def present(self) -> list[str]:
        """The keys that logged a step of the range."""
        if self.step_min is None and self.step_max is None:
            return [c.name for c in self.columns if c.points > 0]
        found = []
        for col in self.columns:
            where, params = self._where(col)
            if _fetch(self.conn, f"SELECT 1 FROM metric_points WHERE {where} LIMIT 1", params):
                found.append(col.name)
        return found

    def blocks(self) -> Iterator[StepBlock]:
        """Every step of the range in order, a block of steps at a time."""
        chunk = max(MIN_KEY_CHUNK, HISTORY_CHUNK_POINTS // max(len(self.columns), 1))
        readers = [_Reader(self, col, chunk) for col in self.columns]
        try:
            while True:
                for r in readers:
                    r.fill()
                if not any(r.points.size for r in readers):
                    return
                # a key not read to its end may have more points at its last step read
                bounds = [int(r.points["step"][-1]) for r in readers if not r.done]
                bound = min(bounds) if bounds else None
                yield _merge([(r.col.name, r.take(bound)) for r in readers])
        finally:
            for r in readers:
                r.close()

    def row_chunks(self) -> Iterator[list[StepRow]]:
        """Every step of the range in order, as StepRows, a block of steps at a time."""
        return (block.rows() for block in self.blocks())

    def step_chunks(self) -> Iterator[list[tuple[int, float, dict[str, float]]]]:
        """Every step of the range in order as (step, ts, values), a block at a time."""
        return (block.steps() for block in self.blocks())


def history(
    conn: Connection,
    run_pk: int,
    keys: Sequence[str] | None = None,
    step_min: int | None = None,
    step_max: int | None = None,
) -> list[StepRow]:
    """Every step of a run with its metric values; the newest record wins within a step
    (all in memory: `History` reads a part at a time)."""
    return [row for rows in History(conn, run_pk, keys, step_min, step_max).row_chunks()
            for row in rows]


def _columns(conn: Connection, run_pk: int, infos: list[KeyInfo]) -> list[_Column]:
    """The history columns of `infos`, long keys with their steps proved to rise with
    their seqs where the step summaries show it (all points kept: none superseded)."""
    from runwatch.store.summaries import retained_count, summary_states

    long = [k for k in infos if k.points > PROVE_ORDER_POINTS]
    upto = {k.id: newest_seq(conn, [k.id]) for k in long}
    states = summary_states(conn, [k.id for k in long])
    kept = {kid: retained_count(conn, kid, state) for kid, state in states.items()}
    # counted again after: a point stored meanwhile makes them differ, never agree
    now = {k.id: k for k in run_keys(conn, run_pk)} if kept else {}
    cols = []
    for info in infos:
        k = now.get(info.id, info)
        seq, state = upto.get(k.id), states.get(k.id)
        if seq is not None and state is not None and kept[k.id] == k.points:
            cols.append(_Column(k.key, k.id, k.points, k.last_step, state.first_step, seq))
        else:
            cols.append(_Column(k.key, k.id, k.points, k.last_step))
    return cols


class _Reader:
    """One key's points in the step range in step order (the newest of a step last),
    read a chunk at a time from the driver's cursor."""

    def __init__(self, history: History, col: _Column, chunk: int) -> None:
        import numpy as np

        self.col, self.chunk, self.done = col, chunk, False
        self.points: Points = np.zeros(0, dtype=_ROW_FIELDS)
        self.last_step: int | None = None
        where, params = history._where(col)
        # numpy reads the driver's rows straight unless a value is NULL (NaN)
        nulls = bool(_fetch(history.conn, "SELECT 1 FROM metric_points WHERE "
                            f"{where} AND value IS NULL LIMIT 1", params))
        self.cur = _cursor(history.conn, f"runwatch_history_{col.id}", chunk)
        self.cur.execute(f"SELECT step, ts, value FROM metric_points WHERE {where} ORDER BY "
                         + ("id" if col.first_step is not None else "step, id"), params)
        nan = float("nan")
        self.rows: Iterator[Any] = (((s, t, nan if v is None else v) for s, t, v in self.cur)
                                    if nulls else iter(self.cur))

    def fill(self) -> None:
        """Read on until the points held span two steps or more, or the key ends."""
        import numpy as np

        while not self.done and (not self.points.size
                                 or self.points["step"][0] == self.points["step"][-1]):
            more = np.fromiter(islice(self.rows, self.chunk), dtype=_ROW_FIELDS)
            self.done = more.size < self.chunk
            if self.col.first_step is not None:
                _check_rising(self.col, more["step"], self.last_step)
                if more.size:
                    self.last_step = int(more["step"][-1])
            self.points = np.concatenate([self.points, more]) if self.points.size else more

    def take(self, bound: int | None) -> Points:
        """The points held below step `bound` (all: None), the newest of each step."""
        import numpy as np

        cut = (self.points.size if bound is None
               else int(np.searchsorted(self.points["step"], bound, side="left")))
        out, self.points = self.points[:cut], self.points[cut:]
        return _newest(out)

    def close(self) -> None:
        self.cur.close()


_ROW_FIELDS = [("step", "i8"), ("ts", "f8"), ("value", "f8")]


def _merge(parts: list[tuple[str, Points]]) -> StepBlock:
    """The block of the keys' points (each key's steps rising, once each)."""
    import numpy as np

    held = [(name, p) for name, p in parts if p.size]
    if not held:
        return StepBlock(np.zeros(0, np.int64), np.zeros(0, np.float64), [])
    first = held[0][1]["step"]
    if all(p.size == first.size and np.array_equal(p["step"], first) for _, p in held[1:]):
        steps = first  # keys logged together: one set of steps
    else:
        steps = np.unique(np.concatenate([p["step"] for _, p in held]))
    ts = np.full(steps.size, np.inf)
    columns: list[tuple[str, IntArray | None, FloatArray]] = []
    for name, p in held:
        if p.size == steps.size:
            np.minimum(ts, p["ts"], out=ts)
            columns.append((name, None, p["value"]))
        else:
            at = np.searchsorted(steps, p["step"])
            ts[at] = np.minimum(ts[at], p["ts"])
            columns.append((name, at, p["value"]))
    return StepBlock(steps, ts, columns)


def _newest(points: Points) -> Points:
    """Of points sorted by step (then seq), the last of each step."""
    import numpy as np

    if points.size < 2:
        return points
    step = points["step"]
    keep = np.ones(step.size, dtype=bool)
    keep[:-1] = step[:-1] != step[1:]
    return points if keep.all() else points[keep]


def _check_rising(col: _Column, steps: IntArray, after: int | None) -> None:
    import numpy as np

    if steps.size and ((after is not None and int(steps[0]) <= after)
                       or bool(np.any(steps[1:] <= steps[:-1]))):
        raise HistoryChanged(f"metric {col.name!r} had a step logged again while it was "
                             "read; read it again")


def _points(rows: Sequence[Any]) -> Points:
    import numpy as np

    nan = float("nan")
    return np.fromiter(((s, t, nan if v is None else v) for s, t, v in rows), dtype=_ROW_FIELDS,
                       count=len(rows))


def _cursor(conn: Connection, name: str | None = None, rows: int = 0) -> Any:
    """A cursor of the driver's own. On PostgreSQL with a `name`, one the server keeps, its
    rows fetched `rows` at a time: a client cursor fetches every row at once."""
    dbapi = conn.connection.dbapi_connection
    if name is not None and conn.dialect.name == "postgresql":
        cur: Any = dbapi.cursor(name=name)  # type: ignore[union-attr]
        cur.itersize = rows
        return cur
    return dbapi.cursor()  # type: ignore[union-attr]


def _fetch(conn: Connection, sql: str, params: list[int]) -> list[Any]:
    cur = _cursor(conn)
    try:
        cur.execute(sql, params)
        return list(cur.fetchall())
    finally:
        cur.close()


def events(conn: Connection, run_pk: int) -> list[dict[str, Any]]:
    """A run's lifecycle events, oldest first (absent fields are None)."""
    c = s.events.c
    rows = conn.execute(select(s.events).where(c.run_pk == run_pk).order_by(c.seq))
    return [{k: v for k, v in r._mapping.items() if k != "run_pk"} for r in rows]


def folder_problem(conn: Connection, folder: str) -> str | None:
    """Why the run folder `folder` (a path) is not indexed, as the indexer last said it
    (it says each reason once, when it first meets it): its latest problem without a run,
    on the folder or a file in it; None if it said nothing."""
    c = s.ingest_problems.c
    return conn.execute(select(c.message).where(
        c.run_pk.is_(None), (c.path == folder) | c.path.startswith(folder + "/",
                                                                    autoescape=True))
        .order_by(c.id.desc()).limit(1)).scalar()


def unindexed_folder(conn: Connection, name: str) -> tuple[str, str] | None:
    """A run folder named `name` the indexer said it could not read, and why (its latest
    problem without a run, on the folder itself or a file right in it): (folder, message),
    or None if it said nothing of one."""
    c = s.ingest_problems.c
    if not name or "/" in name:
        return None
    rows = conn.execute(select(c.path, c.message).where(
        c.run_pk.is_(None), c.path.contains("/" + name, autoescape=True))
        .order_by(c.id.desc()).limit(50))
    for path, message in rows:  # LIKE also finds parents and other cases: only the folder
        where = PurePath(path)
        folder = where if where.name == name else where.parent
        if folder.name == name:
            return str(folder), str(message)
    return None


def problems(conn: Connection, run_pk: int, limit: int = 50) -> list[str]:
    c = s.ingest_problems.c
    rows = conn.execute(select(c.message).where(c.run_pk == run_pk).order_by(c.id).limit(limit))
    return [m for (m,) in rows]
