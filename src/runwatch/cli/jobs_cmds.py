"""`runwatch runs cancel|retry RUN` and `runwatch resources`: job control from the CLI.

Cancel and retry are runwatch.jobs.control's, as the API's are; a move the run cannot
make is refused with the lifecycle's sentence (what is possible instead) and exit 2, as
every refusal of the CLI. `resources` lists the workers as GET /api/workers does
(runwatch.analysis.workers) and drains one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from sqlalchemy import Engine

from runwatch.analysis.views import run_summary
from runwatch.analysis.workers import worker_entry, workers_view
from runwatch.cli.context import Context, open_context
from runwatch.cli.options import (
    DbOpt,
    DirArg,
    DirOpt,
    JqOpt,
    OutOpt,
    RawOpt,
    RunArg,
    ServerOpt,
    TokenOpt,
    WriteTokenOpt,
    resolve_or_exit,
)
from runwatch.cli.output import (
    Output,
    emit,
    fail,
    fmt_duration,
    fmt_money,
    line,
    print_table,
    runwatch_command,
)
from runwatch.cli.remote import remote_for
from runwatch.jobs import control
from runwatch.jobs.cost import ProfileError, Profiles, read_profiles
from runwatch.jobs.lifecycle import TransitionError
from runwatch.rundir.format import RunDirError
from runwatch.store import jobs as store_jobs
from runwatch.store.db import writing

Action = Callable[[Engine, Any, Path | None], control.Outcome]
# `resources` takes its runs folder as its argument DIR, not as --dir
ResourcesServerOpt = Annotated[str | None, typer.Option(
    "--server", help="Read a team server's workers (its base URL) instead of a local index "
    "(default: RUNWATCH_SERVER, unless DIR or --db is given).", show_default=False)]


def cancel_cmd(run: RunArg, directory: DirOpt = None, db: DbOpt = None,
               output: OutOpt = Output.table, jq: JqOpt = None, raw: RawOpt = False,
               server: ServerOpt = None, token: WriteTokenOpt = None) -> None:
    """Cancel a run: a QUEUED job ends CANCELLED at once; a PREPARING or RUNNING one is
    CANCEL_REQUESTED and ends CANCELLED when its process has stopped (the answer says
    what stops it: its worker, or, when that worker is lost, which worker will)."""
    _act("cancel", control.cancel, run, directory, db, output, jq, raw, server, token)


def retry_cmd(run: RunArg, directory: DirOpt = None, db: DbOpt = None,
              output: OutOpt = Output.table, jq: JqOpt = None, raw: RawOpt = False,
              server: ServerOpt = None, token: WriteTokenOpt = None,
              resume: Annotated[bool, typer.Option(
                  "--resume", help="Continue from the run's last training checkpoint, "
                  "keeping its metrics and checkpoints up to it, instead of training again "
                  "from step 0.")] = False) -> None:
    """Retry an ended job: its next attempt is QUEUED (the earlier attempts stay on
    record, and in its cost) and trains again from step 0, its earlier attempt's metrics
    and checkpoints moved out of view; with --resume it continues from the run's last
    training checkpoint instead (a recipe with resume=true; a command with
    RUNWATCH_RESUME_STEP set), keeping the run's record up to that step."""
    def action(engine: Engine, row: Any, folder: Path | None) -> control.Outcome:
        return control.retry(engine, row, folder, resume=resume,
                             command=lambda *words: runwatch_command(*words, db=db))

    _act("retry", action, run, directory, db, output, jq, raw, server, token,
         {"resume": True} if resume else None)


def _act(verb: str, action: Action, run: str, directory: Path | None, db: str | None,
         output: Output, jq: str | None, raw: bool, server: str | None, token: str | None,
         body: dict[str, Any] | None = None) -> None:
    remote = remote_for(server, token, directory, db)
    if remote is not None:  # the server's job control does it (POST /api/runs/RUN/VERB)
        _show_action(remote.act(run, verb, body), output, jq, raw,
                     ["runs", "wait", "--exit-status"],
                     ["--server", remote.url])
        return
    ctx = open_context(directory, db)
    with ctx.engine.connect() as conn:
        row = resolve_or_exit(conn, run)
    try:
        outcome = action(ctx.engine, row, ctx.directory)
    except TransitionError as exc:
        raise fail(f"cannot {verb} run {row.name}: {exc}") from None
    except (RunDirError, OSError) as exc:  # its folder stayed locked, or is gone
        raise fail(f"cannot {verb} run {row.name} now: {exc}") from None
    except LookupError:
        raise fail(f"run {row.name} is no longer in the index, so there is nothing to "
                   f"{verb}") from None
    with ctx.engine.connect() as conn:
        row = resolve_or_exit(conn, row.run_id)
    where = ["--dir", str(ctx.directory)] + (["--db", db] if db else [])
    _show_action({"status": outcome.phase, "next": outcome.next, "run": run_summary(row)},
                 output, jq, raw, ["runs", "wait", "--exit-status"], where)


def _show_action(data: dict[str, Any], output: Output, jq: str | None, raw: bool,
          follow: list[str], where: list[str]) -> None:
    """What a cancel or retry did: the run's new phase, what happens next (runwatch.jobs.
    control.Outcome; absent from an older server's answer) and its list fields; `follow`
    and `where` make the command that follows it."""
    phase, run, then = data["status"], data["run"], data.get("next")

    def table(wide: bool) -> None:
        line(run["name"], ": ", phase, f" ({then})" if then else "")
        if phase != "CANCELLED":
            line("follow it: ", runwatch_command(*follow[:2], run["name"], *follow[2:],
                                                 *where))

    emit(data, output, jq, table, raw)


