"""A `wandb`-shaped module that records runwatch runs, so a script written for W&B runs
unchanged with one import swapped: `import runwatch.compat.wandb as wandb`.

`init`, `log`, `config`, `summary`, `finish`, `Table` (logged as samples), `run`, and
`define_metric` / `login` (accepted, they do nothing); the rest of W&B's API that a script
commonly calls is accepted and ignored (runwatch.compat.wandb_ignored, and `wandb.plot`:
runwatch.compat.wandb_plot), and `Api` and sweeps raise, saying what to use instead
(runwatch.compat.wandb_absent). W&B's API is module-level (`wandb.run`, `wandb.config`),
so this module keeps the current run in module attributes as W&B does; every record goes
through the SDK's `Run`. A script that ends without `finish()` ends its run as W&B does:
SUCCEEDED, or as the SDK ends a run its uncaught exception or an exit with a status other
than 0 stopped (runwatch.compat.wandb_exit). A process forked from the script (a
DataLoader or Pool worker) neither ends nor records into its parent's run, as W&B ignores
such a process's calls: its `init()` starts a run of its own. docs/wandb-compat.md says
what maps to what.
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import os
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from runwatch.compat import wandb_plot as plot
from runwatch.compat.names import folder_name
from runwatch.compat.wandb_absent import Api, Error, agent, sweep
from runwatch.compat.wandb_exit import Ending, ExitNotes
from runwatch.compat.wandb_ignored import (
    AlertLevel,
    Artifact,
    Audio,
    BoundingBoxes2D,
    Classes,
    Graph,
    Histogram,
    Html,
    Image,
    ImageMask,
    Molecule,
    Object3D,
    Plotly,
    Settings,
    Video,
    alert,
    link_model,
    log_artifact,
    log_code,
    log_model,
    mark_preempting,
    restore,
    save,
    unwatch,
    use_artifact,
    watch,
)
from runwatch.compat.wandb_plot import plot_table, visualize
from runwatch.rundir import format as fmt
from runwatch.rundir.atomic import write_atomic
from runwatch.sdk import NullRun
from runwatch.sdk import Run as SdkRun
from runwatch.sdk import init as sdk_init
from runwatch.sdk.config import config_to_yaml
from runwatch.sdk.run import checked_step

__all__ = ["AlertLevel", "Api", "Artifact", "Audio", "BoundingBoxes2D", "Classes", "Config",
           "Error", "Graph", "Histogram", "Html", "Image", "ImageMask",
           "Molecule", "Object3D", "Plotly", "Run", "Settings", "Summary", "Table", "Video",
           "agent", "alert", "config", "define_metric", "finish", "init", "link_model", "log",
           "log_artifact", "log_code", "log_model", "login", "mark_preempting", "plot",
           "plot_table", "restore", "run", "save", "summary", "sweep", "unwatch",
           "use_artifact", "visualize", "watch"]

# W&B is a package: a library that imports its submodules (transformers' WandbCallback:
# `from wandb.sdk.lib.config_util import ...`) where a script put this module in
# sys.modules["wandb"] finds them in runwatch.compat.wandb_modules, which says what to use.
__path__ = [str(Path(__file__).with_name("wandb_modules"))]

# Column names W&B scripts use for a sample's text and score, and runwatch's name for each.
SAMPLE_COLUMNS = {"input": "prompt", "question": "prompt", "query": "prompt",
                  "response": "completion", "output": "completion", "generation": "completion",
                  "answer": "completion", "text": "completion", "score": "reward"}
# What the run's log and stderr say when a SystemExit no hook saw ended the script.
UNSEEN_EXIT = ("the script ended by a SystemExit raised without sys.exit() (`raise "
               "SystemExit(...)`), whose status Python keeps from runwatch, so the run is "
               "recorded SUCCEEDED, as W&B records it; end the script with "
               "sys.exit(status), or call wandb.finish(exit_code=status), to record it")


class Config:
    """`wandb.config`: attribute and item access, `update()`; every change is written to
    the run's config.yaml at once (config changes are rare, and a crash must not lose
    them)."""

    def __init__(self, values: Mapping[str, Any] | None = None,
                 path: Path | None = None) -> None:
        object.__setattr__(self, "_values", dict(values or {}))
        object.__setattr__(self, "_path", path)

    def __getattr__(self, key: str) -> Any:
        # Read through __dict__: copy and pickle look up attributes of an instance they
        # made without __init__, before it holds any values.
        values = self.__dict__.get("_values", {})
        try:
            return values[key]
        except KeyError:
            raise AttributeError(f"config has no key {key!r}") from None

    def __reduce__(self) -> tuple[type[Config], tuple[dict[str, Any]]]:
        # A copy holds the values only: changing it must not rewrite the run's config.yaml.
        return Config, (dict(self._values),)

    def __setattr__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> Iterable[str]:
        return self._values.keys()

    def items(self) -> Iterable[tuple[str, Any]]:
        return self._values.items()

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def update(self, values: Any = None, allow_val_change: bool = True) -> None:
        self._values.update(_as_dict(values))
        if self._path is not None:
            write_atomic(self._path, config_to_yaml(self._values).encode())

    setdefaults = update


class Summary(dict[str, Any]):
    """`wandb.summary`: values set by the script, written to the manifest's `summary` when
    the run finishes (the index keeps each metric's latest value already)."""


class Table:
    """`wandb.Table(columns=, data=)`: logged, each row becomes one of the step's samples;
    columns named prompt / completion / reward (or input, response, output, score …) are
    the sample's text and score, the others are kept beside them."""

    def __init__(self, columns: Sequence[str] | None = None,
                 data: Sequence[Sequence[Any]] | None = None, dataframe: Any = None,
                 **_: Any) -> None:
        if dataframe is not None:
            columns = [str(c) for c in dataframe.columns]
            data = dataframe.itertuples(index=False)
        rows = [list(r) for r in (data or [])]
        width = max((len(r) for r in rows), default=0)
        self.columns = list(columns) if columns is not None else [
            f"col{i}" for i in range(width)]
        self.data: list[list[Any]] = []
        for row in rows:
            self.add_data(*row)

    def add_data(self, *row: Any) -> None:
        if len(row) != len(self.columns):
            raise ValueError(f"a row of {len(row)} values for {len(self.columns)} columns "
                             f"({', '.join(self.columns)})")
        self.data.append(list(row))

    def samples(self) -> list[dict[str, Any]]:
        """The rows as runwatch samples (prompt, completion, reward, and other columns)."""
        out = []
        for row in self.data:
            sample = {str(c): _plain(v) for c, v in zip(self.columns, row, strict=True)}
            for name, ours in SAMPLE_COLUMNS.items():
                if name in sample and ours not in sample:
                    sample[ours] = sample.pop(name)
            out.append(sample)
        return out


class Run:
    """`wandb.run`: what `init()` returns. `log`, `finish`, `config`, `summary`, `id`, `name`."""

    def __init__(self, sdk_run: SdkRun | NullRun, config: Config, project: str) -> None:
        self._run = sdk_run
        self.config = config
        self.summary = Summary()
        self.project = project
        self.id: str = sdk_run.id
        self.name: str = sdk_run.name
        self.dir = str(sdk_run.dir) if sdk_run.dir is not None else None
        self.url: str | None = None  # no W&B server: nothing to link to
        self.step = 0  # the step of the row being filled (W&B's run.step)
        self._row: dict[str, Any] = {}
        self._warned: set[str] = set()

    def log(self, data: Mapping[str, Any], step: int | None = None,
            commit: bool | None = None) -> None:
        """W&B's rules: a row collects values until it is committed (`commit=True`, or
        neither `step` nor `commit` given); a larger `step` commits the row before it; a
        step before the current one is dropped with a warning."""
        if self._run.finished:
            raise Error("log() after finish(): start a new run with init()")
        # What the SDK would refuse when the row is committed is refused here, at the call
        # that gives it, so it cannot spoil the row or the steps of later calls.
        row = _flat(data)
        for key in row:
            problem = fmt.validate_key(key)
            if problem:
                raise ValueError(f"log(): {problem}; name a metric with 1 to "
                                 f"{fmt.MAX_KEY_LENGTH} characters, such as 'train/loss'")
        if step is not None:
            step = checked_step(step, "log")
            if step < self.step:
                _warn(f"step {step} is before the current step {self.step}; W&B drops "
                      "such data and so does runwatch")
                return
            if step > self.step:
                self._commit()
                self.step = step
        self._row.update(row)
        if commit or (commit is None and step is None):
            self._commit()
            self.step += 1

    def define_metric(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Accepted and ignored: runwatch keeps every metric against the logged step."""

    # W&B's calls that runwatch accepts and ignores (runwatch.compat.wandb_ignored)
    alert = staticmethod(alert)
    link_model = staticmethod(link_model)
    log_artifact = staticmethod(log_artifact)
    log_code = staticmethod(log_code)
    log_model = staticmethod(log_model)
    mark_preempting = staticmethod(mark_preempting)
    restore = staticmethod(restore)
    save = staticmethod(save)
    unwatch = staticmethod(unwatch)
    use_artifact = staticmethod(use_artifact)
    watch = staticmethod(watch)

    def finish(self, exit_code: int | None = None, quiet: bool | None = None) -> None:
        """End the run: SUCCEEDED, or FAILED for a non-zero `exit_code`."""
        self._end(None, "FAILED" if exit_code else None)

    def _end(self, exc: BaseException | None, status: str | None = None) -> None:
        """Commit the open row, write the summary and end the run: as the SDK ends a run
        that `exc` stopped, else with `status` (None: SUCCEEDED)."""
        if self._run.finished:
            return
        self._commit()
        if self.summary:
            self._run.set_manifest_fields(summary={k: _plain(v) for k, v in self.summary.items()})
        if exc is None:
            self._run.finish(status)
        else:
            self._run.fail_from(exc)
        _forget(self)

    def _commit(self) -> None:
        row, self._row = self._row, {}
        metrics: dict[str, float] = {}
        for key, value in row.items():
            number = _number(value)
            if key in fmt.RECORD_FIELDS:  # W&B takes it as a metric; runwatch's records
                # have a field of that name (the step is W&B's own step, kept as such)
                if key not in self._warned:
                    self._warned.add(key)
                    _warn(f"{key!r}: a runwatch record's own field, not recorded as a "
                          f"metric (log it under another name, such as 'train/{key}')")
                continue
            if number is not None:
                metrics[key] = number
            elif isinstance(value, Table):
                self._run.log_samples(self.step, value.samples())
            elif key not in self._warned:
                self._warned.add(key)
                kind = type(value).__name__
                _warn(f"{key!r}: runwatch records numbers and Tables; "
                      f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind} is not recorded")
        if metrics:
            self._run.log(metrics, step=self.step)

    def _end_at_exit(self, ending: Ending) -> None:
        """The script ended without finish(): as W&B, SUCCEEDED, unless an uncaught
        exception or an exit call with a status other than 0 ended it: then as the SDK
        ends a run that exception stopped. A SystemExit whose status no hook saw is said
        so, in the run's log and on stderr."""
        if ending.unseen_exit and not self._run.finished:
            self._run.log_text(UNSEEN_EXIT, level="warning")
            print(f"runwatch: {UNSEEN_EXIT}", file=sys.stderr)
        self._end(ending.exc)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._end(exc)


run: Run | None = None
config = Config()
summary = Summary()


def init(project: str | None = None, name: str | None = None, config: Any = None,
         group: str | None = None, tags: Sequence[str] | None = None,
         dir: str | os.PathLike[str] | None = None, mode: str | None = None,
         job_type: str | None = None, notes: str | None = None, **_: Any) -> Run:
    """Start a runwatch run the way `wandb.init` starts a W&B run.

    The run folder is $RUNWATCH_DIR/<name>, else `dir`/runs/<name>, else ./runs/<name>;
    `mode="disabled"` (or WANDB_MODE=disabled) records nothing. Names are made safe as
    folder names (other characters become '-'); W&B lets runs share a name, so where the
    folder holds a run already, the new one is <name>-2 (-3, …), with a warning. Other W&B
    arguments are accepted.
    """
    if run is not None:
        run.finish()  # W&B finishes the previous run of the process too
    mode = mode or os.environ.get("WANDB_MODE")
    project = _safe(project or os.environ.get("WANDB_PROJECT") or "default")
    values = _as_dict(config)
    runs_dir = os.environ.get("RUNWATCH_DIR") or (Path(dir) / "runs" if dir else "runs")
    sdk_run = _start(Path(runs_dir), _safe(name) if name else None, project=project,
                     config=values, group=group, tags=list(tags or ()),
                     mode="disabled" if mode == "disabled" else "offline")
    described = {k: v for k, v in (("notes", notes), ("job_type", job_type)) if v}
    if described:
        sdk_run.set_manifest_fields(**described)
    path = None if sdk_run.dir is None else sdk_run.dir / fmt.CONFIG
    new = Run(sdk_run, Config(values, path), project)
    _adopt(new, sys._getframe(1).f_globals)
    return new


def log(data: Mapping[str, Any], step: int | None = None, commit: bool | None = None) -> None:
    """`wandb.log`: log to the current run."""
    _current().log(data, step=step, commit=commit)


def finish(exit_code: int | None = None, quiet: bool | None = None) -> None:
    """`wandb.finish`: end the current run (nothing to do without one)."""
    if run is not None:
        run.finish(exit_code)


def define_metric(name: str, *args: Any, **kwargs: Any) -> None:
    """Accepted and ignored: runwatch keeps every metric against the logged step."""


def login(*args: Any, **kwargs: Any) -> bool:
    """Accepted: runwatch needs no account."""
    return True


def _current() -> Run:
    if run is None:
        raise Error("call wandb.init() before wandb.log()")
    return run


def _start(runs_dir: Path, name: str | None, **kwargs: Any) -> SdkRun | NullRun:
    """The SDK's run in `runs_dir`/`name`, else, where that folder holds a run already
    (W&B lets runs share a name), in the first free `name`-2, `name`-3 … (a warning says
    which)."""
    folder, n = name, 1
    while True:
        try:
            sdk_run = sdk_init(name=folder, dir=runs_dir, **kwargs)
        except fmt.RunDirError:
            if name is None or not (runs_dir / str(folder) / fmt.MANIFEST).exists():
                raise
            n += 1
            folder = _numbered(name, n)
            continue
        if folder != name:
            _warn(f"{runs_dir / str(name)} holds a run already, so this run is "
                  f"{runs_dir / str(folder)} (W&B lets runs share a name; runwatch names a "
                  "run's folder by it)")
        return sdk_run


def _warn(message: str) -> None:
    """Warn at the script's line that called W&B's API: the first frame outside this
    module and its helpers (wandb_exit's hooks), however many of their calls lie between
    (`wandb.log` or `run.log`, a row committed by `finish()`), so that the warning names
    the user's line and a filter on the user's module matches it."""
    frame = sys._getframe(1)
    level = 2  # the frame that called _warn
    while frame.f_back is not None and _ours(frame):
        frame = frame.f_back
        level += 1
    warnings.warn(message, stacklevel=level)


def _ours(frame: FrameType) -> bool:
    module = frame.f_globals.get("__name__", "")
    return bool(module == __name__ or module.startswith(f"{__name__}_"))


def _numbered(name: str, n: int) -> str:
    suffix = f"-{n}"
    return name[:fmt.MAX_NAME_LENGTH - len(suffix)] + suffix


def _adopt(new: Run, caller_globals: dict[str, Any]) -> None:
    global run, config, summary, _exit_notes
    if _exit_notes is None:
        # The interpreter shows no exit status to atexit hooks: note the one each exit
        # call gives (runwatch.compat.wandb_exit), as W&B notes sys.exit()'s.
        _exit_notes = ExitNotes()
        _exit_notes.install(caller_globals)
        # Registered after the SDK's own exit hook, so it runs first (atexit is LIFO).
        atexit.register(_end_at_exit)
        os.register_at_fork(after_in_child=_forked_child)
    run, config, summary = new, new.config, new.summary


def _forget(old: Run) -> None:
    global run
    if run is old:
        run = None


_exit_notes: ExitNotes | None = None


def _end_at_exit() -> None:
    if run is not None and _exit_notes is not None:
        run._end_at_exit(_exit_notes.ending())


def _forked_child() -> None:
    """In a process forked from the script: its run is the parent's, which the SDK makes
    record nothing here (runwatch.sdk.live.InheritedRun). The child's exit does not end it
    (without exit notes `_end_at_exit` does nothing, until an init() here notes its own
    run's), and `wandb.config` no longer writes the parent's config.yaml."""
    global _exit_notes
    _exit_notes = None
    object.__setattr__(config, "_path", None)  # (Config's own setattr sets a value)


def _safe(name: str) -> str:
    return folder_name(str(name)) or "run"


def _as_dict(values: Any) -> dict[str, Any]:
    """A config as W&B takes it: a mapping, an argparse Namespace, a dataclass or None."""
    if values is None:
        return {}
    if isinstance(values, argparse.Namespace):
        return dict(vars(values))
    if dataclasses.is_dataclass(values) and not isinstance(values, type):
        return dataclasses.asdict(values)
    if isinstance(values, Config):
        return values.as_dict()
    return dict(values)


def _flat(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as slash-joined keys ({"val": {"loss": 1}} is val/loss)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{name}/"))
        else:
            out[name] = value
    return out


def _number(value: Any) -> float | None:
    """A float for an int, float, bool, numpy scalar or one-element tensor; else None."""
    if isinstance(value, bool | int | float):
        return float(value)
    item = getattr(value, "item", None)
    numel = getattr(value, "numel", None)  # a tensor's size is a method, numpy's a number
    size = numel() if callable(numel) else getattr(value, "size", 1)
    if callable(item) and size == 1:
        try:
            got = item()
        except (TypeError, ValueError, RuntimeError):
            return None
        return float(got) if isinstance(got, bool | int | float) else None
    return None


def _plain(value: Any) -> Any:
    """A JSON-ready value: numbers from numpy/torch scalars, text for the rest."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    number = _number(value)
    return number if number is not None else str(value)
