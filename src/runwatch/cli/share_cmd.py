"""`runwatch runs share RUN`: a signed, expiring, read-only link to one run's page."""

from __future__ import annotations

import hmac
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from runwatch.cli.context import open_context, runs_dir
from runwatch.cli.options import DbOpt, DirOpt, JqOpt, RawOpt, resolve_or_exit
from runwatch.cli.output import Output, emit, fail, line, runwatch_command

DEFAULT_SERVER = "http://127.0.0.1:8765"


def share_cmd(
    run: Annotated[str | None, typer.Argument(
        help="Run id, or a unique prefix of an id or name.", show_default=False)] = None,
    expires: Annotated[str, typer.Option(
        "--expires", help="How long the link works: 30m, 12h, 7d, 2w (at most 366d).")] = "7d",
    server: Annotated[str, typer.Option(
        "--server", help="The server's address as the link's reader reaches it.")
    ] = DEFAULT_SERVER,
    revoke: Annotated[str | None, typer.Option(
        "--revoke", help="Stop a link from working: give the link or its share id.",
        show_default=False)] = None,
    directory: DirOpt = None, db: DbOpt = None,
    output: Annotated[Output, typer.Option("-o", "--output", help="table or json.")
                      ] = Output.table,
    jq: JqOpt = None, raw: RawOpt = False,
) -> None:
    """Print a link that shows one run's page, read-only, without the server's token.

    The link is signed with a key kept in the runs folder (.runwatch/share.key), so it
    works on a server (`runwatch ui` or `runwatch server --runs-dir`) of that folder with a
    token; whoever holds it reads that run's page until it expires or is revoked, and
    nothing else."""
    # imported here: the server's modules would slow every other command's start
    from runwatch.server import share

    if revoke is not None:
        if run is not None:
            raise fail("give either a RUN to share or --revoke LINK_OR_ID, not both")
        _revoke(runs_dir(directory), revoke, output, jq, raw)
        return
    if run is None:
        raise fail("give the RUN to share (or --revoke LINK_OR_ID)")
    try:
        seconds = share.parse_duration(expires)
    except ValueError as exc:
        raise fail(str(exc)) from exc
    if "://" not in server:
        raise fail(f"--server {server!r} is not an address: give it as http://HOST:PORT")
    ctx = open_context(directory, db, read_only=True)
    with ctx.engine.connect() as conn:
        row = resolve_or_exit(conn, run)
    try:
        sh, credential = share.new_share(ctx.directory, str(row.run_id), seconds)
    except (OSError, share.ShareError) as exc:
        raise fail(f"cannot make a share link in {ctx.directory}: {exc}") from exc
    link = f"{server.rstrip('/')}/share/{credential}"
    until = datetime.fromtimestamp(sh.expires, UTC).strftime("%Y-%m-%d %H:%M UTC")

    def table(wide: bool) -> None:
        line(link)
        line(f"read-only link to run {row.name} ({sh.run_id}); works until {until} "
             f"(in {_days(sh.expires)}); share id {sh.share_id}")
        # the revoke reads the folder's key and list of shares, not the index: no --db
        line("revoke it with: ", runwatch_command("runs", "share", "--revoke", sh.share_id,
                                                  folder=directory))

    emit({"ok": True, "link": link, "id": sh.share_id, "run_id": sh.run_id, "name": row.name,
          "expires": sh.expires}, output, jq, table, raw)


def _days(expires: int) -> str:
    left = expires - time.time()
    return f"{left / 86400:.1f} days" if left >= 86400 else f"{left / 3600:.1f} hours"


def _revoke(directory: Path, link_or_id: str, output: Output, jq: str | None,
            raw: bool) -> None:
    """Revoke a link, or a share id, that this runs folder issued. A link must carry the
    folder key's signature; an id must be on the folder's list of issued shares, or, where
    that list is not complete (links made before runwatch kept it), it is revoked with a
    line saying it could not be confirmed. An id revoked already is not written again."""
    from runwatch.server import share

    credential = link_or_id.strip().rstrip("/").rsplit(share.LANDING, 1)[-1]
    try:
        share_id = share.share_id_of(link_or_id)
        key = share.secret(directory)
        if share_id in share.revoked_ids(directory):
            emit({"ok": True, "revoked": share_id, "already_revoked": True}, output, jq,
                 lambda wide: line(f"share {share_id} was revoked already: its link is "
                                   "refused"), raw)
            return
        issued, complete = share.issued(directory)
        if "." in credential:  # a link: its signature says whether this folder issued it
            if key is None or not hmac.compare_digest(
                    share.sign(key, share.parse(credential)), credential):
                raise fail(f"this link was not issued from {directory}: it does not carry the "
                           "signature of its share key, so no server of the folder opens "
                           "it; nothing was revoked",
                           ["give the runs folder that issued it: --dir DIR"])
        elif share_id not in issued and (complete or key is None):
            raise fail(f"no share link with id {share_id!r} was issued from {directory}; "
                       "nothing was revoked",
                       ["`runwatch runs share RUN` prints each link's id; the link itself "
                        "(--revoke LINK) works too", "give the runs folder that issued it: "
                        "--dir DIR"])
        share.revoke(directory, share_id)
    except share.ShareError as exc:
        raise fail(str(exc)) from exc
    except OSError as exc:
        raise fail(f"cannot write {directory / share.REVOKED_FILE}: {exc}") from exc
    unconfirmed = "." not in credential and share_id not in issued

    def table(wide: bool) -> None:
        line(f"revoked share {share_id}: its link is refused from the next request on")
        if unconfirmed:
            line(f"{directory} has links made before runwatch listed the shares it issues, "
                 "so it cannot confirm that it issued this id: a mistyped id revokes "
                 "nothing (revoke by the link to be sure)")

    emit({"ok": True, "revoked": share_id, "already_revoked": False}, output, jq, table, raw)
