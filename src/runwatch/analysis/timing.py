"""Time of a run: its duration, the time spent in each phase, and timestamps as text.

A run's **duration** (`duration_s` wherever runwatch shows one) is the wall-clock time
it has been training: from its start (the first RUNNING event) to its end (the terminal
event). While it is active it runs until now, except when its training process is gone,
where it stops at the run's last metric record (at its start if it logged none). A run
that has not started has no duration.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from runwatch.rundir.format import TERMINAL_PHASES


def iso(ts: float | None) -> str | None:
    """A Unix timestamp as ISO 8601 text in UTC ("2026-12-01T02:20:53.5Z"), None for None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def run_duration_s(started_at: float | None, ended_at: float | None,
                   last_record_at: float | None, process_gone: bool,
                   now: float | None = None) -> float | None:
    """The run's duration in seconds (see the module docstring); None before it started."""
    if started_at is None:
        return None
    if ended_at is not None:
        end = ended_at
    elif process_gone:
        end = started_at if last_record_at is None else last_record_at
    else:
        end = time.time() if now is None else now
    return max(0.0, end - started_at)


def phase_millis(events: Sequence[dict[str, Any]], now: float | None = None) -> dict[str, int]:
    """Milliseconds spent in each phase; an unfinished last phase runs until `now`."""
    out: dict[str, int] = {}
    now = time.time() if now is None else now
    for i, ev in enumerate(events):
        phase = ev["phase"]
        if phase in TERMINAL_PHASES:
            break
        end = events[i + 1]["ts"] if i + 1 < len(events) else now
        out[phase] = out.get(phase, 0) + max(0, round((end - ev["ts"]) * 1000))
    return out
