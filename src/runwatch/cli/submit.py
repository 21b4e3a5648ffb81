"""`runwatch submit`: queue a built-in recipe or any command as a job, a QUEUED run.

`runwatch submit recipes NAME key=value …` checks the recipe's name and settings as
`runwatch recipes NAME` would, before anything is made; `runwatch submit -- CMD ARGS…`
queues any command (its `runwatch.init()` attaches to the run). A worker on the same
index starts the job: `runwatch ui` runs one, `runwatch worker` is one on its own.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from runwatch.analysis.views import run_summary
from runwatch.cli.context import open_context, runs_dir
from runwatch.cli.options import DbOpt, DirOpt, OutOpt, ServerOpt, WriteTokenOpt
from runwatch.cli.output import Output, console, dumps, fail, line, runwatch_command
from runwatch.cli.remote import Remote, remote_for
from runwatch.jobs.control import nobody_starts, who_starts
from runwatch.jobs.cost import ProfileError, read_profiles
from runwatch.jobs.settings import SettingsError, check_recipe_settings
from runwatch.jobs.spec import (
    MAX_ATTEMPTS,
    MAX_DEVICES,
    JobSpec,
    JobSpecError,
    command_spec,
    recipe_spec,
)
from runwatch.jobs.submit import SubmitError, submit
from runwatch.recipes.config import TrainConfig
from runwatch.recipes.wandb_bridge import WandbSetupError, check_wandb
from runwatch.rundir import format as fmt
from runwatch.store import queries as q

RECIPE_WORD = "recipes"  # `runwatch submit recipes NAME …`, as `runwatch recipes NAME …`

Args = Annotated[list[str], typer.Argument(
    help="`recipes NAME key=value …` for a built-in recipe, or `-- CMD ARGS …` for any "
         "command (after --, its own options are not read as submit's).",
    show_default=False, metavar="recipes NAME key=value… | -- CMD ARGS…")]


def _instead(directory: Path | None, db: str | None) -> dict[str, str]:
    """What to do instead of giving a job-owned setting (jobs.settings.JOB_OWNED), each
    command with the --dir and --db this one was given, so that it runs as printed."""
    resume = runwatch_command("runs", "retry", "RUN", "--resume", folder=directory, db=db)
    return {"name": "pass --name", "project": "pass --project", "runs_dir": "pass --dir",
            "resume": f"a job makes a new run; to continue an ended job's run from its last "
                      f"checkpoint, resume it with {resume}"}


def submit_cmd(
    args: Args,
    directory: DirOpt = None, db: DbOpt = None, output: OutOpt = Output.table,
    name: Annotated[str | None, typer.Option(help="The run's name (default: the recipe, or "
                                             "'job', then the time).")] = None,
    project: Annotated[str | None, typer.Option(
        help="The run's project (default: `default`; on a team server, a project token's "
             "own).")] = None,
    devices: Annotated[int, typer.Option(min=1, max=MAX_DEVICES, help="Devices the job "
                                         "holds while it runs.")] = 1,
    device_profile: Annotated[str | None, typer.Option(
        help="The kind of worker it runs on (default: the profiles' default).")] = None,
    priority: Annotated[int, typer.Option(help="Higher runs first.")] = 0,
    max_attempts: Annotated[int, typer.Option(
        min=1, max=MAX_ATTEMPTS, help="Attempts before it fails for good (a failure "
        "that is not a refusal of its input is queued again).")] = 1,
    startup_timeout: Annotated[float | None, typer.Option(
        min=0.001, help="Seconds a PREPARING attempt may report nothing before it fails "
        "(default: the worker's).")] = None,
    cwd: Annotated[str | None, typer.Option(
        "--cwd", help="The folder the job starts in (default: this one). On a team server "
        "(--server), a command job's folder on the server's host (a relative path is from "
        "the server's working folder, where its recipe jobs start).")] = None,
    server: ServerOpt = None, token: WriteTokenOpt = None,
) -> None:
    """Queue a job: its run is QUEUED at once, and a worker starts it when devices are free.

    Examples: `runwatch submit recipes sft max_steps=100`; `runwatch submit --devices 2
    -- python train.py --lr 1e-4`. With --server (or RUNWATCH_SERVER, unless --dir or --db
    is given) the job is queued on that team server, whose workers start it there.
    """
    remote = remote_for(server, token, directory, db)
    if remote is not None:
        _submit_remote(remote, args, output, cwd, name=name, project=project,
                       devices=devices, device_profile=device_profile, priority=priority,
                       max_attempts=max_attempts, startup_timeout_s=startup_timeout)
        return
    project = project or "default"
    folder = runs_dir(directory)
    try:
        profiles = read_profiles(folder)
        profile = profiles.for_job(device_profile, devices)
    except ProfileError as exc:
        raise fail(str(exc)) from None
    fields: dict[str, Any] = {"devices": devices, "device_profile": profile.name,
                              "priority": priority, "max_attempts": max_attempts,
                              "startup_timeout_s": startup_timeout}
    spec, cfg = _spec(args, fields, _instead(directory, db), _local_cwd(cwd))
    warnings = (_warnings(args, cfg) if cfg is not None
                else _command_warnings(spec.argv, Path(spec.cwd), directory, db))
    for warning in warnings:
        console(stderr=True).print(f"warning: {warning}", markup=False, highlight=False)
    for what, value in (("run name", name), ("project name", project)):
        try:
            if value is not None:
                fmt.validate_name(value, what)
        except fmt.RunDirError as exc:
            raise fail(str(exc)) from None
    folder.mkdir(parents=True, exist_ok=True)
    ctx = open_context(folder, db, refresh=False)
    try:
        made = submit(ctx.engine, folder, spec, name, project)
    except SubmitError as exc:
        raise fail(str(exc)) from None
    with ctx.engine.connect() as conn:
        row = q.resolve_run(conn, made.run_id)
        summary = run_summary(row)
        now = time.time()
        # the words `runs get` shows as Waits while no worker would start it, its
        # commands with the --db given
        def command(*words: str) -> str:
            return runwatch_command(*words, db=db)

        waits = nobody_starts(conn, profile.name, now, row.dir, devices, command)
        starts = waits or who_starts(conn, profile.name, now, row.dir, devices, command)
    if output is Output.json:
        typer.echo(dumps({"status": row.status, "next": starts, "warnings": warnings,
                          "run": summary}))
        return
    _next_steps(made.name, made.run_id, folder, db, profile.name,
                profile.name == profiles.default, starts, waits is None, devices)


def _local_cwd(given: str | None) -> Path:
    """The folder a job queued here starts in: --cwd's, which must be a folder here (a
    worker of this runs folder starts it on this machine), or this one."""
    if given is None:
        return Path.cwd()
    path = Path(given).expanduser().resolve()
    if not path.is_dir():
        raise fail(f"--cwd {given} is no folder here, so a worker could not start the job in "
                   "it", ["give a folder that exists, or leave --cwd out to start it in this "
                          "one"])
    return path


def _spec(args: list[str], fields: dict[str, Any], instead: dict[str, str], cwd: Path
          ) -> tuple[JobSpec, TrainConfig | None]:
    """The job of `args`: a built-in recipe with its checked settings, or a command (no
    settings), started in `cwd`; `instead` says what to do instead of a job-owned
    setting."""
    try:
        if args[0] != RECIPE_WORD:
            return command_spec(args, cwd=cwd, **fields), None
        if len(args) < 2:
            raise fail(f"`runwatch submit {RECIPE_WORD}` needs the recipe's name",
                       [f"e.g. runwatch submit {RECIPE_WORD} sft max_steps=100"])
        spec = recipe_spec(args[1], args[2:], cwd=cwd, **fields)  # checks the recipe's name
        cfg = check_recipe_settings(args[1], args[2:], instead,
                                    f"runwatch recipes {args[1]} --help lists its settings")
        return spec, cfg
    except (JobSpecError, SettingsError) as exc:
        raise fail(str(exc)) from None


def _warnings(args: list[str], cfg: TrainConfig | None) -> list[str]:
    """What would stop the recipe at its start on this machine but may not on the worker
    that runs it: W&B logging with no W&B set up here (the GRPO recipe logs to W&B by
    default). The job is queued all the same; a worker that cannot start W&B refuses it
    at once, before any model or data is loaded."""
    if cfg is None:
        return []
    try:
        check_wandb(cfg.wandb_project, load=False)  # looked for: importing it takes seconds
    except WandbSetupError as exc:
        given = any(a.partition("=")[0].strip() == "wandb_project" for a in args[2:])
        whence = "" if given else \
            f" (the {args[1]} recipe's default wandb_project is {cfg.wandb_project!r})"
        return [f"the job logs to W&B{whence}, which cannot start here: {exc}. A worker "
                "without W&B set up refuses the job when it starts"]
    return []


def _submit_remote(remote: Remote, args: list[str], output: Output, cwd: str | None,
                   **fields: Any) -> None:
    """Queue the job on a team server (POST /api/jobs), which checks it as a local submit
    does; a command runs in `cwd` on the server's host, by default in this folder's path
    (one that is no folder there is refused, saying so, and that --cwd names one)."""
    if not args:
        raise fail("submit needs a job", [f"e.g. runwatch submit {RECIPE_WORD} sft "
                                          "max_steps=100, or runwatch submit -- CMD ARGS"])
    body: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
    if args[0] == RECIPE_WORD:
        if len(args) < 2:
            raise fail(f"`runwatch submit {RECIPE_WORD}` needs the recipe's name",
                       [f"e.g. runwatch submit {RECIPE_WORD} sft max_steps=100"])
        settings: dict[str, str] = {}
        for arg in args[2:]:
            key, eq, value = arg.partition("=")
            if not eq or not key.strip():
                raise fail(f"recipe setting {arg!r} is not key=value",
                           [f"runwatch recipes {args[1]} --help lists its settings"])
            settings[key.strip()] = value
        if cwd is not None:
            raise fail("a recipe job on a team server starts in the server's working folder: "
                       "leave --cwd out (it is for a command job)")
        body.update(kind="recipe", recipe=args[1], settings=settings)
    else:
        body.update(kind="command", argv=args, cwd=cwd or str(Path.cwd()))
    answer = remote.request("POST", "/api/jobs", body=body)
    run = answer["run"]
    if output is Output.json:
        typer.echo(dumps({"status": answer["status"], "next": answer.get("next"),
                          "warnings": [], "run": run}))
        return
    ref = f"{run['project']}/{run['name']}" if run.get("project") else run["name"]
    line(f"queued {run['name']} (run {run['run_id']}) on {remote.url}: {answer['status']}")
    line("next:")
    for cmd in (("runs", "get", ref), ("runs", "wait", ref, "--exit-status")):
        line("  ", runwatch_command(*cmd, "--server", remote.url))
    if answer.get("next"):
        line(str(answer["next"]))


def _command_warnings(argv: list[str], cwd: Path, directory: Path | None, db: str | None
                      ) -> list[str]:
    """What would stop a command job at its start on this machine: a program not on PATH,
    or a path to no executable file (relative to the job's folder `cwd`). A worker
    elsewhere may have it, so the job is queued all the same. A submit it names has the
    --dir and --db this one was given."""
    program = argv[0]
    if os.sep not in program:
        if shutil.which(program) is None:
            return [f"{program!r} is not on this machine's PATH, so a worker here cannot "
                    "start the job (it would end could_not_start): give the program's path, "
                    "or check that the worker's PATH has it"]
        return []
    path = cwd / Path(program).expanduser()
    if not path.is_file():
        here = "this folder" if cwd == Path.cwd() else f"--cwd {cwd}"
        return [f"{program!r} is no file here, so a worker here cannot start the job (it "
                f"would end could_not_start): give the program's path from {here}, "
                "where the job starts, or an absolute one"]
    if not os.access(path, os.X_OK):
        # --dir and --db before `--`, after which every word is the command's
        where = (["--dir", str(directory)] if directory is not None else []) + \
            (["--db", db] if db else []) + (["--cwd", str(cwd)] if cwd != Path.cwd() else [])
        submit = runwatch_command("submit", *where, "--", "python", program)
        return [f"{program!r} is not executable, so a worker cannot start the job (it would "
                f"end could_not_start): chmod +x {shlex.quote(program)}, or run it through "
                f"its interpreter ({submit} …)"]
    return []


def _next_steps(name: str, run_id: str, folder: Path, db: str | None, profile: str,
                default_profile: bool, starts: str, started: bool, devices: int) -> None:
    """What was queued, who starts it (`starts`, jobs.control.who_starts: when no worker
    would, why, as `runs get` says it) and the commands that follow it, a worker that would
    start it among them (runnable as printed)."""
    line(f"queued {name} (run {run_id}): QUEUED")
    line("next:")
    for cmd in (("runs", "get", name), ("runs", "wait", name, "--exit-status")):
        line("  ", runwatch_command(*cmd, folder=folder, db=db))
    line(starts)
    if started:
        return
    offers = ("--devices", str(devices)) if devices > 1 else ()
    line("a worker that starts it:")
    if default_profile and not offers:
        line("  ", runwatch_command("ui", str(folder), db=db),
             "   (the web app, with one worker)")
        line("  ", runwatch_command("worker", str(folder), db=db))
    else:
        line("  ", runwatch_command("worker", str(folder), "--device-profile", profile,
                                    *offers, db=db))
