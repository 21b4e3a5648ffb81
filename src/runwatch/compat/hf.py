"""A Hugging Face `TrainerCallback` that records a `Trainer` (or a TRL trainer) as a
runwatch run: `Trainer(..., callbacks=[RunwatchCallback()])`.

Metric keys are kept as the trainer logs them (`loss`, `grad_norm`, `eval_loss`, TRL's
`rewards/margins`…); runwatch's alias tables (runwatch.metrics.aliases) give them their
canonical roles when the run is read. The totals the Trainer logs once at the end
(`train_runtime`, `train_loss`, …) go to the manifest's `summary`, as W&B's callback
puts them in its run summary. The run is named by the callback's `name`, else by the
`run_name` the user gave the TrainingArguments (as HF's own tracker callbacks name theirs).
What the Trainer logs outside `train()` (a baseline `trainer.evaluate()` before it, a
closing one after) is recorded in the run that training continues (or continued); under
a runwatch job that run is the job's, held open from the first log, or from train begin,
to the process's exit, which ends it once. A run whose training raises, or whose script
raises before `train()` after a log started it, ends FAILED with the exception in logs.jsonl;
one whose train() Ctrl-C stopped, in a notebook's kernel too, ends CANCELLED. The
completions TRL's GRPOTrainer keeps with `log_completions=True` are the run's samples
(runwatch.compat.trl_completions).
"""

from __future__ import annotations

import atexit
import os
import sys
import warnings
from collections.abc import Sequence
from numbers import Real
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from runwatch.compat.names import folder_name
from runwatch.compat.trl_completions import CompletionFiles
from runwatch.rundir import format as fmt
from runwatch.sdk import NullRun, Run, init
from runwatch.sdk.live import ending_exception

# The Trainer's end-of-training totals (one value per run, not a series).
SUMMARY_KEYS = frozenset({"train_runtime", "train_samples_per_second",
                          "train_steps_per_second", "train_loss", "total_flos"})
# TRL's config classes name the method its trainer runs.
METHODS = {"SFTConfig": "sft", "DPOConfig": "dpo", "GRPOConfig": "grpo"}


def method_of(args: TrainingArguments) -> str | None:
    """The runwatch method of a trainer, from its arguments' class (TRL's SFTConfig: sft)."""
    for cls in type(args).__mro__:
        if cls.__name__ in METHODS:
            return METHODS[cls.__name__]
    return None


def user_run_name(args: TrainingArguments) -> str | None:
    """The `run_name` the user gave the TrainingArguments, made a run folder's name, or None
    when they gave none: transformers 4 fills an unset run_name with `output_dir`, which
    names no run (HF's W&B callback takes that value for "no name" too)."""
    name = getattr(args, "run_name", None)
    if not name or name == args.output_dir:
        return None
    return folder_name(str(name)) or None


def trainer_config(args: TrainingArguments, model: Any) -> dict[str, Any]:
    """The run's config: the TrainingArguments at the top level (so `learning_rate` and
    `seed` read as in any runwatch plan) and the model's config under `model`."""
    config: dict[str, Any] = dict(args.to_dict())
    model_config = getattr(model, "config", None)
    if model_config is not None and hasattr(model_config, "to_dict"):
        config["model"] = model_config.to_dict()
    return config


