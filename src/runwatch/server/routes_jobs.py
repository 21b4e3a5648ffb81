"""Job routes: submit a job, the built-in recipes a job can run, and the workers.

`POST /api/jobs` starts processes on the server's machine (through the queue and its
workers), so it is a write like every other: the token when the server has one, and
same-origin JSON (server/origins.py; docs/security.md says what that stops).
"""

from __future__ import annotations

import dataclasses
import os
import time
import typing
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Connection, select

from runwatch.analysis.views import run_summary
from runwatch.analysis.workers import worker_entry, workers_view
from runwatch.cli.recipes import RECIPES
from runwatch.jobs.control import who_starts
from runwatch.jobs.cost import ProfileError, Profiles, read_profiles
from runwatch.jobs.settings import JOB_OWNED, SettingsError, check_recipe_settings
from runwatch.jobs.spec import (
    MAX_ATTEMPTS,
    MAX_DEVICES,
    JobSpec,
    JobSpecError,
    command_spec,
    recipe_spec,
)
from runwatch.jobs.submit import SubmitError, submit
from runwatch.rundir import format as fmt
from runwatch.server import scopes
from runwatch.server.errors import ApiError, not_found
from runwatch.server.jobpaths import foreign_path
from runwatch.server.schemas import (
    ActionAnswer,
    RecipeList,
    WorkerAnswer,
    WorkerList,
    documented,
)
from runwatch.server.state import ServerState, connection, state
from runwatch.store import jobs as store_jobs
from runwatch.store import schema as s
from runwatch.store.db import writing

router = APIRouter(tags=["jobs"])

_TYPES = {bool: "bool", int: "int", float: "float", str: "str"}


def _setting(f: dataclasses.Field[Any], hint: Any) -> dict[str, Any]:
    """One setting as GET /api/recipes lists it (`hint` is its type, maybe Optional)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    base = args[0] if args else hint
    return {"name": f.name, "type": _TYPES[base], "nullable": bool(args),
            "default": f.default, "help": f.metadata.get("help", "")}


def recipe_list() -> list[dict[str, Any]]:
    """The built-in recipes and the settings a job may give each (`runwatch recipes`)."""
    out = []
    for name, (cfg, _module, help_) in RECIPES.items():
        hints = typing.get_type_hints(cfg)
        settings = [_setting(f, hints[f.name]) for f in dataclasses.fields(cfg)
                    if f.name not in JOB_OWNED]
        out.append({"name": name, "method": name, "help": help_, "settings": settings})
    return out


def _profiles(st: ServerState) -> Profiles:
    try:
        return read_profiles(st.runs_dir)
    except ProfileError as exc:
        raise ApiError(409, f"{exc}; until it is fixed this server cannot price or place "
                            "jobs") from None


@router.get("/api/recipes", **documented(RecipeList, "the built-in recipes"))
def recipes(st: ServerState = Depends(state)) -> dict[str, Any]:
    """The built-in recipes with their settings (name, type, default, help), and the
    device profiles a job can ask for."""
    profiles = _profiles(st)
    return {"ok": True, "recipes": recipe_list(), "default_profile": profiles.default,
            "device_profiles": [
                {"name": p.name, "devices": p.devices, "hourly_rate": p.hourly_rate,
                 "device_memory_bytes": p.device_memory_bytes,
                 "host_memory_bytes": p.host_memory_bytes}
                for p in sorted(profiles.by_name.values(), key=lambda p: p.name)]}


def _maybe_profiles(st: ServerState) -> Profiles | None:
    try:
        return read_profiles(st.runs_dir)
    except ProfileError:
        return None  # the workers are listed; their rate and spend are unknown


@router.get("/api/workers", **documented(WorkerList, "the workers and the queue"))
def workers(request: Request, conn: Connection = Depends(connection),
            st: ServerState = Depends(state)) -> dict[str, Any]:
    """Every worker (newest first; stopped ones too) with its devices, profile, hourly
    rate, running jobs and estimated spend so far, and how many jobs wait in the queue."""
    view = workers_view(conn, _maybe_profiles(st), time.time())
    scopes.hide_jobs(request, conn, view)
    return {"ok": True, **view}


class Empty(BaseModel):
    """No fields: the action needs none."""

    model_config = ConfigDict(extra="forbid")


@router.post("/api/workers/{worker}/drain", **documented(WorkerAnswer, "the worker"))
def drain(request: Request, worker: str, _body: Empty | None = None,
          st: ServerState = Depends(state)) -> dict[str, Any]:
    """Stop a worker: it finishes the jobs it runs, claims no more, then exits."""
    scopes.require(request, None, "admin")
    with writing(st.engine) as conn:
        rows = {w["id"]: w for w in store_jobs.list_workers(conn)}
        row = rows.get(worker)
        if row is None:
            raise not_found(f"no worker has the id {worker!r}; list them with GET /api/workers")
        if row["stopped_at"] is not None:
            raise ApiError(409, f"worker {worker} has already stopped; there is nothing to "
                                "drain")
        store_jobs.set_draining(conn, worker, True)
        row["draining"] = True
    return {"ok": True, "worker": worker_entry(row, _maybe_profiles(st), time.time())}


Value = str | int | float | bool | None


class JobRequest(BaseModel):
    """A job to submit: a built-in recipe with its settings, or any command."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["recipe", "command"]
    recipe: str | None = Field(None, description="sft, dpo or grpo (kind recipe)")
    settings: dict[str, Value] = Field(default_factory=dict, max_length=200,
                                       description="the recipe's settings (kind recipe)")
    argv: list[str] | None = Field(None, min_length=1, max_length=1000,
                                   description="the command to run (kind command)")
    cwd: str | None = Field(None, min_length=1, max_length=4096,
                            description="the folder the command runs in (kind command): a "
                            "folder on the server's host, a relative one read from the "
                            "server's working folder, which is the default")
    name: str | None = Field(None, max_length=fmt.MAX_NAME_LENGTH,
                             description="the run's name; by default one is made")
    project: str | None = Field(None, max_length=fmt.MAX_NAME_LENGTH, description="the "
                                "run's project; by default the token's own (a project "
                                "token's), else `default`")
    devices: int = Field(1, ge=1, le=MAX_DEVICES)
    device_profile: str | None = Field(None, max_length=64, description="by default the "
                                       "profiles' default")
    priority: int = Field(0, ge=-(2**31), le=2**31 - 1, description="higher runs first")
    max_attempts: int = Field(1, ge=1, le=MAX_ATTEMPTS, description="attempts before the "
                              "run fails for good (a failure that is not a refusal is retried)")
    startup_timeout_s: float | None = Field(None, gt=0, description="a PREPARING attempt "
                                            "that reports nothing for this long fails")


