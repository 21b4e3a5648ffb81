"""Findings and engine state in the index database, and the hooks that keep them current.

`on_metrics` is the indexer's hook: it loads a run's engine state, evaluates the new
points and writes back only the findings that changed, so listing (`health_for_run`)
is a single query; where findings change it counts the run's open ones as listed, which
/metrics sums (`open_by_severity`). A change of thresholds or of the run's config
re-evaluates the run from its stored points, as does a new rule catalogue (a run that
gets no new points is judged again by the sweep of a server or of `runwatch index`,
`runwatch.health.catchup`, or when read, `ensure_current`); a finding found again keeps
its id (`replace`). `on_events` is its hook for a run's new events: once the run has
succeeded, the rules that wait for its end judge its whole log.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
import yaml
from sqlalchemy import (
    Connection,
    delete,
    func,
    insert,
    select,
    update,
)

from runwatch.health.engine import CATALOGUE_ID, Engine
from runwatch.health.findings import Finding
from runwatch.health.rules import BY_ID, CATALOGUE
from runwatch.health.rules.base import SEVERITIES, SEVERITY_RANK
from runwatch.health.thresholds import NONE, Overrides, ThresholdError, parse
from runwatch.rundir import thresholdfiles
from runwatch.rundir.configtext import load_config
from runwatch.rundir.format import ACTIVE_PHASES
from runwatch.store import schema as s
from runwatch.store.keys import metric_keys
from runwatch.store.points import PointColumns, newest_seq, read_points

log = logging.getLogger(__name__)
_NUMERIC = (int, float)
# The end status whose run the rules that wait for the end judge: a run that failed or
# was cancelled ended for a reason of its own, which is the news.
FINISHED = "SUCCEEDED"
# A run's open findings by severity, as listed, in its health_state row (a severity added
# without its column fails here, at import). They are counted when the run's findings
# change, so a change to how a listing merges findings (`incidents`, `same_signal`, a
# rule's detector or signal) needs a migration that counts every run again, as 0012 does.
OPEN_COUNTS = {severity: s.health_state.c[f"open_{severity}"] for severity in SEVERITIES}
# How every engine state `save` writes begins: the rule catalogue that judged the run
# (`CATALOGUE_ID`, the digest of every rule's fields a finding or state depends on:
# `runwatch.health.engine.catalogue_fingerprint`), so the runs an older catalogue judged
# are found by one query (`runwatch.health.catchup`) without loading each run's engine.
CATALOGUE_MARK = f'{{"catalogue":"{CATALOGUE_ID}"'


# --- run context ---------------------------------------------------------------


def settings_from_config(text: str | None) -> dict[str, float]:
    """Numeric leaves of a run's config by their last name (outer levels win), e.g.
    `max_sample_tokens`: the budgets the saturation rules compare against."""
    if not text:
        return {}
    try:
        data = load_config(text)
    except yaml.YAMLError:
        return {}
    out: dict[str, float] = {}
    level: list[Any] = [data]
    while level:
        nxt: list[Any] = []
        for node in level:
            if not isinstance(node, dict):
                continue
            for k, v in node.items():
                if isinstance(v, dict):
                    nxt.append(v)
                elif isinstance(v, _NUMERIC) and not isinstance(v, bool):
                    out.setdefault(str(k), float(v))
        level = nxt
    return out


def get_thresholds(conn: Connection, project: str) -> Overrides:
    """A project's overrides (none when the project has not set any)."""
    text = conn.execute(select(s.health_thresholds.c.overrides)
                        .where(s.health_thresholds.c.project == project)).scalar()
    return parse(orjson.loads(text), stored=True) if text else NONE


def set_thresholds(conn: Connection, project: str, data: Mapping[str, Any] | None,
                   updated_ts: float | None = None) -> Overrides:
    """Validate and store a project's overrides (None clears them); the project's runs are
    re-evaluated on their next batch, or now with `reevaluate`. `updated_ts` is the mtime of
    the runs folder's file they were read from or written to (rundir/thresholdfiles), so a
    pass reads that file again only once it changes. Raises ThresholdError."""
    overrides = parse(data)
    conn.execute(delete(s.health_thresholds).where(s.health_thresholds.c.project == project))
    if data is not None:
        conn.execute(insert(s.health_thresholds).values(
            project=project, overrides=orjson.dumps(overrides.to_dict()).decode(),
            updated_ts=time.time() if updated_ts is None else updated_ts))
    return overrides


