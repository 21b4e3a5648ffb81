"""Whether a run's process is gone, as a server that indexes a runs folder says it.

A process writes its end just before it dies, so a row read before its death can lack an
end that is already on disk: judged on the row alone (runrows.process_gone), a run that
SUCCEEDED reads as one whose process died without ending until the next pass reads its
end. The server's indexer notes, as each pass begins, which unfinished runs' processes are
dead; once that pass has read their folders, those still unfinished are gone. A reader
takes the judge (`Settle.judge`) before it reads the rows it judges, so the rows are at
least as new as the pass the judge stands on.

A pass that could not read a folder (IndexReport.unread) has not read its end either, so
its run is left unjudged; but a folder no pass can read (a damaged manifest) would leave
its dead run unjudged for ever, and `runs wait --server` waiting on it to its timeout.
After `UNREAD_PASSES` passes in a row that found its process dead and could not read its
folder, the run is judged on its row: nothing the server can read will end it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, select

from runwatch.rundir.format import TERMINAL_PHASES
from runwatch.store import schema as s
from runwatch.store.runrows import process_gone

Gone = Callable[[Any], bool]  # whether a runs row's process is gone


def by_row() -> Gone:
    """The judge of a server that indexes no folder (runs come over HTTP): the row alone,
    which names a process on this host only when its sender runs here."""
    return process_gone


class Settle:
    UNREAD_PASSES = 10  # passes in a row that could not read a dead run's folder

    def __init__(self) -> None:
        # (run id, manifest) of the runs found dead as the last finished pass began: the
        # manifest names the process, so a run resumed by another one is judged afresh
        self.dead: frozenset[tuple[str, str]] = frozenset()
        self.passes = 0  # finished passes
        # the dead runs whose folder the passes could not read, and how many passes in a row
        self.unread: dict[tuple[str, str], int] = {}

    def clear(self) -> None:
        """The index was made again: no run is judged gone until a pass over the new one
        has read its folder."""
        self.dead = frozenset()
        self.passes = 0
        self.unread = {}

    def look(self, engine: Engine) -> dict[tuple[str, str], str]:
        """The unfinished runs whose process is dead now, with their folder's name: to
        take as a pass begins, and hand to `passed` once it has ended."""
        r = s.runs.c
        with engine.connect() as conn:
            rows = conn.execute(select(r.run_id, r.status, r.attempt, r.manifest, r.dir)
                                .where(r.status.notin_(sorted(TERMINAL_PHASES)))).all()
        return {(row.run_id, row.manifest): os.path.basename(row.dir or "") for row in rows
                if process_gone(row)}

    def passed(self, dead: dict[tuple[str, str], str], unread: set[str]) -> None:
        """Note a finished pass, the runs `look` found dead as it began, and the folders
        (by name) the pass could not read, whose runs it leaves unjudged until as many
        passes in a row as `UNREAD_PASSES` could not read them."""
        self.unread = {key: self.unread.get(key, 0) + 1 for key, folder in dead.items()
                       if folder in unread}
        self.dead = frozenset(key for key, folder in dead.items()
                              if self.unread.get(key, self.UNREAD_PASSES) >= self.UNREAD_PASSES)
        self.passes += 1

    def judge(self) -> Gone:
        """Whether a run has not ended and its process, dead as the last finished pass
        began, left no end for that pass to read: for rows read after this call."""
        dead = self.dead
        return lambda run: (run.run_id, run.manifest) in dead and process_gone(run)
