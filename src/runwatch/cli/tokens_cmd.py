"""`runwatch tokens create|list|revoke` and `runwatch projects create|list`: a team
server's projects and API tokens, kept in its index (--db, or the runs folder's)."""

from __future__ import annotations

import getpass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from runwatch.cli.context import open_context
from runwatch.cli.output import (
    Output,
    console,
    emit,
    fail,
    line,
    print_table,
    runwatch_command,
)
from runwatch.cli.runs import DbOpt, DirOpt

if TYPE_CHECKING:
    from pathlib import Path

    from runwatch.store.tokens import TokenError

tokens_app = typer.Typer(help="API tokens of a team server: one project, one right each.",
                         no_args_is_help=True)
projects_app = typer.Typer(help="Projects of a team server.", no_args_is_help=True)

OutputOpt = Annotated[Output, typer.Option("-o", "--output", help="table or json.")]


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M")


def _refused(exc: TokenError, directory: Path | None, db: str | None) -> typer.Exit:
    """The error of a token or project command, the commands it names given the index
    this one was (its --dir, its --db), so that they run as printed."""
    return fail(exc.said(lambda *words: runwatch_command(*words, folder=directory, db=db)))


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


@tokens_app.command("create")
def create_cmd(
    project: Annotated[str, typer.Option("--project", "-p", help="The token's one project.")],
    name: Annotated[str, typer.Option("--name", help="Who or what uses it, e.g. ci-uploader.")],
    right: Annotated[str, typer.Option(
        "--right", help="read (see runs), write (also send runs, submit, cancel, retry) or "
                        "admin (also manage the project's tokens).")] = "read",
    directory: DirOpt = None, db: DbOpt = None, output: OutputOpt = Output.table,
) -> None:
    """Make a token; its secret is printed this once (only its sha256 is kept)."""
    from runwatch.store import tokens

    # read_only: the index must exist (a token needs a project in it), never made here
    ctx = open_context(directory, db, refresh=False, read_only=True)
    try:
        with ctx.engine.begin() as conn:
            made, secret = tokens.create(conn, project, right, name, _user())
    except tokens.TokenError as exc:
        raise _refused(exc, directory, db) from exc

    def table(wide: bool) -> None:
        # the secret alone on stdout, so that TOKEN=$(runwatch tokens create …) holds it
        # and nothing else; what to do with it on stderr
        line(secret)
        note = console(stderr=True)
        note.print(f"token {made.id} ({made.name}): {made.right} on project {made.project}. "
                   "Copy it now: it is not shown again.", markup=False, highlight=False)
        revoke = runwatch_command("tokens", "revoke", made.id, folder=directory, db=db)
        note.print("use it as RUNWATCH_TOKEN=… or 'Authorization: Bearer …'; revoke it with "
                   f"`{revoke}`", markup=False, highlight=False)

    emit({"ok": True, "token": made.json(), "secret": secret}, output, None, table)


@tokens_app.command("list")
def list_cmd(
    project: Annotated[str | None, typer.Option("--project", "-p", help="Only this project's."
                                                )] = None,
    directory: DirOpt = None, db: DbOpt = None, output: OutputOpt = Output.table,
) -> None:
    """Every token (never its secret): id, name, project, right, dates; revoked ones too."""
    from runwatch.store import tokens

    ctx = open_context(directory, db, refresh=False, read_only=True)
    with ctx.engine.connect() as conn:
        found = tokens.list_tokens(conn, frozenset({project}) if project else None)

    def table(wide: bool) -> None:
        print_table(["id", "name", "project", "right", "starts", "by", "created", "last used",
                     "revoked"],
                    [[t.id, t.name, t.project, t.right, t.hint + "…", t.created_by,
                      _when(t.created_at), _when(t.last_used_at), _when(t.revoked_at)]
                     for t in found], wide=wide)

    emit([t.json() for t in found], output, None, table)


@tokens_app.command("revoke")
def revoke_cmd(
    token_id: Annotated[str, typer.Argument(help="The token's id (from `tokens list`).")],
    directory: DirOpt = None, db: DbOpt = None, output: OutputOpt = Output.table,
) -> None:
    """Revoke a token: servers refuse it from their next request on."""
    from runwatch.store import tokens

    ctx = open_context(directory, db, refresh=False, read_only=True)
    try:
        with ctx.engine.begin() as conn:
            done = tokens.revoke(conn, token_id)
    except tokens.TokenError as exc:
        raise _refused(exc, directory, db) from exc
    emit({"ok": True, "token": done.json()}, output, None,
         lambda wide: line(f"token {done.id} ({done.name}, project {done.project}) is revoked"))


@projects_app.command("create")
def project_create_cmd(
    name: Annotated[str, typer.Argument(help="The project's name ([A-Za-z0-9._-]).")],
    directory: DirOpt = None, db: DbOpt = None, output: OutputOpt = Output.table,
) -> None:
    """Make a project, so that tokens can be made for it before its first run."""
    from runwatch.store import tokens

    ctx = open_context(directory, db, refresh=False)
    try:
        with ctx.engine.begin() as conn:
            made = tokens.create_project(conn, name, _user())
    except tokens.TokenError as exc:
        raise _refused(exc, directory, db) from exc
    said = "made" if made else "already exists"
    create = runwatch_command("tokens", "create", "--project", name, "--right", "write",
                              "--name", "WHO", folder=directory, db=db)
    emit({"ok": True, "name": name, "created": made}, output, None,
         lambda wide: line(f"project {name} {said}; make a token for it with `{create}`"))


@projects_app.command("list")
def project_list_cmd(directory: DirOpt = None, db: DbOpt = None,
                     output: OutputOpt = Output.table) -> None:
    """Every project (made, or named by runs) with its number of runs."""
    from runwatch.store import tokens

    ctx = open_context(directory, db, refresh=False, read_only=True)
    with ctx.engine.connect() as conn:
        found: list[dict[str, Any]] = [{"name": p, "runs": n}
                                       for p, n in tokens.project_names(conn).items()]

    def table(wide: bool) -> None:
        print_table(["project", "runs"], [[p["name"], p["runs"]] for p in found], wide=wide)

    emit(found, output, None, table)