def sync_thresholds(engine: sa.Engine, runs_dir: Path, every: bool = False,
                    log_new: bool = False) -> list[str]:
    """Read into the index each thresholds file of the runs folder newer than what it holds
    of that project (all of them, into an index made again), and re-evaluate the project's
    runs where the overrides changed: the folder keeps them, so every index of it judges
    alike. A file that cannot be read, or is not valid, changes nothing (the project keeps
    the overrides the index held) and is returned, said in one line: once per file and
    message (the index keeps what it said, `ingest_problems`), or with `every` at every
    call; with `log_new` (a server, which has no other word for it) each new one is also
    logged."""
    p = s.ingest_problems.c
    # (path, what to say, the mtime of the file's version said of: a read command's check
    # for news, ingest/unchanged, takes a version said of as read)
    refused: list[tuple[str, str, float]] = []
    try:
        files = thresholdfiles.listed(runs_dir)
    except OSError as exc:
        folder = runs_dir / thresholdfiles.FOLDER
        files = []
        refused.append((str(folder), f"the folder of health thresholds {folder} cannot be "
                                     f"listed ({exc.strerror or exc}): the index keeps the "
                                     "thresholds it holds", 0.0))
    if not files and not refused:
        return []  # most runs folders: a pass costs no query for this
    with engine.connect() as conn:
        held = {str(project): float(ts) for project, ts in conn.execute(
            select(s.health_thresholds.c.project, s.health_thresholds.c.updated_ts))}
    files = thresholdfiles.newer(files, held)
    if not files and not refused:
        return []
    with engine.begin() as conn:
        for file in files:
            try:
                overrides = parse(thresholdfiles.read(file.path))
            except (OSError, yaml.YAMLError, ThresholdError) as exc:
                refused.append((str(file.path), _refused(file, exc), file.mtime))
                continue
            # said again should it break again
            conn.execute(delete(s.ingest_problems).where(p.run_pk.is_(None),
                                                         p.path == str(file.path)))
            before = get_thresholds(conn, file.project)
            set_thresholds(conn, file.project, overrides.to_dict(), updated_ts=file.mtime)
            if overrides != before:
                refresh_project(conn, file.project)
        said = []
        for path, message, mtime in refused:
            seen = conn.execute(select(p.id, p.ts).where(
                p.run_pk.is_(None), p.path == path, p.message == message)).first()
            # its time: when said, or the file's mtime where that is later (a clock ahead
            # of this one's, as a network disk's can be), so that this version reads as said
            if seen is None:
                conn.execute(insert(s.ingest_problems).values(
                    run_pk=None, path=path, message=message, ts=max(time.time(), mtime)))
                if log_new:
                    log.warning("%s", message)
            elif seen.ts < mtime:  # the same words of a version written since
                conn.execute(update(s.ingest_problems).where(p.id == seen.id).values(ts=mtime))
            if seen is None or every:
                said.append(message)
    return said


def _refused(file: thresholdfiles.ThresholdsFile, exc: Exception) -> str:
    """What to say of a thresholds file that was not read in, in one line."""
    if isinstance(exc, yaml.YAMLError):
        why = f"is not valid YAML ({' '.join(str(exc).split())})"
    elif isinstance(exc, ThresholdError):
        why = f"is refused: {exc}"
    else:
        why = f"cannot be read ({getattr(exc, 'strerror', None) or exc})"
    return (f"the health thresholds file {file.path} {why}; project {file.project} keeps the "
            "thresholds the index held: fix the file, or store one with `runwatch thresholds "
            f"{file.project} FILE`")


def refresh_project(conn: Connection, project: str) -> int:
    """Bring every run of a project up to date with its thresholds; returns how many."""
    pks = conn.execute(select(s.runs.c.pk).where(s.runs.c.project == project)).scalars().all()
    for pk in pks:
        ensure_current(conn, int(pk))
    return len(pks)


def _run_row(conn: Connection, run_pk: int) -> Any:
    r = s.runs.c
    row = conn.execute(select(r.method, r.project, r.status, r.config)
                       .where(r.pk == run_pk)).first()
    if row is None:
        raise LookupError(f"run {run_pk} is not in the index")
    return row