class RunwatchCallback(TrainerCallback):
    """Records the training it is attached to as a runwatch run in `dir`/<name>.

    The arguments are those of `runwatch.init`; `name` defaults to the TrainingArguments'
    `run_name` when the user set one, `method` to the TRL trainer's (sft, dpo, grpo),
    `base_model` to the model's `name_or_path`. The run is started on train begin, or at
    the first log before it (a baseline `trainer.evaluate()`), which training then
    continues; it can be reached as `.run` from then on.
    """

    def __init__(self, project: str = "default", name: str | None = None,
                 dir: str | os.PathLike[str] = "runs", group: str | None = None,
                 tags: Sequence[str] = (), method: str | None = None,
                 base_model: str | None = None, dataset: str | None = None) -> None:
        self._init_args: dict[str, Any] = {
            "project": project, "name": name, "dir": dir, "group": group, "tags": tags,
            "method": method, "base_model": base_model, "dataset": dataset}
        self.run: Run | NullRun = NullRun()
        self._trained = False  # a train() has begun with this callback
        self._one_log = False  # the run is open for one log outside train(): ended after it
        self._completions: CompletionFiles | None = None  # TRL's, with log_completions
        self._exit_hooked = False  # _at_exit is registered
        # the job's run, which a train() that reached its end left open for what the
        # script logs after it (a closing evaluate()): the process's exit ends it
        self._held = False
        # id() of the error the session had shown when the last train() began: one shown
        # since is of that train() or later (compared, not held: it holds the frames)
        self._shown_at_train: int | None = None

    def on_train_begin(self, args: TrainingArguments, state: TrainerState,
                       control: TrainerControl, model: Any = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        interrupt = self._interrupt()
        self._shown_at_train = id(_shown_error())
        described = self._described(args, model)
        # A run is resumed when the Trainer resumes from a checkpoint under a named run:
        # the state it loaded from the checkpoint has steps already (the Trainer does not
        # act on TrainingArguments.resume_from_checkpoint, and `train(resume_from_
        # checkpoint=...)` leaves it unset)
        self._one_log = False
        resume = state.global_step > 0 and described["name"] is not None
        previous = self.run
        if isinstance(previous, Run) and not previous.finished and self._held:
            # the job's run, held open after the last train() reached its end: it ends
            # as that training did, and this train() records as after any ended run
            previous.finish()
        self._held = False
        if isinstance(previous, Run) and not previous.finished and not self._trained:
            # the job's run, which a log before train() attached to and holds open: this
            # training goes on in it (an init() now would find it this process's and
            # record a run of its own)
            self._trained = True
            self._watch_completions(args)
            return
        if isinstance(previous, Run) and not previous.finished:
            # the last train() never reached its end: that run ends here, for what it is,
            # before this train() records: CANCELLED when Ctrl-C stopped it (a notebook's
            # interrupted cell), else FAILED (an exception the script caught)
            if interrupt is not None:
                previous.fail_from(interrupt)
            else:
                previous.finish("FAILED", reason=STOPPED_BEFORE_END, code="failed")
        if isinstance(previous, Run) and not self._trained:
            # what the Trainer logged before train() (a baseline evaluate()) started the
            # run: this training continues it
            described, resume = self._described(args, model, previous), True
        elif (not resume and isinstance(previous, Run) and described["name"] is not None
                and previous.name == described["name"]):
            # a train() again from step 0 with this callback (a notebook's second cell):
            # a run of its own, named after the first, not an error in the new training
            described["name"] = _next_name(previous.dir.parent, previous.name)
        try:
            self.run = init(config=trainer_config(args, model), trainer=_trainer_name(args),
                            resume=resume, **described)
        except fmt.RunDirError as exc:
            folder = Path(described["dir"]) / str(described["name"])
            if resume or not (folder / fmt.MANIFEST).exists():
                raise
            # init() says to pass resume=True, which a callback's user cannot
            raise fmt.RunDirError(NAME_TAKEN.format(folder=folder)) from exc
        self._trained = True
        self._end_at_exit()  # for a train() that Ctrl-C stops in a notebook
        self._watch_completions(args)

    def _watch_completions(self, args: TrainingArguments) -> None:
        """Read the completions TRL's GRPOTrainer writes with `log_completions=True`."""
        self._completions = None
        if getattr(args, "log_completions", False) and args.output_dir:
            self._completions = CompletionFiles(args.output_dir,
                                                getattr(args, "num_generations", None),
                                                getattr(args, "reward_weights", None))

    def on_step_begin(self, args: TrainingArguments, state: TrainerState,
                      control: TrainerControl, **kwargs: Any) -> None:
        self._take_completions(state)

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, model: Any = None,
               **kwargs: Any) -> None:
        if not logs or not self._recording(args, state, model):
            return
        try:
            self._record(state, logs)
        except BaseException as exc:
            if self._one_log:
                # the run was opened for this log alone: it ends with what stopped it,
                # not left open (a notebook's kernel would hold it RUNNING for good)
                self._one_log = False
                self.run.fail_from(exc)
            raise
        if self._one_log:  # logged outside train() (an evaluate()): the run ends again
            self.run.finish()

    def _record(self, state: TrainerState, logs: dict[str, Any]) -> None:
        if self._completions is not None:
            self._completions.note_metrics(logs)
            # an evaluation's log comes before it writes its file: the one there is training's
            self._take_completions(state)
        metrics: dict[str, float] = {}
        summary: dict[str, float] = {}
        for key, value in logs.items():
            # a record's own fields are no metric: the step is state.global_step
            if isinstance(value, Real) and key not in fmt.RECORD_FIELDS:
                (summary if key in SUMMARY_KEYS else metrics)[key] = float(value)
        if metrics:
            self.run.log(metrics, step=state.global_step)
        if summary:
            self.run.set_manifest_fields(summary={**self.run.manifest.get("summary", {}),
                                                  **summary})

    def _recording(self, args: TrainingArguments, state: TrainerState, model: Any) -> bool:
        """Whether the run takes what the Trainer logs: while it trains; and outside
        `train()` (`trainer.evaluate()` before or after it), when the run is started for
        that one log, or the run a train end or an earlier such log finished is resumed
        for it, and finished again after it (both were lost without a word). Under a
        runwatch job the run a log before train() starts is the job's: it is held open,
        not finished after the log (the job's run read SUCCEEDED mid-job, and train()
        then took it back by its folder instead of as the job's)."""
        if not state.is_world_process_zero:
            return False  # other ranks record nothing
        run = self.run
        if isinstance(run, Run):
            if not run.finished:
                return True
            if run.status != "SUCCEEDED":
                return False  # ended otherwise: left as it is
            self.run = init(resume=True, **self._described(args, model, run))
        elif self._trained:
            return False  # init() gave a NullRun: this process records nothing
        elif not self._may_start(args, model):
            return False
        else:
            self.run = init(config=trainer_config(args, model), trainer=_trainer_name(args),
                            **self._described(args, model))
            self._end_at_exit()
            if isinstance(self.run, Run) and self.run.is_jobs_run:
                return True  # held open: train() goes on in it, or the process's exit ends it
        self._one_log = True
        return True

    def _end_at_exit(self) -> None:
        """Have the process's exit end the run as `_at_exit` says (registered once)."""
        if not self._exit_hooked:
            self._exit_hooked = True
            # registered after init() registered the SDK's exit hook: runs before it
            atexit.register(self._at_exit)

    def _at_exit(self) -> None:
        """At the process's exit, when no train() began, or when the job's run is held
        open after training's end: the run ends as the script did. A clean exit ends a
        run held open (a job's) SUCCEEDED, or CANCELLED once asked to stop, where the
        SDK's exit hook would read it as a process that never called finish(); the
        exception that ends the process (the SDK's `ending_exception()`: not an error a
        notebook's cell showed, after which the kernel went on) ends it FAILED, the SDK's
        exit hook for a run held open, and here for one that its last log before
        train() had ended SUCCEEDED (it read SUCCEEDED for a script that crashed before
        training). A run whose train() Ctrl-C stopped in a notebook ends CANCELLED as the
        kernel exits (`_interrupt`). The exit status of `sys.exit(n)` is not seen: Python
        gives no hook a SystemExit, nor atexit hooks the status (docs/huggingface.md)."""
        run = self.run
        if not isinstance(run, Run):
            return
        if self._trained and not self._held:
            # training's end or the SDK's exit hook ends the run; a notebook's kernel that
            # restarts after Ctrl-C stopped train() exits cleanly: that ends it CANCELLED
            interrupt = self._interrupt()
            if interrupt is not None:
                run.fail_from(interrupt)
            return
        exc = ending_exception()
        if not run.finished:
            if exc is None:
                run.finish()
            return
        if self._trained or exc is None or run.status != "SUCCEEDED":
            return
        try:
            self.run = init(resume=True, name=run.name, dir=run.dir.parent,
                            project=run.manifest.get("project"))
            self.run.fail_from(exc)
        except Exception as err:  # the process is ending: one line, not a traceback
            warnings.warn(f"runwatch: run {run.name!r} reads SUCCEEDED though the script "
                          f"raised {type(exc).__name__} before train(), and ending it FAILED "
                          f"failed: {err}", RuntimeWarning, stacklevel=1)

    def _interrupt(self) -> KeyboardInterrupt | None:
        """The Ctrl-C that stopped this callback's last train() in a notebook's kernel (or
        at Python's prompt), or None. The Trainer calls no callback when train() raises,
        and the kernel shows the error without `sys.excepthook` and goes on; what it keeps
        is the error it showed last (`sys.last_value`): that is the one when it is a
        KeyboardInterrupt shown since that train() began and raised through the `train()`
        of a Trainer this callback is attached to (a Ctrl-C of another cell, or an error
        shown after it, is not taken for training's)."""
        exc = _shown_error()
        if not isinstance(exc, KeyboardInterrupt) or id(exc) == self._shown_at_train:
            return None
        tb = exc.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            if frame.f_code.co_name == "train":  # (f_locals only of a frame that ended)
                handler = getattr(frame.f_locals.get("self"), "callback_handler", None)
                if any(callback is self for callback in getattr(handler, "callbacks", ())):
                    return exc
            tb = tb.tb_next
        return None

    def _may_start(self, args: TrainingArguments, model: Any) -> bool:
        """Whether a log before train() may start the run: not when the run it names is
        in its folder already, which train() then resumes from a checkpoint (what was
        logged before is of the model before the checkpoint is loaded, at step 0); one
        warning says so."""
        described = self._described(args, model)
        if described["name"] is None:
            return True
        folder = Path(described["dir"]) / described["name"]
        if not (folder / fmt.MANIFEST).exists():
            return True
        warnings.warn(f"runwatch: what the Trainer logged before train() is not recorded: "
                      f"{folder} holds the run already, which train() resumes from a "
                      "checkpoint, and a log before train() is of the model before the "
                      "checkpoint is loaded; evaluate after train() to record an evaluation "
                      "in that run", RuntimeWarning, stacklevel=2)
        return False

    def _described(self, args: TrainingArguments, model: Any,
                   run: Run | None = None) -> dict[str, Any]:
        """The arguments of `init` for the run: the callback's, and where it gives none the
        trainer's (run_name, method, model); those that reach `run`, to go on with it."""
        described = dict(self._init_args)
        described["name"] = described["name"] or user_run_name(args)
        described["method"] = described["method"] or method_of(args)
        described["base_model"] = described["base_model"] or _model_name(model)
        if run is not None:
            described.update(name=run.name, dir=run.dir.parent,
                             project=run.manifest.get("project", described["project"]))
        return described

    def on_evaluate(self, args: TrainingArguments, state: TrainerState,
                    control: TrainerControl, **kwargs: Any) -> None:
        self._take_completions(state, "val")  # what the evaluation's log just wrote

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                **kwargs: Any) -> None:
        self._take_completions(state)
        if self.run.finished:
            return
        name = f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        self.run.log_checkpoint(state.global_step, "training", name,
                                path=os.path.abspath(os.path.join(args.output_dir or ".", name)))

    def on_train_end(self, args: TrainingArguments, state: TrainerState,
                     control: TrainerControl, **kwargs: Any) -> None:
        self._take_completions(state)
        self._one_log = False
        run = self.run
        if isinstance(run, Run) and run.is_jobs_run and not run.finished:
            # the job's run ends once, with its process: a closing evaluate() goes on in
            # it (finished here, it read SUCCEEDED, RUNNING, SUCCEEDED, and the job's
            # worker could take the job as done mid-evaluation)
            self._held = True
            self._end_at_exit()
            return
        run.finish()

    def _take_completions(self, state: TrainerState, split: str = "train") -> None:
        """Record the completions file TRL wrote at this step, if it wrote one since."""
        # not on a rank that records nothing (a NullRun): it would read the file for none
        if self._completions is not None and isinstance(self.run, Run) \
                and not self.run.finished:
            self._completions.take(self.run, state.global_step, split)


