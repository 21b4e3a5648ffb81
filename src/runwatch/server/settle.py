"""Whether a run's process is gone, as a server that indexes a runs folder says it.

A process writes its end just before it dies, so a row read before its death can lack an
end that is already on disk: judged on the row alone (runrows.process_gone), a run that
SUCCEEDED reads as one whose process died without ending until the next pass reads its
end. The server's indexer notes, as each pass begins, which unfinished runs' processes are
dead; once that pass has read their folders, those still unfinished are gone.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select

from runwatch.rundir.format import TERMINAL_PHASES
from runwatch.store import schema as s
from runwatch.store.runrows import process_gone


class Settle:
    def __init__(self) -> None:
        self.dead: frozenset[str] = frozenset()  # as the last finished pass began
        self.passes = 0  # finished passes

    def look(self, engine: Engine) -> frozenset[str]:
        """The run ids of the unfinished runs whose process is dead now: to take as a pass
        begins, and hand to `passed` once it has ended."""
        r = s.runs.c
        with engine.connect() as conn:
            rows = conn.execute(select(r.run_id, r.status, r.attempt, r.manifest)
                                .where(r.status.notin_(sorted(TERMINAL_PHASES)))).all()
        return frozenset(row.run_id for row in rows if process_gone(row))

    def passed(self, dead: frozenset[str]) -> None:
        """Note a finished pass, and the runs `look` found dead as it began."""
        self.dead = dead
        self.passes += 1

    def gone(self, run: Any) -> bool:
        """Whether `run` (a runs row) has not ended and its process, dead before the last
        finished pass began, left no end for that pass to read."""
        return run.run_id in self.dead and process_gone(run)
