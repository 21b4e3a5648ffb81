"""The options and the run lookup that the `runs` commands share; light to import, so a
command that takes them loads no other command's libraries."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from runwatch.cli.output import Output, fail

if TYPE_CHECKING:
    from sqlalchemy import Connection, Row

DirOpt = Annotated[Path | None, typer.Option("--dir", help="Folder of runs (default: "
                                             "$RUNWATCH_DIR or ./runs).", show_default=False)]
# The runs folder of a command that takes it as its argument DIR (index, ui, worker,
# resources); None: $RUNWATCH_DIR or ./runs, as cli.context.runs_dir says
DirArg = Annotated[Path | None, typer.Argument(help="Folder of runs (default: $RUNWATCH_DIR "
                                               "or ./runs).", show_default=False)]
DbOpt = Annotated[str | None, typer.Option("--db", help="Index database URL or SQLite path "
                                           "(default: DIR/.runwatch/index.db).")]
OutOpt = Annotated[Output, typer.Option("-o", "--output", help="table, wide or json.")]
JqOpt = Annotated[str | None, typer.Option("--jq", help="Filter the JSON output with a jq "
                                           "expression.")]
RawOpt = Annotated[bool, typer.Option("-r", "--raw-output", help="With --jq: write strings "
                                      "raw, not as JSON (as jq -r does).")]
ServerOpt = Annotated[str | None, typer.Option(
    "--server", help="Read a team server's runs (its base URL) instead of a local index "
    "(default: RUNWATCH_SERVER, unless --dir or --db is given).", show_default=False)]
TokenOpt = Annotated[str | None, typer.Option(
    "--token", help="With --server: a token with read on the run's project (default: "
    "RUNWATCH_TOKEN).", show_default=False)]
WriteTokenOpt = Annotated[str | None, typer.Option(
    "--token", help="With --server: a token with write on the run's project (default: "
    "RUNWATCH_TOKEN).", show_default=False)]
RunArg = Annotated[str, typer.Argument(help="Run id, or a unique prefix of an id or name; "
                                      "PROJECT/NAME where two projects use a name.")]


def resolve_or_exit(conn: Connection, ref: str) -> Row[Any]:
    """The run `ref` names, or exit 2 saying why not (with the candidates)."""
    from runwatch.store import queries as q

    try:
        return q.resolve_run(conn, ref)
    except q.RunNotFound as exc:
        hints = ["candidates:"] + [f"  {c}" for c in exc.candidates] if exc.candidates else []
        found = q.unindexed_folder(conn, ref)
        if found is not None and Path(found[0]).is_dir():  # still there, and not read
            hints = [f"the folder {found[0]} is not indexed: {found[1]}", *hints]
        raise fail(str(exc), hints) from exc
