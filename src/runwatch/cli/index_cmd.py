"""`runwatch index DIR`: index what is new in a folder of runs, and judge again with this
runwatch's health rules the runs an older runwatch's rules judged."""

from __future__ import annotations

from typing import Annotated

import typer
from sqlalchemy import Engine

from runwatch.cli.context import open_context, runs_dir
from runwatch.cli.options import DbOpt, DirArg
from runwatch.cli.output import fail, line
from runwatch.health.catchup import sweep
from runwatch.store import queries as q
from runwatch.store.db import IndexUnusable

ForgetGoneOpt = Annotated[bool, typer.Option(
    "--forget-gone", help="Forget every run whose folder is gone, also when many went at once "
    "or the folder is empty (a pass keeps those, in case a disk is not mounted).")]


def index_cmd(directory: DirArg = None, db: DbOpt = None,
              forget_gone: ForgetGoneOpt = False) -> None:
    """Index what is new in a folder of runs, forget the runs whose folder is gone, and judge
    again the runs an older runwatch's health rules judged (safe to repeat: it adds only
    what is new)."""
    # resolved here, so that a default folder that is not one is refused like a given one
    directory = runs_dir(directory)
    ctx = open_context(directory, db, refresh=False, dir_argument=True)
    report = ctx.refresh(forget_all_gone=forget_gone)
    line(f"indexed {report.runs} runs ({report.new_runs} new), {report.rows} new rows "
         f"from {directory}")
    for forgotten in report.forgotten:
        line(f"  note: {forgotten}")
    for p in report.problems[:50]:
        line(f"  warning: {p}")
    if len(report.problems) > 50:
        line(f"  … and {len(report.problems) - 50} more warnings")
    # A folder that cannot be read is warned about once, when the reason is new; it is
    # named at every pass after that too, with the reason, so it never drops out of sight.
    said = set(report.problems)
    with ctx.engine.connect() as conn:
        for name in sorted(report.unread):
            why = q.folder_problem(conn, str(directory / name))
            if why is not None and why not in said:
                line(f"  not indexed: {why}")
    judged = judge_again(ctx.engine)
    if judged:
        line(f"judged {judged} run{'s' if judged != 1 else ''} again with this runwatch's "
             "health rules (an older runwatch's rules had judged them)")


def judge_again(engine: Engine) -> int:
    """Judge again, on their stored points, the runs an older runwatch's health rules judged
    (after an upgrade: health/catchup.py), as `runwatch ui` does in the background; how
    many runs' findings were replaced, saying when it starts (a run takes as long as its
    points do to read). Finding none is one query over the runs' health states. An index
    that cannot be used exits 2 saying so in one line."""
    judged = 0
    try:
        for _run_pk, replaced in sweep(engine):
            if replaced and not judged:
                line("judging again with this runwatch's health rules the runs an older "
                     "runwatch's rules judged …")
            judged += replaced
    except IndexUnusable as exc:
        raise fail(str(exc)) from exc
    return judged