def _load_state(conn: Connection, run_pk: int) -> tuple[dict[str, Any] | None, int]:
    h = s.health_state.c
    row = conn.execute(select(h.state, h.last_seq).where(h.run_pk == run_pk)).first()
    if row is None:
        return None, -1
    return orjson.loads(row.state), int(row.last_seq)


def run_engine(conn: Connection, run_pk: int, state: dict[str, Any] | None,
               overrides: Overrides | None = None) -> Engine:
    """The engine of run `run_pk`: its method, config settings and project thresholds
    (`overrides` instead, when given), from saved `state` (None: a fresh one). Raises
    LookupError when the run is not in the index."""
    row = _run_row(conn, run_pk)
    cfg = row.config or ""
    cfg_key = f"{len(cfg)}:{zlib.crc32(cfg.encode())}"
    cached = (state or {}).get("config")
    settings = (cached["settings"] if cached and cached.get("key") == cfg_key
                else settings_from_config(cfg))
    ov = overrides if overrides is not None else get_thresholds(conn, row.project)
    engine = Engine(row.method, settings, ov, state, finished=row.status == FINISHED)
    engine.config_cache = {"key": cfg_key, "settings": settings}
    return engine


# --- evaluation ----------------------------------------------------------------


def on_metrics(conn: Connection, run_pk: int,
               points: Mapping[str, PointColumns], stored: int | None = None) -> None:
    """The ingest hook: evaluate a run's newly stored points, by key (in seq order, as
    `runwatch.ingest.result.IngestResult.points` holds them).

    `stored`, when given, is how many of them were new to the index. Points are
    evaluated incrementally, after the highest seq evaluated so far; new points below
    it (a batch sent over HTTP after a later one) are evaluated by going over the
    whole run again, so no stored point escapes the rules.
    """
    state, last_seq = _load_state(conn, run_pk)
    cols: dict[str, PointColumns] = {}
    top = last_seq
    for key, col in points.items():
        if not col.seqs:
            continue
        if min(col.seqs) <= last_seq:
            # some were evaluated already (a batch sent twice): ingest is idempotent,
            # and so is health
            keep = [i for i, q in enumerate(col.seqs) if q > last_seq]
            if not keep:
                continue
            col = PointColumns([col.seqs[i] for i in keep], [col.steps[i] for i in keep],
                               [col.ts[i] for i in keep], [col.values[i] for i in keep])
        top = max(top, max(col.seqs))
        cols[key] = col
    if stored and state is not None and stored > sum(len(c.seqs) for c in cols.values()):
        reevaluate(conn, run_pk)  # some new points lie at or below last_seq
    elif cols:
        _update(conn, run_pk, state, cols, top)


def _update(conn: Connection, run_pk: int, state: dict[str, Any] | None,
            batch: dict[str, Any], last_seq: int) -> None:
    engine = run_engine(conn, run_pk, state)
    if state is not None and engine.fresh:
        # Thresholds, config or rules changed since the state was saved: start over.
        reevaluate(conn, run_pk, engine=engine)
        return
    try:
        found = engine.feed(batch)
    except Exception:
        # Health must never stop ingest: the points are stored, the state is left as it
        # was, and `ensure_current` evaluates them on the next read.
        log.exception("health evaluation of run %s failed; findings will catch up later",
                      run_pk)
        return
    save(conn, run_pk, engine, found, last_seq)


def on_events(conn: Connection, run_pk: int) -> None:
    """The ingest hook for a run's new events, once its metrics of the same pass are stored:
    when the run has succeeded, judge the rules that wait for its end (`Engine.finish`).
    Cheap, and changes nothing, when the run is still running or was judged already."""
    state, last_seq = _load_state(conn, run_pk)
    if state is None:
        return  # no points evaluated yet: the first batch judges them, end and all
    engine = run_engine(conn, run_pk, state)
    if not engine.finished:
        return
    if engine.fresh:
        reevaluate(conn, run_pk, engine=engine)
        return
    try:
        found = engine.finish()
    except Exception:
        # as in `_update`: health never stops ingest; the next batch or re-evaluation
        # judges the end again
        log.exception("health evaluation of run %s's end failed", run_pk)
        return
    if found:
        save(conn, run_pk, engine, found, last_seq)


