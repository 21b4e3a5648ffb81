"""What every recipe (SFT, DPO, GRPO) does around its loop: parse its settings, start
the run record, mirror to W&B, resume, report.

`recipe_main` is each recipe's command line; a setting it refuses, an adapter that would
adapt no layer of the model, and a W&B set-up that cannot work, stop the recipe before
any run folder is made (under a job, whose run exists already, they fail that run).
`run_recipe` checks its config again (a config built in Python skips the command line),
and turns a later refusal or setup error (a `RefusedInput`) into a FAILED run whose
reason is the refusal itself (which names the row and the fix, code `refused`), and an
exit code of 1. Under a job (started by a runwatch worker) the run is the job's: `name`,
`runs_dir` and `resume` do not pick it, and settings that do not parse fail it as a
refusal too. The end of each step is in `steps`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

import runwatch
from runwatch.recipes import checkpoint
from runwatch.recipes.batches import DataFit
from runwatch.recipes.build import Policy, base_model_label, check_adapter, dataset_label
from runwatch.recipes.config import REFUSED_EXIT, ConfigError, TrainConfig, refuse_settings
from runwatch.recipes.memory import MemoryMeter
from runwatch.recipes.wandb_bridge import WandbBridge, WandbSetupError, check_wandb
from runwatch.rundir.format import ENV_RUN_DIR, RunDirError
from runwatch.sdk import NullRun, RefusedInput, Run


class Recorder:
    """Sends each record to the runwatch run and, when enabled, to W&B; echoes progress;
    saves checkpoints where the run keeps them."""

    def __init__(self, run: Run | NullRun, wandb: WandbBridge, quiet: bool = False) -> None:
        self.run = run
        self.wandb = wandb
        self.quiet = quiet
        self.checkpoints = checkpoint.for_run(run)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self.run.log(metrics, step=step)
        self.wandb.log(metrics, step)

    def progress(self, stage: str, done: int | None, total: int | None) -> None:
        self.run.set_phase("PREPARING", stage=stage, done=done, total=total)

    def text(self, level: str, message: str, data: dict[str, Any] | None = None) -> None:
        self.run.log_text(message, level=level, data=data)
        self.echo(message)

    def echo(self, message: str) -> None:
        if not self.quiet:
            print(message, flush=True)


Body = Callable[[Recorder], None]


def recipe_main(cls: type[TrainConfig], method: str, doc: str | None, argv: list[str] | None,
                train: Callable[[Any, Recorder], None]) -> int:
    """The command line of every recipe: --help, `[--config FILE] key=value` parsing,
    then `run_recipe`."""
    args = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in args):
        print(doc)
        print(cls.help_text())
        return 0
    cfg = refuse_settings(cls, args)
    if isinstance(cfg, ConfigError):
        _fail_job_run(method, cfg)
        return REFUSED_EXIT
    return run_recipe(cfg, method, lambda rec: train(cfg, rec))


def _refuse(method: str, exc: RefusedInput) -> None:
    """Say why the recipe will not start, and fail its job's run with it."""
    print(f"error: {exc}", file=sys.stderr)
    _fail_job_run(method, exc)


def _fail_job_run(method: str, exc: RefusedInput) -> None:
    """Outside a job nothing is made, so no run folder is left behind; under a job its run
    exists already and fails with the refusal (code refused), not as a process that
    stopped without a word."""
    if not os.environ.get(ENV_RUN_DIR):
        return
    try:
        runwatch.init(method=method, phase="PREPARING").fail_from(exc)
    except RunDirError as err:  # the environment names no run of this job: say so only
        print(f"error: {err}", file=sys.stderr)


