"""`runwatch index DIR`: index what is new in a folder of runs."""

from __future__ import annotations

from runwatch.cli.context import open_context, runs_dir
from runwatch.cli.options import DbOpt, DirArg
from runwatch.cli.output import line
from runwatch.store import queries as q


def index_cmd(directory: DirArg = None, db: DbOpt = None) -> None:
    """Index what is new in a folder of runs, and forget the runs whose folder is gone (safe
    to repeat: it adds only what is new)."""
    # resolved here, so that a default folder that is not one is refused like a given one
    directory = runs_dir(directory)
    ctx = open_context(directory, db, refresh=False, dir_argument=True)
    report = ctx.refresh()
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