def refused(message: str, field: str | None, status: int = 422) -> ApiError:
    """An error that names the body field at fault (the web's form shows it there)."""
    return ApiError(status, message, field=field) if field else ApiError(status, message)


def _text(value: Value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# What to do instead of a recipe setting the job owns (jobs.settings.JOB_OWNED).
INSTEAD = {"name": "set it in the job's name field", "project": "set it in the job's "
           "project field", "runs_dir": "a job's run folder is made by the server, so leave "
           "it out", "resume": "a job makes a new run; to continue an ended job's run from "
           "its last checkpoint, resume it with POST /api/runs/{run}/retry and the body "
           "{\"resume\": true}"}


def _argv(settings: dict[str, Value]) -> list[str]:
    return [f"{k}={_text(v)}" for k, v in settings.items()]


def _settings(recipe: str, settings: dict[str, Value]) -> list[str]:
    """The `key=value` arguments of `settings` for `recipe`, checked as its command line
    checks them; ApiError 422 naming the setting at fault otherwise."""
    argv = _argv(settings)
    try:
        check_recipe_settings(recipe, argv, INSTEAD, "GET /api/recipes lists its settings")
    except SettingsError as exc:
        raise refused(str(exc), exc.field) from None
    return argv


def working_folder(given: str | None) -> Path:
    """The folder a command job runs in: `given` (`~` expanded, a relative one read from
    the server's working folder, `..` taken out), else the server's working folder;
    ApiError 400 naming `cwd` when it is not a folder on this host."""
    if given is None:
        return Path.cwd()
    try:
        folder = Path(os.path.normpath(Path.cwd() / Path(given).expanduser()))
        exists, is_dir = folder.exists(), folder.is_dir()
    except (OSError, ValueError, RuntimeError):  # a NUL, an unknown ~user, a path too long
        exists = is_dir = False
        folder = Path(given)
    if not exists:
        raise refused(f"working folder {folder} does not exist on the server's host: give "
                      "a folder that does, or leave it out to run in the server's own",
                      "cwd", 400)
    if not is_dir:
        raise refused(f"working folder {folder} is not a folder: give the folder the "
                      "command runs in, or leave it out to run in the server's own",
                      "cwd", 400)
    return folder


def _spec(body: JobRequest, profile: str) -> JobSpec:
    fields: dict[str, Any] = {"devices": body.devices, "device_profile": profile,
                              "priority": body.priority, "max_attempts": body.max_attempts,
                              "startup_timeout_s": body.startup_timeout_s}
    if body.kind == "command":
        if body.recipe is not None or body.settings:
            raise refused("a command job has no recipe or settings: put them in argv, or "
                          "use kind 'recipe'", "recipe" if body.recipe else "settings")
        if not body.argv:
            raise refused("a command job needs argv, the command to run, e.g. "
                          "[\"python\", \"train.py\"]", "argv")
        return command_spec(body.argv, cwd=working_folder(body.cwd), **fields)
    if body.argv is not None:
        raise refused("a recipe job runs its recipe: leave argv out, or use kind 'command'",
                      "argv")
    # A recipe reads its relative path settings from its working folder: a project's
    # token, which may submit recipes, must not move that folder into another project's
    # runs, and an absolute path setting does all a folder would.
    if body.cwd is not None:
        raise refused("a recipe job runs in the server's working folder: leave cwd out, and "
                      "give its path settings (data_path, init_from, …) as absolute paths",
                      "cwd")
    cwd = Path.cwd()
    if body.recipe not in RECIPES:
        raise refused(f"recipe must be one of {', '.join(RECIPES)}, not {body.recipe!r}",
                      "recipe")
    return recipe_spec(body.recipe, _settings(body.recipe, body.settings), cwd=cwd,
                       **fields)


def _own_paths(request: Request, st: ServerState, body: JobRequest, cwd: Path) -> None:
    """403 naming the setting when a project token's recipe job gives a path setting
    outside its project's run folders (server/jobpaths.py); the refusal is the same whether
    the path exists or not, so it tells nothing of other projects' folders."""
    sc = scopes.scope_of(request)
    if body.kind != "recipe" or body.recipe is None or sc.projects is None:
        return
    with st.engine.connect() as conn:
        foreign = foreign_path(conn, body.recipe, _argv(body.settings), cwd, sc.projects)
    if foreign is not None:
        key, value = foreign
        owned = ", ".join(sorted(sc.projects))
        raise refused(f"{key} {value!r} is not inside a run folder of project {owned}, and "
                      f"{sc.who} may give a recipe only paths in its project's runs (a "
                      "run's `dir` as GET /api/runs/{run} shows it, or a file in it): leave "
                      f"{key} out, or submit the job with the server's token",
                      f"settings.{key}", 403)


def _own_project(request: Request) -> str:
    """The project of a job whose body names none: a project token's own (the one project
    it may submit to, so that it need not repeat it), else `default`."""
    sc = scopes.scope_of(request)
    return next(iter(sc.projects)) if sc.projects is not None and len(sc.projects) == 1 \
        else "default"


@router.post("/api/jobs", status_code=201,
             **documented(ActionAnswer, "the QUEUED run the job became", status=201))
def submit_job(request: Request, body: JobRequest, st: ServerState = Depends(state)
               ) -> dict[str, Any]:
    """Submit a job: its run is QUEUED at once, and a worker starts it when devices are
    free. Recipe settings are checked as `runwatch recipes` checks them (422 naming the
    setting); a taken name is 409. A command runs in its `cwd` (400 when that is not a
    folder here), by default the server's working folder, as a recipe always does."""
    project = body.project if body.project is not None else _own_project(request)
    # a command runs as the server's user, outside any project: only the server's token
    scopes.require(request, project if body.kind == "recipe" else None, "write")
    if st.runs_dir is None:
        raise ApiError(409, "this server has no runs folder to make the job's run in; "
                            "start it with one to submit jobs (runwatch server --runs-dir "
                            "DIR, or runwatch ui DIR)")
    profiles = _profiles(st)
    try:
        name = profiles.get(body.device_profile).name
    except ProfileError as exc:
        raise refused(str(exc), "device_profile") from None
    try:
        profile = profiles.for_job(name, body.devices)
    except ProfileError as exc:
        raise refused(str(exc), "devices") from None
    for what, value in (("name", body.name), ("project", project)):
        try:
            if value is not None:
                fmt.validate_name(value, f"{what if what == 'project' else 'run'} name")
        except fmt.RunDirError as exc:
            raise refused(str(exc), what) from None
    try:
        spec = _spec(body, profile.name)
        _own_paths(request, st, body, Path(spec.cwd))
        made = submit(st.engine, st.runs_dir, spec, body.name, project)
    except JobSpecError as exc:
        raise refused(str(exc), None) from None
    except SubmitError as exc:  # the name and project were checked: the name is taken
        raise refused(str(exc), exc.field, 409 if exc.field == "name" else 422) from None
    gone = st.judge()
    with st.engine.connect() as conn:
        row = conn.execute(select(s.runs).where(s.runs.c.pk == made.run_pk)).one()
        starts = who_starts(conn, profile.name, time.time(), row.dir, spec.devices)
    return {"ok": True, "status": row.status, "next": starts,
            "run": run_summary(row, gone=gone(row))}
