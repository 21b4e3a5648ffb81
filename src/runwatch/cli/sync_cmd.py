"""`runwatch sync DIR`: send offline runs to a server, incrementally (docs/team.md).

DIR is one run folder or a folder of runs. Each run sends only what it has not sent to
that server before (the offsets are kept in the run folder), so a run still being
written can be synced again and again, and what the server no longer holds (it is asked
first: a database restored from a backup); the sender of `runwatch.init(server=…)` is
the same code (runwatch.sdk.upload).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from runwatch.cli.output import fail, line
from runwatch.rundir import format as fmt

if TYPE_CHECKING:
    from runwatch.sdk.sendhttp import Client


def run_folders(directory: Path) -> list[Path]:
    """The run folders DIR names: itself when it holds a manifest, else its subfolders
    that do (hidden ones left out); empty when it holds no run."""
    if (directory / fmt.MANIFEST).is_file():
        return [directory]
    return sorted(p for p in directory.iterdir()
                  if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
                  and (p / fmt.MANIFEST).is_file())


def sync_cmd(
    directory: Annotated[Path, typer.Argument(
        help="A run folder, or a folder of runs.", show_default=False)],
    server: Annotated[str | None, typer.Option(
        "--server", envvar="RUNWATCH_SERVER",
        help="The server's base URL (default: RUNWATCH_SERVER).", show_default=False)] = None,
    token: Annotated[str | None, typer.Option(
        "--token", envvar="RUNWATCH_TOKEN",
        help="Bearer token with write on the runs' project (default: RUNWATCH_TOKEN).",
        show_default=False)] = None,
    retry_for: Annotated[float, typer.Option(
        "--retry-for", min=0,
        help="Seconds to keep trying while the server cannot be reached.")] = 30.0,
    follow: Annotated[bool, typer.Option(
        "--follow", help="Keep sending what the runs write (and new runs in DIR) until "
                         "every run has ended and is sent; Ctrl-C stops.")] = False,
    interval: Annotated[float, typer.Option(
        "--interval", min=0.05, help="With --follow: seconds between passes.")] = 2.0,
) -> None:
    """Send the runs in DIR to a runwatch server: only what it has not sent there before,
    so it can be run again while a run is still being written (or keep at it: --follow)."""
    # imported here: the sender's HTTP client would slow every other command's start
    from runwatch.sdk.sender import server_url
    from runwatch.sdk.sendhttp import Client, bearer_token

    if not directory.is_dir():
        raise fail(f"{directory} is not a folder", ["pass a run folder or a folder of runs"])
    try:
        url = server_url(server)
        token = bearer_token(token, "the token (--token, or RUNWATCH_TOKEN)")
    except ValueError as exc:
        raise fail(str(exc)) from None
    if url is None:
        raise fail("no server to send to", ["pass --server URL or set RUNWATCH_SERVER, for "
                                            "example --server http://127.0.0.1:8765"])
    if not run_folders(directory):
        raise fail(f"{directory} holds no run: a run folder has a manifest.json (written by "
                   "runwatch.init)", ["pass a run folder, or a folder whose subfolders are runs"])
    client = Client(url, token or None)  # --token's envvar reads RUNWATCH_TOKEN
    skipped = 0
    refused: set[str] = set()  # the runs the server refused (another project's, ...)
    held: set[str] = set()  # the runs it records from its own runs folder: nothing to send
    try:
        while True:
            runs = [r for r in run_folders(directory) if r.name not in refused | held]
            # looked at before the pass, so that the pass sends each ended run's last event
            ended = follow and all(_ended(run_dir) for run_dir in runs)
            skipped += _pass(runs, client, retry_for, quiet=follow, refused=refused,
                             held=held)
            if not follow or ended:
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        line("stopped; what is not sent yet stays in the run folders: run the same command "
             "again to send it")
    finally:
        client.close()
    if refused:
        raise fail(f"{len(refused)} run(s) were refused and not sent: "
                   f"{', '.join(sorted(refused))} (see the warnings above); the other runs "
                   "were sent", ["nothing was lost: run the same command again once this is "
                                 "fixed"], code=1)
    if skipped:
        raise fail(f"{skipped} record(s) were refused by the server and skipped (see the "
                   "warnings above); the rest was sent", code=1)


def _pass(runs: list[Path], client: Client, retry_for: float, quiet: bool,
          refused: set[str], held: set[str]) -> int:
    """Send what is new in each run; say what was sent (with `quiet`, only where something
    was); returns the records the server refused. A run the server refuses whole (a token
    without write on its project, its manifest) is warned about, noted in `refused` and
    passed over: the other runs are sent. One the server records from its own runs folder
    is said once and noted in `held`."""
    from runwatch.sdk.sendhttp import InFolder, Refused, RunRefused, Unreachable
    from runwatch.sdk.upload import sync_run

    skipped = 0
    for run_dir in runs:
        try:
            report = sync_run(run_dir, client, retry_for)
        except Unreachable as exc:
            if exc.status == 500:
                # the server answered, and failed on this run: the others may be sent
                line(f"{run_dir.name}: not sent: {exc}: the server failed on this run, and "
                     "its log says why")
                refused.add(run_dir.name)
                continue
            raise fail(f"{exc}; {run_dir.name} and the runs after it were not sent",
                       ["start the server or check --server; nothing was lost: run the "
                        "same command again and it goes on where it stopped"], code=1
                       ) from None
        except InFolder:
            line(f"{run_dir.name}: not sent: {client.server} records it from the runs folder "
                 "it indexes, so it holds it already")
            held.add(run_dir.name)
            continue
        except RunRefused as exc:
            line(f"{run_dir.name}: not sent: {exc}")
            refused.add(run_dir.name)
            continue
        except Refused as exc:
            raise fail(str(exc), ["nothing was lost: run the same command again once "
                                  "this is fixed"]) from None
        if quiet and not report.records and not report.files and not report.problems:
            continue
        sent = [f"{n} {name.removesuffix('.jsonl')}" for name, n in report.records.items()]
        if report.files:
            sent.append(f"{report.files} whole file{'s' if report.files != 1 else ''}")
        counts = ", ".join(sent) or "nothing new"
        line(f"{run_dir.name}: sent {counts} to {client.server}")
        for problem in report.problems[:20]:
            line(f"  warning: {problem}")
        skipped += report.skipped
    return skipped


def _ended(run_dir: Path) -> bool:
    """Whether the run's last event is a terminal phase (it writes nothing more)."""
    from runwatch.jobs.attempts import last_event

    last = last_event(run_dir)
    return last is not None and last.get("phase") in fmt.TERMINAL_PHASES
