"""A job's spec: what to run, where, on what devices (the run folder's job.json).

`runwatch submit` writes job.json once, when it makes the run's folder; the run's own
process never writes it. The indexer copies its fields into the queue's `jobs` row
(runwatch.ingest.jobspec), where the workers find them. See docs/run-format.md.
"""

from __future__ import annotations

import math
import sys
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

import orjson

from runwatch.jobs.cost import CPU
from runwatch.rundir import format as fmt
from runwatch.rundir.atomic import write_atomic
from runwatch.rundir.jsonl import loads_line
from runwatch.rundir.safeio import read_capped

JOB_SCHEMA_VERSION = 1
KINDS = ("recipe", "command")
# The built-in recipes (`runwatch recipes NAME`); a recipe's name is also its method.
RECIPES = ("sft", "dpo", "grpo")
MAX_DEVICES = 1024
MAX_ATTEMPTS = 100
MAX_JOB_BYTES = 1024 * 1024  # a larger job.json is refused unread


class JobSpecError(ValueError):
    """A job spec (or job.json) is not valid; the message names the field and what to do."""


@dataclass(frozen=True)
class JobSpec:
    """The fields of job.json. `recipe` is set for kind "recipe" only."""

    kind: str
    argv: list[str]
    cwd: str
    recipe: str | None = None
    devices: int = 1
    device_profile: str = CPU.name
    priority: int = 0
    max_attempts: int = 1
    startup_timeout_s: float | None = None
    submitted_at: float = 0.0
    schema_version: int = JOB_SCHEMA_VERSION

    def as_dict(self) -> dict[str, Any]:
        """The spec as job.json holds it."""
        return asdict(self)


_DEFAULTS = {f.name: f.default for f in fields(JobSpec) if f.default is not MISSING}


def recipe_argv(recipe: str, settings: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The command that runs built-in recipe `recipe` with `key=value` settings."""
    return [sys.executable, "-m", "runwatch", "recipes", recipe, *settings]


def recipe_spec(recipe: str, settings: list[str] | tuple[str, ...] = (), *,
                cwd: str | Path, **fields: Any) -> JobSpec:
    """A validated spec that runs built-in recipe `recipe` (see JobSpec for `fields`)."""
    return validate({"kind": "recipe", "recipe": recipe, "argv": recipe_argv(recipe, settings),
                     "cwd": str(cwd), **fields})


def command_spec(argv: list[str] | tuple[str, ...], *, cwd: str | Path,
                 **fields: Any) -> JobSpec:
    """A validated spec that runs `argv`, any command (see JobSpec for `fields`)."""
    return validate({"kind": "command", "recipe": None, "argv": list(argv), "cwd": str(cwd),
                     **fields})


def _int(data: dict[str, Any], name: str, least: int, most: int) -> int:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise JobSpecError(f"{name} must be a whole number from {least} to {most}, "
                           f"not {value!r}")
    return value


def validate(data: Any) -> JobSpec:
    """The JobSpec of `data` (job.json's object; absent optional fields take their
    defaults), or raise JobSpecError saying which field is wrong and what it must be."""
    if not isinstance(data, dict):
        raise JobSpecError("a job spec must be a JSON object")
    names = [f.name for f in fields(JobSpec)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise JobSpecError(f"unknown job field {unknown[0]!r}; the fields are "
                           f"{', '.join(names)}")
    data = {**_DEFAULTS, **data}
    if data["schema_version"] != JOB_SCHEMA_VERSION:
        raise JobSpecError(f"job schema_version {data['schema_version']!r} is not "
                           f"{JOB_SCHEMA_VERSION}: upgrade runwatch to run this job")
    kind, recipe = data.get("kind"), data.get("recipe")
    if kind not in KINDS:
        raise JobSpecError(f"kind must be 'recipe' or 'command', not {kind!r}")
    if kind == "recipe" and recipe not in RECIPES:
        raise JobSpecError(f"recipe must be one of {', '.join(RECIPES)}, not {recipe!r}")
    if kind == "command" and recipe is not None:
        raise JobSpecError("a command job has no recipe: leave recipe out or use kind 'recipe'")
    argv = data.get("argv")
    if (not isinstance(argv, list) or not argv
            or not all(isinstance(a, str) for a in argv) or not argv[0]):
        raise JobSpecError("argv must be a non-empty list of strings: the command to run, "
                           "e.g. ['python', 'train.py']")
    cwd = data.get("cwd")
    if not isinstance(cwd, str) or not Path(cwd).is_absolute():
        raise JobSpecError(f"cwd must be an absolute folder path, not {cwd!r}")
    profile = data.get("device_profile")
    if not isinstance(profile, str) or not profile:
        raise JobSpecError(f"device_profile must be a profile's name, not {profile!r}")
    timeout = data.get("startup_timeout_s")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)
                                or not math.isfinite(timeout) or timeout <= 0):
        raise JobSpecError(f"startup_timeout_s must be a positive number of seconds or null, "
                           f"not {timeout!r}")
    submitted = data.get("submitted_at")
    if isinstance(submitted, bool) or not isinstance(submitted, int | float) or \
            not math.isfinite(submitted):
        raise JobSpecError(f"submitted_at must be a time in seconds, not {submitted!r}")
    return JobSpec(kind=kind, recipe=recipe, argv=list(argv), cwd=cwd,
                   devices=_int(data, "devices", 1, MAX_DEVICES), device_profile=profile,
                   priority=_int(data, "priority", -(2**31), 2**31 - 1),
                   max_attempts=_int(data, "max_attempts", 1, MAX_ATTEMPTS),
                   startup_timeout_s=None if timeout is None else float(timeout),
                   submitted_at=float(submitted))


def write_spec(run_dir: Path, spec: JobSpec) -> None:
    """Write `run_dir`/job.json (complete or not at all)."""
    write_atomic(run_dir / fmt.JOB, orjson.dumps(spec.as_dict(), option=orjson.OPT_INDENT_2))


def read_spec(run_dir: Path) -> JobSpec | None:
    """The spec in `run_dir`/job.json; None when the run has none (it was started by
    hand). Raises JobSpecError when the file is there but not a valid spec."""
    path = run_dir / fmt.JOB
    try:
        raw = read_capped(path, MAX_JOB_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JobSpecError(f"{path} cannot be read ({exc})") from None
    try:
        data = loads_line(raw)
    except ValueError as exc:
        raise JobSpecError(f"{path} is not JSON ({exc})") from None
    try:
        return validate(data)
    except JobSpecError as exc:
        raise JobSpecError(f"{path}: {exc}") from None
