"""Phase durations of a run, derived from its lifecycle events (never stored twice)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from runwatch.rundir.format import TERMINAL_PHASES


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


def duration_s(events: Sequence[dict[str, Any]], now: float | None = None) -> float | None:
    """Wall-clock seconds from the first event to the terminal one (or `now`)."""
    if not events:
        return None
    now = time.time() if now is None else now
    last = events[-1]
    end = last["ts"] if last["phase"] in TERMINAL_PHASES else now
    return max(0.0, end - events[0]["ts"])