def reevaluate(conn: Connection, run_pk: int, engine: Engine | None = None) -> list[Finding]:
    """Evaluate all a run's stored points again, from a fresh engine state, and put what
    is found in place of its findings (`replace`)."""
    engine = engine or run_engine(conn, run_pk, None)
    cols, last_seq = stored_points(conn, run_pk, -1)
    found = engine.feed(cols)
    replace(conn, run_pk, engine, found, last_seq)
    return found


def replace(conn: Connection, run_pk: int, engine: Engine, found: list[Finding],
            last_seq: int) -> None:
    """Store `found`, a judgement of the run's whole log by `engine`, in place of its
    findings, in the caller's transaction: a reader sees the old set or the new one, never
    both. A finding found again (the same rule on the same metric from the same step)
    keeps its id and opened time, so a run judged again (other thresholds, a new rule
    catalogue) does not change the findings a user or a link already points at."""
    f = s.findings.c
    kept: dict[tuple[str, Any, Any], list[int]] = {}
    for row in conn.execute(select(f.id, f.rule_id, f.first_step, f.evidence)
                            .where(f.run_pk == run_pk).order_by(f.id)):
        metric = orjson.loads(row.evidence).get("metric") if row.evidence else None
        kept.setdefault((row.rule_id, metric, row.first_step), []).append(int(row.id))
    for item in found:
        ids = kept.get((item.rule_id, item.evidence.get("metric"), item.first_step))
        if ids:
            item.id = ids.pop(0)
            if item.record is not None:
                item.record["id"] = item.id
    gone = [i for ids in kept.values() for i in ids]
    save(conn, run_pk, engine, found, last_seq, recount=not gone)
    # deleted after the new ones are inserted: SQLite gives a new row the highest id
    # plus one, so no new finding takes the id of one that has gone
    for at in range(0, len(gone), 500):  # bound parameters a statement: SQLite's limit
        conn.execute(delete(s.findings).where(f.id.in_(gone[at:at + 500])))
    if gone:
        count_open(conn, run_pk)


def ensure_current(conn: Connection, run_pk: int) -> None:
    """Evaluate whatever stored points the engine has not seen yet (for a run indexed
    without the hook), or the whole run after its thresholds or the rule catalogue changed.
    Cheap when nothing is new."""
    state, last_seq = _load_state(conn, run_pk)
    newest = newest_seq(conn, metric_keys(conn, run_pk).values())
    engine = run_engine(conn, run_pk, state)
    if state is None or engine.fresh:
        if newest is not None or state is not None:
            reevaluate(conn, run_pk, engine=engine)
        return
    if newest is None or newest <= last_seq:
        return
    cols, top = stored_points(conn, run_pk, last_seq)
    save(conn, run_pk, engine, engine.feed(cols), top)


def stored_points(conn: Connection, run_pk: int, after_seq: int
                   ) -> tuple[dict[str, PointColumns], int]:
    """A run's points after `after_seq`, by key, and the highest seq among them."""
    cols: dict[str, PointColumns] = {}
    last_seq = after_seq
    for name, kid in metric_keys(conn, run_pk).items():
        rows = read_points(conn, kid, after_seq)
        if not rows:
            continue
        seqs, steps, tss, values = map(list, zip(*rows, strict=True))
        cols[name] = PointColumns(seqs, steps, tss, values)
        last_seq = max(last_seq, seqs[-1])
    return cols, last_seq


def save(conn: Connection, run_pk: int, engine: Engine, found: list[Finding],
         last_seq: int, now: float | None = None, recount: bool = False) -> None:
    """Write changed findings (ids go back into the engine state), then the state, and
    when a finding changed (or `recount`: the caller deleted some), the run's open
    findings by severity as listed (`count_open`)."""
    now = time.time() if now is None else now
    f = s.findings
    for item in found:
        values = {
            "severity": item.severity, "status": item.status, "first_step": item.first_step,
            "last_step": item.last_step, "evidence": orjson.dumps(item.evidence).decode(),
            "message": item.message, "advice": item.advice, "updated_ts": now,
        }
        if item.id is None:
            res = conn.execute(insert(f).values(run_pk=run_pk, rule_id=item.rule_id,
                                                opened_ts=now, **values))
            pk = res.inserted_primary_key
            assert pk is not None
            item.id = int(pk[0])
            if item.record is not None:
                item.record["id"] = item.id
        else:
            conn.execute(update(f).where(f.c.id == item.id).values(**values))
    state = engine.state()
    state["config"] = engine.config_cache
    blob = orjson.dumps({"catalogue": CATALOGUE_ID, **state}).decode()
    h = s.health_state
    done = conn.execute(update(h).where(h.c.run_pk == run_pk)
                        .values(state=blob, last_seq=last_seq)).rowcount
    if not done:
        conn.execute(insert(h).values(run_pk=run_pk, state=blob, last_seq=last_seq))
    if found or recount or not done:
        # Counted after the row is written: another process writing this run's findings
        # holds the row until it commits, so the count (a later statement) sees them too.
        count_open(conn, run_pk)


