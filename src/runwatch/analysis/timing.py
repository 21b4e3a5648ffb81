"""Time of a run: its duration, the time spent in each phase, and timestamps as text.

A run's **duration** (`duration_s` wherever runwatch shows one) is the wall-clock time
it has been training: from its start (the first RUNNING event) to its end (the terminal
event). While it is active it runs until now, except when its training process is gone,
where it stops at the run's last metric record (at its start if it logged none). The
spans in which no process of a run lived (killed, then resumed later: the manifest's
`dead_spans`) are no training time. A run that has not started has no duration, nor has
one whose start or end is a time no date can show (a hand-written run folder or an HTTP
client may send any number as a time).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from runwatch.rundir.format import TERMINAL_PHASES

# The times a calendar date can show, in every time zone: a day inside years 1 to 9999.
# A run folder written by hand or an HTTP client may hold any float as a time (1e15, a
# count of tokens, milliseconds); a reader shows such a time as unknown, never fails on it.
FIRST_DATED_TS = datetime(1, 1, 2, tzinfo=UTC).timestamp()
LAST_DATED_TS = datetime(9999, 12, 30, tzinfo=UTC).timestamp()


def dated(ts: float) -> bool:
    """Whether `ts` is a time a date can show (within years 1 to 9999; not NaN)."""
    return FIRST_DATED_TS <= ts <= LAST_DATED_TS


def utc_datetime(ts: float | None) -> datetime | None:
    """A Unix timestamp as an aware datetime in UTC; None for a time that is not `dated`
    (a dated one converts to any time zone without overflow)."""
    return None if ts is None or not dated(ts) else datetime.fromtimestamp(ts, UTC)


def iso(ts: float | None) -> str | None:
    """A Unix timestamp as ISO 8601 text in UTC ("2026-12-01T02:20:53.5Z"); None for None
    and for a time no date can show (unknown, see `utc_datetime`)."""
    when = utc_datetime(ts)
    return None if when is None else when.isoformat().replace("+00:00", "Z")


def local_clock(ts: float | None, pattern: str = "%H:%M:%S") -> str:
    """A Unix timestamp as local time in `pattern`; "?" for one no date can show."""
    when = utc_datetime(ts)
    return "?" if when is None else when.astimezone().strftime(pattern)


def run_duration_s(started_at: float | None, ended_at: float | None,
                   last_record_at: float | None, process_gone: bool,
                   now: float | None = None,
                   idle: Sequence[tuple[float, float]] = ()) -> float | None:
    """The run's duration in seconds (see the module docstring), less the spans of `idle`
    (`dead_spans`); None before it started, and None (unknown) where its start or end is
    a time no date can show."""
    if started_at is None or not dated(started_at):
        return None
    if ended_at is not None:
        end = ended_at
    elif process_gone:
        end = started_at if last_record_at is None else last_record_at
    else:
        end = time.time() if now is None else now
    if not dated(end):
        return None
    lived = end - started_at - sum(max(0.0, min(end, to) - max(started_at, since))
                                   for since, to in idle)
    return max(0.0, lived)


def dead_spans(spans: Any) -> list[tuple[float, float]]:
    """The [from, to] pairs of a manifest's `dead_spans` in which no process of the run
    lived (killed, then resumed later: runwatch.sdk records them on resume), in order;
    a pair that is not two times a date can show, from before to, is left out."""
    if not isinstance(spans, list):
        return []
    return [(float(span[0]), float(span[1])) for span in spans
            if isinstance(span, list) and len(span) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) and dated(v)
                    for v in span) and span[0] < span[1]]


def phase_millis(events: Sequence[dict[str, Any]], now: float | None = None,
                 idle: Sequence[tuple[float, float]] = ()) -> dict[str, int]:
    """Milliseconds spent in each phase; an unfinished last phase runs until `now`. A
    phase that starts or ends at a time no date can show is left out (unknown). The spans
    of `idle` (from, to) are no phase's time: no process of the run lived then (a run
    killed and resumed later: runwatch.jobs.cost.Resumed)."""
    out: dict[str, int] = {}
    now = time.time() if now is None else now
    for i, ev in enumerate(events):
        phase = ev["phase"]
        if phase in TERMINAL_PHASES:
            break
        start = ev["ts"]
        end = events[i + 1]["ts"] if i + 1 < len(events) else now
        if dated(start) and dated(end):  # else how long it lasted is unknown
            lived = end - start - sum(max(0.0, min(end, to) - max(start, since))
                                      for since, to in idle)
            out[phase] = out.get(phase, 0) + max(0, round(lived * 1000))
    return out