# What a run says when its train() stopped before its end and train() was called again.
STOPPED_BEFORE_END = ("train() stopped before its end (an exception the script caught, or a "
                      "notebook's cell raising) and was called again")


def _shown_error() -> BaseException | None:
    """The error an interactive session (a notebook's kernel, Python's prompt) showed
    last, which it keeps as `sys.last_value`; None when it showed none."""
    exc = getattr(sys, "last_value", None)
    return exc if isinstance(exc, BaseException) else None


# What train() from step 0 says when the run folder its name names holds a run already.
NAME_TAKEN = ("{folder} holds a run already: to continue it, resume the training from its "
              "checkpoint (`trainer.train(resume_from_checkpoint=True)`); to record a new "
              "run, give it another name (`RunwatchCallback(name=...)` or "
              "`TrainingArguments.run_name`)")


def _next_name(runs_dir: Path, name: str) -> str:
    """`name-2`, `name-3`, …: the first that no run folder of `runs_dir` holds."""
    n = 2
    while (runs_dir / f"{name}-{n}").exists():
        n += 1
    return f"{name}-{n}"


def _model_name(model: Any) -> str | None:
    name = getattr(model, "name_or_path", None) or getattr(
        getattr(model, "config", None), "_name_or_path", None)
    return str(name) if name else None


def _trainer_name(args: TrainingArguments) -> str:
    """`trl SFTTrainer` for TRL's configs, else `transformers Trainer`."""
    config = type(args).__name__
    if config in METHODS:
        return f"trl {config.removesuffix('Config')}Trainer"
    return "transformers Trainer"