def count_open(conn: Connection, run_pk: int) -> None:
    """Store a run's open findings by severity, as `health_for_run` lists them (one per
    incident), in its health_state row, where `open_by_severity` sums them."""
    f = s.findings.c
    rows = conn.execute(select(f.rule_id, f.severity, f.status, f.first_step, f.last_step)
                        .where(f.run_pk == run_pk)).mappings()
    counts = listed_open(rows)
    h = s.health_state
    conn.execute(update(h).where(h.c.run_pk == run_pk).values(
        {column: counts.get(severity, 0) for severity, column in OPEN_COUNTS.items()}))


# --- listing ---------------------------------------------------------------------


def health_for_run(conn: Connection, run_pk: int, now: float | None = None) -> list[dict[str, Any]]:
    """A run's findings, worst first: open before resolved, then by severity and step.

    Each is in the shape of `finding_json`. A running run that has gone silent also
    gets a live `run.stalled` finding (id None, not stored).
    """
    f = s.findings.c
    rows = conn.execute(select(f.id, f.rule_id, f.severity, f.status, f.first_step, f.last_step,
                               f.evidence, f.message, f.advice, f.opened_ts, f.updated_ts)
                        .where(f.run_pk == run_pk)).all()
    out: list[dict[str, Any]] = []
    for r in rows:
        evidence = orjson.loads(r.evidence) if r.evidence else {}
        rule = BY_ID.get(r.rule_id)
        out.append(finding_json({
            "id": r.id, "rule_id": r.rule_id, "title": rule.title if rule else r.rule_id,
            "severity": r.severity, "status": r.status, "metric": evidence.get("metric"),
            "first_step": r.first_step, "last_step": r.last_step, "evidence": evidence,
            "message": r.message, "advice": r.advice,
        }, r.opened_ts, r.updated_ts))
    stall = live_stall(conn, run_pk, time.time() if now is None else now)
    if stall is not None:
        out.append(finding_json(stall.to_dict()))
    return listed(out)