def run_recipe(cfg: TrainConfig, method: str, body: Body) -> int:
    """Record a run of `body` and return the process exit code (0 = SUCCEEDED)."""
    try:
        cfg.validate()  # its command line did; a config built in Python did not
    except ConfigError as exc:
        _refuse(method, exc)
        return REFUSED_EXIT
    torch.set_num_threads(cfg.torch_threads)
    try:
        # Before any run, data or model: a missing W&B key must cost seconds, not a run
        # folder whose name a later run's prefix would collide with.
        check_wandb(cfg.wandb_project)
    except WandbSetupError as exc:
        _refuse(method, exc)
        return 1
    try:
        # Needs torch and the model's own config (not its weights), so not on the
        # command line, but still before anything is made.
        check_adapter(cfg)
    except ConfigError as exc:
        _refuse(method, exc)
        return REFUSED_EXIT
    name = cfg.name or f"{method}-{cfg.task}-{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        run = runwatch.init(
            project=cfg.project, name=name, config=cfg, method=method,
            base_model=base_model_label(cfg), dataset=dataset_label(cfg),
            trainer=f"runwatch-{method}", backend="torch-cpu", group=cfg.wandb_group,
            dir=cfg.runs_dir, resume=cfg.resume, phase="PREPARING",
        )
    except RunDirError as exc:
        # e.g. the name is taken: nothing was recorded, so only the terminal hears of it.
        print(f"error: {exc}", file=sys.stderr)
        return 2
    wandb = WandbBridge()
    failed = True
    with run:
        try:
            # Under a job the run (and so its name and folder) is the job's.
            name = run.name or name
            wandb = WandbBridge.start(
                cfg.wandb_project, cfg.wandb_entity, cfg.wandb_group,
                cfg.wandb_run_name or name, cfg.to_dict(), run.dir,
            )
            if wandb.active:
                run.set_manifest_fields(**wandb.manifest_fields())
            rec = Recorder(run, wandb)
            rec.echo(f"{method} run {name} recording to {run.dir}")
            body(rec)
            failed = False
        except RefusedInput as exc:
            run.fail_from(exc)  # FAILED, code refused, the refusal's own words
            print(f"error: {exc}", file=sys.stderr)
            return 1
        finally:
            wandb.finish(failed)
    return 0 if run.status in (None, "SUCCEEDED") else 1


def report_after_training(rec: Recorder, fit: DataFit, memory: MemoryMeter) -> None:
    """Log the data-fit report and the peak-memory breakdown once training ends."""
    rec.text("info", f"data fit after training: {fit.as_dict()}", {"data_fit": fit.as_dict()})
    report_peak_memory(rec, memory)


def report_peak_memory(rec: Recorder, memory: MemoryMeter) -> None:
    """Log the peak-memory breakdown (the step with the most memory) once training ends."""
    if not memory.peak:
        rec.text("warning", "no step updated the model, so no peak memory was measured")
        return
    peak = memory.report()
    rec.text("info", f"peak memory at step {peak['step']}: {peak['bytes']}", {"memory": peak})


def resume_step(
    rec: Recorder, cfg: TrainConfig, model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> int:
    """The step to continue after: the last training checkpoint's, or 0 for a fresh start."""
    if not cfg.resume:
        return 0
    path = rec.checkpoints.latest_training()
    if path is None:
        rec.text("warning", f"resume=true but {rec.checkpoints.where} has no training "
                            "checkpoint; starting from step 0")
        return 0
    step = checkpoint.restore_training(path, model, optimizer)
    rec.text("info", f"resumed from step {step} ({path})", {"step": step, "path": str(path)})
    return step


def log_engine_config(rec: Recorder, cfg: TrainConfig, policy: Policy,
                      optimizer: torch.optim.Optimizer, requested: tuple[str, ...] = (),
                      resolved: dict[str, Any] | None = None) -> None:
    """What the config asked of the engine, and what it resolved to; a recipe adds its own
    `requested` settings and `resolved` values to the shared ones."""
    keys = ("base_model", "init_from", "n_layer", "n_head", "d_model", "lora_rank",
            "lora_alpha", "lora_targets", "learning_rate", "weight_decay", "max_grad_norm",
            "max_seq_length", "batch_size", "torch_threads")
    group = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
    n_params = sum(p.numel() for p in policy.model.parameters())
    n_train = sum(p.numel() for p in policy.model.parameters() if p.requires_grad)
    engine = {
        "model": policy.source, "parameters": n_params, "trainable_parameters": n_train,
        "lora_layers": policy.lora_layers, "max_seq_length": min(cfg.max_seq_length,
                                                                  policy.max_seq_len),
        "tokenizer": policy.tok.name, "optimizer": {"type": type(optimizer).__name__, **group},
        "torch_threads": torch.get_num_threads(), "torch_version": torch.__version__,
        **(resolved or {}),
    }
    rec.run.log_engine_config({k: getattr(cfg, k) for k in (*keys, *requested)}, engine)