def resources_cmd(
    directory: DirArg = None,
    db: DbOpt = None, output: OutOpt = Output.table, jq: JqOpt = None, raw: RawOpt = False,
    drain: Annotated[str | None, typer.Option(
        "--drain", metavar="WORKER", help="Stop a worker (its id, or a unique prefix): it "
        "finishes the jobs it runs, claims no more, then exits.")] = None,
    server: ResourcesServerOpt = None, token: TokenOpt = None,
) -> None:
    """The workers: devices used of total, profile, hourly rate, jobs running, estimated
    spend so far (devices × rate × hours up), last heartbeat; and the queue's depth."""
    remote = remote_for(server, token, directory, db, dir_argument=True)
    if remote is not None:  # the server's view (GET /api/workers), its drain
        data = remote.workers()
        if drain is not None:
            worker = _one_worker([w["id"] for w in data["workers"]], drain)
            _show_drain(remote.drain(worker), output, jq, raw)
            return
        problem, start = None, runwatch_command("worker", "RUNS_DIR")
    else:
        ctx = open_context(directory, db, refresh=False, dir_argument=True)
        profiles, problem = _profiles(ctx)
        if drain is not None:
            _drain(ctx, drain, profiles, output, jq, raw)
            return
        with ctx.engine.connect() as conn:
            data = workers_view(conn, profiles, time.time())
        start = runwatch_command("worker", str(ctx.directory), db=db)

    def table(wide: bool) -> None:
        cols = ["WORKER", "STATUS", "DEVICES", "JOBS", "SPEND", "RATE", "PROFILE", "HOST",
                "SEEN"]
        rows = [[w["id"], "unavailable" if w.get("unavailable") else w["status"],
                 f"{w['devices_used']}/{w['devices']}", _jobs(w["jobs"]),
                 fmt_money(w["spend"]), fmt_money(w["hourly_rate"]),
                 w["device_profile"], w["host"],
                 f"{fmt_duration(w['heartbeat_age_s'])} ago"]
                # the active ones first, the past (stopped) ones below them
                for w in sorted(data["workers"], key=lambda w: w["status"] == "stopped")]
        # at 80 columns the least needed columns go first; ids and numbers stay whole
        print_table(cols, rows, wide=wide, drop=["SEEN", "HOST", "PROFILE", "RATE"])
        if not data["workers"]:
            line("no worker has run on this index; start one: ", start)
        for worker in data["workers"]:
            if worker.get("unavailable"):  # absent from an older server's answer
                line(f"{worker['id']} starts no job now: ", worker["unavailable"])
        for worker in data["workers"]:
            for job in worker["jobs"]:
                if job.get("waits_for"):  # absent from an older server's answer
                    line(f"{job['name']}: ", job["waits_for"])
        line(f"{data['queue_depth']} job(s) wait in the queue; RATE is per device-hour, the "
             "profile's when the worker started (a job is charged the profile's rate when it "
             "starts), SPEND the estimate so far (devices × rate × hours up), SEEN the last "
             "heartbeat")
        if problem:
            line("rates and spend are unknown: ", problem)

    emit(data, output, jq, table, raw)


def _profiles(ctx: Context) -> tuple[Profiles | None, str | None]:
    """The folder's device profiles, or None and why (the workers are listed anyway)."""
    try:
        return read_profiles(ctx.directory), None
    except ProfileError as exc:
        return None, str(exc)


def _jobs(jobs: list[dict[str, Any]]) -> str:
    return ", ".join(f"{j['name']} ({j['status']})" for j in jobs) or "-"


def _drain(ctx: Context, ref: str, profiles: Profiles | None, output: Output,
           jq: str | None, raw: bool) -> None:
    with writing(ctx.engine) as conn:
        rows = store_jobs.list_workers(conn)
        worker = _one_worker([w["id"] for w in rows], ref)
        row = next(w for w in rows if w["id"] == worker)
        if row["stopped_at"] is not None:
            raise fail(f"worker {row['id']} has already stopped; there is nothing to drain")
        store_jobs.set_draining(conn, row["id"], True)
        row["draining"] = True
    _show_drain(worker_entry(row, profiles, time.time()), output, jq, raw)


def _one_worker(ids: list[str], ref: str) -> str:
    """The worker id `ref` names, whole or as a unique start; exit 2 with the ids if none
    or several."""
    found = [i for i in ids if i == ref] or [i for i in ids if i.startswith(ref)]
    if len(found) != 1:
        what = f"{len(found)} workers have" if found else "no worker has"
        raise fail(f"{what} the id {ref!r}", ["workers: " + ", ".join(found or ids)] if ids
                   else ["no worker has run on this index"])
    return found[0]


def _show_drain(entry: dict[str, Any], output: Output, jq: str | None, raw: bool) -> None:
    def table(wide: bool) -> None:
        line(f"worker {entry['id']} drains: it finishes its {len(entry['jobs'])} running "
             "job(s), claims no more, then exits")

    emit({"worker": entry}, output, jq, table, raw)
