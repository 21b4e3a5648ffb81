"""The run detail: one run's state, results, cost, timing, attempts, job, tiles and
settings, as both `runwatch runs get -o json` and `GET /api/runs/{run}` send it (see
docs/api.md)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import yaml

from runwatch.analysis.results import SeriesValues, cost, results, scalars
from runwatch.analysis.views import actions, checkpoint_entry, run_summary, summary_line
from runwatch.jobs.cost import (
    Cost,
    DeviceProfile,
    LostEnd,
    ProfileError,
    Resumed,
    read_profiles,
    resumed_gaps,
    run_cost,
)
from runwatch.jobs.failures import CATALOGUE, Reason
from runwatch.rundir.configtext import ConfigError, load_config
from runwatch.rundir.format import DEAD_SPANS, TERMINAL_PHASES
from runwatch.store.detail import RunRecords, init_from
from runwatch.store.queries import process_here

# The job spec fields the detail shows (the jobs row's claim state stays in the index).
JOB_FIELDS = ("kind", "recipe", "argv", "cwd", "devices", "device_profile", "priority",
              "max_attempts", "startup_timeout_s", "submitted_at", "attempt", "worker_id",
              "cancel_requested_at")


def run_detail(rec: RunRecords, values: SeriesValues, now: float | None = None,
               runs_dir: Path | None = None, waits_for: str | None = None) -> dict[str, Any]:
    """Everything known about a run, as plain JSON-ready data.

    `values` gives a key's series values (the server passes its cache, the CLI reads
    the index). Spend uses the device profiles of `runs_dir` (see
    `runwatch.jobs.cost.read_profiles`; by default the folder that holds the run's).
    `waits_for`: why no worker will start its queued job, and how to start one
    (`runwatch.jobs.control.queued_waits`)."""
    now = time.time() if now is None else now
    run = rec.row
    manifest = _json(run.manifest) or {}
    config, config_problem = _config(run.config)
    summary = run_summary(run, now, rec.process_gone)
    tiles = scalars(rec.keys, values, config, run.observed_step)
    if runs_dir is None and run.dir:
        runs_dir = Path(run.dir).parent
    # a run whose process is gone stopped at its last record, not now
    until = run.updated_at if rec.process_gone and run.updated_at else now
    lost = unrecorded_end(run, rec.process_gone, rec.job is not None)
    spent, problem = _run_cost(rec.events, rec.job, runs_dir, until, None if lost is None
                               else LostEnd(until, lost.sentence, lost.id),
                               resumed_gaps(manifest.get(DEAD_SPANS), rec.job is not None))
    figures = spent.as_dict()
    origin = model_origin(rec)
    return {
        "run_id": run.run_id,
        "name": run.name,
        "run": summary,
        "summary": _summary(rec, origin),
        "model": origin,
        "state": {
            "project": run.project,
            "group": run.group_name,
            "tags": summary["tags"],
            "method": run.method,
            "base_model": run.base_model,
            "dataset": run.dataset,
            "trainer": run.trainer,
            "backend": run.backend,
            "phase": run.status,
            "stage": run.stage,
            # a stage that names its total and not yet a count has done none
            "progress": ({"done": run.progress_done or 0, "total": run.progress_total}
                         if run.progress_total is not None else None),
            "observed_step": run.observed_step,
            "saved_step": run.saved_step,
            "reason": run.reason,
            "process_gone": rec.process_gone,
            "created_at": run.created_at,
            "started_at": run.started_at,
            "ended_at": run.ended_at,
            "updated_at": run.updated_at,
        },
        "failure": _failure(run, rec.job is not None, lost),
        "results": results(rec.keys, tiles["best_train_loss"], rec.checkpoints),
        "cost": _with_pipeline(_made_times(
            _unknown_spend(cost(spent, rec.keys, values, summary["duration_s"]), problem),
            manifest.get("imported_times")), rec, runs_dir, now),
        "timing": figures["timing"],
        "attempts": figures["attempts"],
        "job": _job(rec.job, waits_for),
        "scalars": tiles,
        "actions": actions(run.status, rec.job is not None and run.dir is not None,
                           process_here(run)),
        "checkpoints": [checkpoint_entry(c) for c in rec.checkpoints],
        "metrics": [k.key for k in rec.keys],
        "manifest": manifest,
        "problems": rec.problems + ([config_problem] if config_problem else []),
        "dir": run.dir,
        "settings": {
            "config": config,
            "config_text": run.config,
            "engine_config": _json(run.engine_config),
        },
    }


def model_origin(rec: RunRecords) -> dict[str, Any]:
    """The model a run trains: for a run started from an earlier run's checkpoint
    (`init_from`), the base model at the start of that chain and the run it started from
    (`parent`, when the index holds it), rather than the bare `init_from:<path>`."""
    ref = init_from(rec.row.base_model)
    base = None if ref else rec.row.base_model
    for parent in rec.parents:
        if init_from(parent.base_model) is None:
            base = parent.base_model
            break
    first = rec.parents[0] if rec.parents else None
    return {"base_model": base, "init_from": ref,
            "parent": None if first is None else {"run_id": first.run_id, "name": first.name}}


def _summary(rec: RunRecords, origin: dict[str, Any]) -> str:
    """The summary line, naming a derived run's base model and parent run."""
    line = summary_line(rec.row)
    if origin["init_from"] is None or origin["parent"] is None:
        return line
    model = f"{origin['base_model'] or 'a model'} (from run {origin['parent']['name']})"
    return line.replace(f"Training {rec.row.base_model}", f"Training {model}", 1)


def unrecorded_end(run: Any, process_gone: bool, job: bool) -> Reason | None:
    """How a run started by hand ended when its process is gone (killed: SIGKILL, the
    kernel's OOM killer) and it recorded no end: it stopped before it finished
    (`stopped_early`). None for any other run: one that recorded its end, one whose
    process lives or cannot be seen, and a job, whose worker (or another worker's reaper)
    records how its attempt ended (docs/jobs.md). Nothing is written: the run's folder is
    its process's record, and this is every reader's verdict on it (the run detail, so
    `runs get`, the API and the web app, and `runs wait`)."""
    if not process_gone or job or run.status in TERMINAL_PHASES:
        return None
    return CATALOGUE["stopped_early"]


def _run_cost(events: list[dict[str, Any]], job_row: dict[str, Any] | None,
              runs_dir: Path | None, until: float, lost: LostEnd | None,
              resumed: tuple[Resumed, ...] = ()) -> tuple[Cost, str | None]:
    """A run's cost from its `events`, for the devices and profile its job asked for (one
    device of the default profile for a run started by hand, `job_row` None), and why its
    spend is unknown, if it is (the profile cannot be read, and an attempt that held
    devices recorded no rate); a run that ended without recording it (`lost`) ended at its
    last record; the spans of `resumed` (killed, then resumed later) held no devices."""
    job = job_row or {}
    devices = job.get("devices")
    devices = devices if isinstance(devices, int) and devices >= 1 else 1
    name = job.get("device_profile")
    try:
        profiles = read_profiles(runs_dir)
    except ProfileError as exc:
        problem = str(exc)
    else:
        if name is None or name in profiles.by_name:
            return run_cost(events, devices, profiles.get(name), until, lost=lost,
                            resumed=resumed), None
        problem = (f"the run's device profile {name!r} is not among the profiles "
                   f"({', '.join(sorted(profiles.by_name))}); add it to the profiles file")
    unknown = DeviceProfile(name or "unknown", devices, 0, 0, 0.0)
    spent = run_cost(events, devices, unknown, until, profile_known=False, lost=lost,
                     resumed=resumed)
    if spent.priced and any(a.hourly_rate is not None for a in spent.attempts):
        return spent, None  # every attempt that held devices recorded its rate
    return spent, problem


def _unknown_spend(figures: dict[str, Any], problem: str | None) -> dict[str, Any]:
    """The cost figures, with no rate or spend when the profile could not be read."""
    if problem is None:
        return {**figures, "problem": None}
    return {**figures, "hourly_rate": None, "spend": None,
            "problem": f"the spend is unknown: {problem}"}


def _with_pipeline(figures: dict[str, Any], rec: RunRecords, runs_dir: Path | None,
                   now: float) -> dict[str, Any]:
    """The cost figures with `pipeline`: for a run started from an earlier run's checkpoint
    (`init_from`, a run the index holds), each train stage of the chain, the first first
    and this run last, with its device time and spend, and their total (the spend null
    when a stage's is unknown; an estimate while a stage has not ended). None for a run
    that started from no indexed run."""
    if not rec.parents:
        return {**figures, "pipeline": None}
    stages = []
    for parent, (events, job) in reversed(list(zip(rec.parents, rec.parent_records,
                                                   strict=True))):
        folder = Path(parent.dir).parent if parent.dir else runs_dir
        spent, problem = _run_cost(events, job, folder, now, None, resumed_gaps(
            (_json(parent.manifest) or {}).get(DEAD_SPANS), job is not None))
        own = spent.as_dict()
        stages.append(_stage(parent, own["device_seconds"],
                             None if problem else own["spend"],
                             own["device_seconds_estimate"]))
    stages.append(_stage(rec.row, figures["device_seconds"], figures["spend"],
                         figures["device_seconds_estimate"]))
    spends = [st["spend"] for st in stages]
    return {**figures, "pipeline": {
        "stages": stages,
        "device_seconds": sum(st["device_seconds"] for st in stages),
        "spend": None if any(sp is None for sp in spends) else sum(spends),
        "estimate": any(st["estimate"] for st in stages)}}


def _stage(row: Any, device_seconds: float, spend: float | None, estimate: bool
           ) -> dict[str, Any]:
    return {"run_id": row.run_id, "name": row.name, "device_seconds": device_seconds,
            "spend": spend, "estimate": estimate}


def _made_times(figures: dict[str, Any], made: Any) -> dict[str, Any]:
    """The cost figures with `times`: what they rest on where no clock recorded the run's
    times (`runwatch import` of a log without one: the manifest's `imported_times`, which
    docs/run-format.md describes), None where a clock did. Rebuilt from the log's step
    times, the figures are an estimate; made up at one second a step, how long the run
    took is not known, so neither is its duration or spend."""
    if not isinstance(made, dict):
        return {**figures, "times": None}
    basis, key = made.get("basis"), made.get("key")
    steps, timed = made.get("steps"), made.get("timed_steps")
    if basis == "step_times":
        of = (f"all {steps} steps" if timed == steps
              else f"{timed} of {steps} steps, the others at their median")
        return {**figures, "device_seconds_estimate": True,
                "times": f"estimated from the log's step times ({key}, logged at {of})"}
    if basis == "elapsed":
        return {**figures, "times": f"from the log's time since the run started ({key})"}
    unknown = ("the imported log has no clock and no step times, so how long the run took "
               "is not known")
    return {**figures, "device_seconds_estimate": True, "duration_s": None, "spend": None,
            "problem": unknown, "times": f"made up, one second a step: {unknown}"}


def _failure(run: Any, job: bool, lost: Reason | None) -> dict[str, Any] | None:
    """Why a FAILED or CANCELLED run ended, or a run that ended without recording it
    (`lost`: unrecorded_end), and what to do about it (the failure catalogue's advice for
    its reason code, for a `job` or a run started by hand, which cannot be retried); None
    for any other run."""
    if lost is not None:
        return {"code": lost.id, "reason": lost.sentence, "what_to_do": lost.advice(job)}
    if run.status not in ("FAILED", "CANCELLED") or not (run.reason or run.reason_code):
        return None
    known = CATALOGUE.get(run.reason_code) if run.reason_code else None
    return {"code": run.reason_code, "reason": run.reason,
            "what_to_do": known.advice(job) if known else None}


def _job(job: dict[str, Any] | None, waits_for: str | None) -> dict[str, Any] | None:
    """The job a run was submitted as (None for a run started by hand)."""
    return None if job is None else {**{k: job.get(k) for k in JOB_FIELDS},
                                     "waits_for": waits_for}


def _json(text: str | None) -> Any:
    return orjson.loads(text) if text else None


def _config(text: str | None) -> tuple[Any, str | None]:
    """config.yaml parsed, or its text as it is where it is not YAML; with the problem of
    one that parses but that no reader can take (ConfigError: it expands too far)."""
    if not text:
        return None, None
    try:
        return load_config(text), None
    except ConfigError as exc:
        return text, f"{exc}; its text is shown as it is"
    except yaml.YAMLError:
        return text, None