def listed(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings (each in the shape of `finding_json`) as every listing shows them, stored or
    a what-if's: merged into incidents (`incidents`, `same_signal`), worst first."""
    out = same_signal(incidents(found))
    out.sort(key=sort_key)
    return out


def open_by_severity(conn: Connection) -> dict[str, int]:
    """Open findings by severity, over every run, as `health_for_run` lists them (one per
    incident): the count /metrics reports, one sum over the runs' counts that `save` keeps
    (`count_open`), so a scrape reads a row a run whatever the findings' history. A live
    stall is not stored, so not counted."""
    sums = conn.execute(select(*(func.coalesce(func.sum(column), 0)
                                 for column in OPEN_COUNTS.values()))).one()
    return {severity: int(n) for severity, n in zip(OPEN_COUNTS, sums, strict=True) if n}


def recount_open(conn: Connection) -> None:
    """Count again the open findings of every run that has one, as listed now, into its
    health_state row (for a migration, after a change to how a listing merges findings:
    `OPEN_COUNTS`). Written with plain tables, so it runs at any schema revision that has
    the counts (0012 on)."""
    findings = sa.table("findings", *(sa.column(name) for name in (
        "run_pk", "rule_id", "severity", "status", "first_step", "last_step")))
    state = sa.table("health_state", sa.column("run_pk"),
                     *(sa.column(f"open_{severity}") for severity in SEVERITIES))
    f, h = findings.c, state.c
    runs = conn.execute(sa.select(h.run_pk).where(h.run_pk.in_(
        sa.select(f.run_pk).where(f.status == "open")))).scalars().all()
    for run_pk in runs:  # one run's findings at a time, however many the index holds
        counts = listed_open(conn.execute(
            sa.select(f.rule_id, f.severity, f.status, f.first_step, f.last_step)
            .where(f.run_pk == run_pk)).mappings())
        conn.execute(sa.update(state).where(h.run_pk == run_pk).values(
            {f"open_{severity}": counts.get(severity, 0) for severity in SEVERITIES}))


def listed_open(found: Iterable[Mapping[Any, Any]]) -> Counter[str]:
    """The open findings among one run's `found` (rule_id, severity, status, first_step,
    last_step each), by severity, once merged into incidents as a listing merges them."""
    items = [dict(item) for item in found]
    return Counter(item["severity"] for item in same_signal(incidents(items, _tally), _tally)
                   if item["status"] == "open")


# Rules whose findings mark one event at one step; such findings that start at the same
# step are one incident (a NaN step where the loss also jumped, a spike in loss and
# gradient norm together).
EVENT_DETECTORS = frozenset({"spike", "jump", "above_max", "isolated", "nonfinite"})
# How a group of findings becomes the one listed: (group, merged by signal) -> finding.
Merge = Callable[[list[dict[str, Any]], bool], dict[str, Any]]


def incidents(found: list[dict[str, Any]], merge: Merge | None = None
              ) -> list[dict[str, Any]]:
    """Findings of event rules that start at the same step, merged into one: an open one
    before a resolved one, then the most severe, leads (its id, rule and title), the
    messages follow one another, `metrics` lists every metric, it is open while any is and
    as severe as the worst, and `evidence.incident` keeps each merged finding's rule id,
    id, severity, status, metric and message.

    `merge` makes the merged finding of a group (default `_merged`, the listing's)."""
    merge = merge or _merged
    groups: dict[int, list[dict[str, Any]]] = {}
    out: list[dict[str, Any]] = []
    for item in found:
        rule = BY_ID.get(item["rule_id"])
        if rule is None or rule.detector not in EVENT_DETECTORS or item["first_step"] is None:
            out.append(item)
        else:
            groups.setdefault(int(item["first_step"]), []).append(item)
    out += [merge(group, False) for group in groups.values()]
    return out


def same_signal(found: list[dict[str, Any]], merge: Merge | None = None
                ) -> list[dict[str, Any]]:
    """Findings of rules that judge one signal at different speeds (`Rule.signal`) whose
    steps overlap, merged into one as `incidents` merges events: the fast info finding,
    the trend's warning and the slow rule's warning about one entropy read as one. So are
    the findings of one rule on one metric through several variants (grpo.reward_hacking
    judges val/accuracy against accuracy and against reward_mean: one fall of the
    validation, two findings with the same steps)."""
    merge = merge or _merged
    groups: dict[str, list[dict[str, Any]]] = {}
    out: list[dict[str, Any]] = []
    for item in found:
        rule = BY_ID.get(item["rule_id"])
        key = None if rule is None else rule.signal or (
            f"{rule.id}|{item.get('metric')}" if len(rule.variants) > 1 else None)
        if key is None or item["first_step"] is None:
            out.append(item)
        else:
            groups.setdefault(key, []).append(item)
    for group in groups.values():
        group.sort(key=lambda g: (g["first_step"], g["last_step"] or 0))
        run: list[dict[str, Any]] = []
        for item in group:
            if run and item["first_step"] > max(g["last_step"] or 0 for g in run):
                out.append(merge(run, True))
                run = []
            run.append(item)
        out.append(merge(run, True))
    return out


# A merged finding's lead among equals (open, as severe): the rule listed first in the
# catalogue, which puts the general rule before its faster or narrower relatives; but a
# loss's rise since its start leads the rules that read its latest points, so a loss
# that explodes reads "rose 731-fold over 118 steps", not "rose 96% over the last 16
# logged points".
LEADS_FIRST = ("loss.doubled", "loss.above_start")
CATALOGUE_ORDER = {rule.id: i for i, rule in enumerate(
    [BY_ID[r] for r in LEADS_FIRST] + [r for r in CATALOGUE if r.id not in LEADS_FIRST])}


def _message(group: list[dict[str, Any]], one_signal: bool) -> str:
    """The merged finding's message: each metric's own where an incident spans several
    metrics; where several rules judged one signal, the lead's alone (theirs would say the
    same thing again), naming the others, with the severity and state of one more severe
    than the lead (a warning that resolved under an open info: the group's severity)."""
    if not one_signal:
        return " ".join(g["message"] for g in group)
    lead = group[0]
    others = [_named(g, lead) for g in group[1:] if g["rule_id"] != lead["rule_id"]]
    others = list(dict.fromkeys(others))
    if not others:
        return str(group[0]["message"])
    return f"{group[0]['message']} Also: {'; '.join(others)}."


def _named(item: Mapping[str, Any], lead: Mapping[str, Any]) -> str:
    """A merged finding named after its lead's message: its rule's title, and where it is
    more severe than the lead, its severity and state."""
    rule = BY_ID.get(item["rule_id"])
    name = rule.title.lower() if rule else str(item["rule_id"])
    if SEVERITY_RANK.get(item["severity"], 0) <= SEVERITY_RANK.get(lead["severity"], 0):
        return name
    state = ("open" if item["status"] == "open"
             else f"resolved at step {item['last_step']}")
    return f"{name} ({item['severity']}, {state})"


def _led(group: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A group to merge, its lead first: open before resolved (the lead says what holds
    now), the most severe, the rule listed first in the catalogue."""
    return sorted(group, key=lambda g: (*sort_key(g)[:2], CATALOGUE_ORDER.get(g["rule_id"], 0)))


def _span(group: list[dict[str, Any]]) -> dict[str, Any]:
    """What a merged finding takes from its whole group: open while any is, as severe as
    the worst (a warning that resolved under an open info still makes the group a warning,
    which `--fail-on` and the open counts see), its steps."""
    return {"status": "open" if any(g["status"] == "open" for g in group) else "resolved",
            "severity": max((g["severity"] for g in group),
                            key=lambda sev: SEVERITY_RANK.get(sev, 0)),
            "first_step": min(g["first_step"] for g in group),
            "last_step": max(g["last_step"] or 0 for g in group)}


def _tally(group: list[dict[str, Any]], one_signal: bool) -> dict[str, Any]:
    """The merged finding as far as counting it needs: its lead's rule, and `_span`'s
    fields, its severity among them (what `_merged` gives them, without the text)."""
    return {**_led(group)[0], **_span(group)}


def _merged(group: list[dict[str, Any]], one_signal: bool = False) -> dict[str, Any]:
    if len(group) == 1:
        return group[0]
    group = _led(group)
    lead = group[0]
    return {
        **lead,
        **_span(group),
        "message": _message(group, one_signal),
        "metrics": list(dict.fromkeys(m for g in group for m in g["metrics"])),
        "evidence": {**lead["evidence"], "incident": [
            {k: g[k] for k in ("rule_id", "id", "severity", "status", "metric", "message")}
            for g in group]},
        "updated_ts": max(g["updated_ts"] or 0 for g in group) or None,
    }


def finding_json(item: Mapping[str, Any], opened_ts: float | None = None,
                 updated_ts: float | None = None) -> dict[str, Any]:
    """A finding as the API, the CLI and the web app show it: `Finding.to_dict()`'s fields,
    `metrics` (its metric first, then the others of its incident, then the others its rule
    reads: the charts it shades) and when it was opened and last updated (Unix seconds;
    None when not stored)."""
    rule = BY_ID.get(item["rule_id"])
    metric = item.get("metric")
    listed = (item.get("evidence") or {}).get("metrics") or []
    metrics = list(dict.fromkeys(
        ([metric] if metric else []) + [m for m in listed if isinstance(m, str)]
        + [m for m in (rule.metrics if rule else ()) if m != "*"]))
    return {**item, "metrics": metrics, "opened_ts": opened_ts, "updated_ts": updated_ts}


def sort_key(item: Mapping[str, Any]) -> tuple[int, int, int]:
    return (0 if item["status"] == "open" else 1, -SEVERITY_RANK.get(item["severity"], 0),
            item.get("first_step") or 0)


def live_stall(conn: Connection, run_pk: int, now: float) -> Finding | None:
    """The `run.stalled` finding of a running run that has logged nothing for too long."""
    row = _run_row(conn, run_pk)
    if row.status not in ACTIVE_PHASES:
        return None
    state, _ = _load_state(conn, run_pk)
    if state is None:
        return None
    engine = run_engine(conn, run_pk, state)
    found = engine.check_stall(now, running=True)
    return found[0] if found else None
