"""Comparing a supervised run's training loss with a baseline run's (`runwatch runs compare`
and GET /api/compare): whether the two follow one plan, window means of the loss
difference, gradient-norm spikes, and the first full window past a margin.

Two runs with one plan train the same rows at every step, so a difference in their loss
at a step comes from what they learned, not from which rows they drew. The plan is the
data set, the seed, the base model and its revision, the sequences per update and every
other config value, apart from those that only name, place or watch a run (`NOT_PLAN`).
Runs that differ only in how they divide the same sequences per update (devices ×
sequences per pass × accumulation) train the same rows: they are compared, and the
division is reported.

The computation is pure; `read_side` is the one reader of a run from the index that the
command line and the server share (plain SQL, store/plain.py, and the saved series of
store/plain_series.py), so both read the same series through the same saved files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import yaml

from runwatch.metrics import Role, find_key
from runwatch.rundir.configtext import ConfigError, load_config

if TYPE_CHECKING:
    from runwatch.store.plain import Reader
    from runwatch.store.plain_series import SavedSeries

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

DEFAULT_WINDOW = 10
DEFAULT_MARGIN = 0.03
DEFAULT_SPIKE_FACTOR = 10.0

# Method families that record a reward, not a training loss, at each step.
REINFORCEMENT = {"grpo", "ppo", "rl", "rloo", "dapo", "reinforce"}

# Config names (compared lower case, without `_` and `-`) that name, place or watch a
# run without changing what it trains: two runs of one plan may differ in them. The
# generic words count only at the top level (a nested `optimizer.name` is a setting).
NOT_PLAN = frozenset({
    "runname", "runsdir", "outputdir", "loggingdir", "cachedir", "torchthreads",
    "exportsamples", "checkpointinterval", "savesteps", "valinterval", "validationinterval",
    "evalsteps", "loggingsteps", "reportto", "wandbproject", "wandbentity", "wandbgroup",
    "wandbrunname",
})
NOT_PLAN_TOP = frozenset({"name", "project", "tags", "group", "resume"})
# Config names of the plan fields the report names on their own.
SEED = frozenset({"seed"})
REVISION = frozenset({"revision", "modelrevision", "basemodelrevision"})
BASE_MODEL = frozenset({"basemodel", "modelnameorpath"})
DATASET = frozenset({"dataset", "datasetname"})
# How a run divides its sequences per update.
SEQUENCES_PER_UPDATE = frozenset({"sequencesperupdate", "batchsize", "globalbatchsize",
                                  "trainbatchsize"})
DEVICES = frozenset({"devices", "numdevices", "ngpus", "numgpus", "worldsize"})
PER_PASS = frozenset({"microbatchsequences", "microbatchsize", "perdevicetrainbatchsize",
                      "sequencesperpass"})
ACCUMULATION = frozenset({"gradientaccumulationsteps", "gradaccum", "gradaccumsteps",
                          "gradientaccumulation", "accumulationsteps"})


class CompareError(ValueError):
    """Two runs this comparison cannot be made for; the message says why and what to do."""


class NotSupervised(CompareError):
    """A run that records no training loss at each step (a reinforcement run)."""


class PlansDiffer(CompareError):
    """Runs whose plans differ, compared without `across_plans`; `differences` lists each
    field as {"field", "run", "baseline"}."""

    def __init__(self, message: str, differences: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.differences = differences


@dataclass(frozen=True)
class Options:
    window: int = DEFAULT_WINDOW
    margin: float = DEFAULT_MARGIN
    spike_factor: float = DEFAULT_SPIKE_FACTOR
    across_plans: bool = False

    def __post_init__(self) -> None:
        if self.window < 1:
            raise CompareError(f"the window must be at least 1 step, got {self.window}")
        if not self.margin >= 0:
            raise CompareError(f"the margin must be 0 or more, got {self.margin}")
        if not self.spike_factor > 0:
            raise CompareError(f"the spike factor must be above 0, got {self.spike_factor}")


@dataclass(frozen=True)
class Series:
    """A metric's points in step order (steps strictly increasing), and its key."""

    key: str
    step: IntArray
    value: FloatArray


@dataclass(frozen=True)
class Side:
    """One of the two runs, as read from the index."""

    run_id: str
    name: str
    method: str | None
    base_model: str | None
    dataset: str | None
    config: Any  # the parsed config.yaml (usually a mapping), or None
    job_devices: int | None  # the devices its job asked for; None for a run started by hand
    loss: Series | None
    grad_norm: Series | None = None
    problems: list[str] = field(default_factory=list)


def side_of(row: Any, keys: Sequence[Any], job_devices: int | None,
            series_of: Callable[[Any], tuple[IntArray, FloatArray]]) -> Side:
    """A run as this module reads it: `row` is its runs row (run_id, name, method,
    base_model, dataset, config as YAML text), `keys` its metric keys (with `.key`), and
    `series_of(key)` reads a key's (steps, values)."""
    problems: list[str] = []
    config: Any = None
    if row.config:
        try:
            config = load_config(row.config)
        except ConfigError as exc:
            problems.append(f"run {row.name}'s {exc}; its settings are not compared")
        except yaml.YAMLError:
            problems.append(f"run {row.name}'s config.yaml is not YAML: its settings are "
                            "not compared")

    def series(key: Any) -> Series | None:
        if key is None:
            return None
        step, value = series_of(key)
        return Series(key.key, step, value)

    loss, grad_norm = compared_keys(keys)
    return Side(row.run_id, row.name, row.method, row.base_model, row.dataset, config,
                job_devices, series(loss), series(grad_norm), problems)


def read_side(db: Reader, row: Any, saved: SavedSeries) -> Side:
    """The run at `row` (its runs row: pk, run_id, name, method, base_model, dataset,
    config) as the comparison reads it from the index `db`, its series through `saved`
    (read from files saved beside a SQLite index while the index holds the same points,
    else from the index and saved). A reinforcement run's series are not read: the
    comparison refuses it for its method (on a cold index, whole reads of a long run)."""
    return _read_side(db, row, saved, *_to_read(db, row))


def read_sides(db: Reader, rows: Sequence[Any], saved: SavedSeries) -> list[Side]:
    """The runs at `rows`, each as `read_side` reads it; the series of the others that are
    read from the index are read meanwhile by processes of their own where
    `saved.read_ahead` can (store/plain_series), the same series either way."""
    plans = [_to_read(db, row) for row in rows]
    waits = [saved.read_ahead(db, row.pk, read)
             for row, (_, read) in zip(rows[1:], plans[1:], strict=True)
             if row.pk != rows[0].pk]
    sides = [_read_side(db, rows[0], saved, *plans[0])]
    for wait in waits:
        wait()
    return sides + [_read_side(db, row, saved, *plan)
                    for row, plan in zip(rows[1:], plans[1:], strict=True)]


def _to_read(db: Reader, row: Any) -> tuple[list[Any], list[Any]]:
    """A run's metric keys, and those of them whose series a comparison reads."""
    from runwatch.store import plain

    keys = plain.run_keys(db, row.pk)
    return keys, [] if (row.method or "").lower() in REINFORCEMENT else [
        k for k in compared_keys(keys) if k is not None]


def _read_side(db: Reader, row: Any, saved: SavedSeries, keys: list[Any], read: list[Any]
               ) -> Side:
    from runwatch.store import plain, plain_series

    series = saved.get(db, row.pk, read)

    def series_of(key: plain.Key) -> tuple[IntArray, FloatArray]:
        return series.get(key.id, plain_series.NO_POINTS)

    return side_of(row, keys, plain.job_devices(db, row.pk), series_of)


def compared_keys(keys: Sequence[Any]) -> tuple[Any, Any]:
    """Of a run's metric keys (with `.key`), its training loss and its gradient norm (each
    None when not logged): the series a comparison reads."""
    by_name = {k.key: k for k in keys}
    found = [find_key(by_name, role) for role in (Role.TRAIN_LOSS, Role.GRAD_NORM)]
    loss, grad_norm = (None if name is None else by_name[name] for name in found)
    return loss, grad_norm


def check_supervised(side: Side) -> None:
    """Raise NotSupervised unless `side` is a supervised run that logged a training loss."""
    family = (side.method or "").lower()
    if family in REINFORCEMENT:
        raise NotSupervised(
            f"run {side.name} is a reinforcement run ({side.method}): it records a reward at "
            "each step, not a training loss, so it cannot be compared; compare supervised "
            "runs (sft, dpo)")
    if side.loss is None or side.loss.step.size == 0:
        raise NotSupervised(f"run {side.name} logged no training loss (`loss`), so there is "
                            "nothing to compare; compare runs that log one")


# --- plans ---------------------------------------------------------------------------


def _norm(name: str) -> str:
    return re.sub(r"[_\-\s]", "", name).lower()


def _leaves(config: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of each leaf of a nested mapping, outer levels first."""
    if not isinstance(config, dict):
        if prefix or config is not None:
            yield prefix or "config", config
        return
    nested = []
    for k, v in config.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            nested.append((path, v))
        else:
            yield path, v
    for path, v in nested:
        yield from _leaves(v, path + ".")


class _Leaves:
    """A config's leaves; `take` hands out the first leaf with one of some names once."""

    def __init__(self, config: Any) -> None:
        self.items = list(_leaves(config))
        self.used: set[str] = set()

    def take(self, names: frozenset[str]) -> Any:
        for path, value in self.items:
            if path not in self.used and _norm(path.rsplit(".", 1)[-1]) in names:
                self.used.add(path)
                return value
        return None

    def rest(self) -> Iterator[tuple[str, Any]]:
        """The leaves not taken, but for those that only name, place or watch a run."""
        for path, value in self.items:
            last = _norm(path.rsplit(".", 1)[-1])
            top = "." not in path
            if path not in self.used and last not in NOT_PLAN and not (
                    top and last in NOT_PLAN_TOP):
                yield path, value


def _whole(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if float(value).is_integer() and value > 0 else None


def _division(leaves: _Leaves, job_devices: int | None) -> dict[str, int | None]:
    devices = _whole(leaves.take(DEVICES)) or job_devices or 1
    stated = _whole(leaves.take(ACCUMULATION))
    accumulation = stated or 1
    per_pass = _whole(leaves.take(PER_PASS))
    total = _whole(leaves.take(SEQUENCES_PER_UPDATE))
    if (stated is None and per_pass is not None and total is not None
            and total % (devices * per_pass) == 0):
        # a global batch of 8 in passes of 2 on one device accumulates 4 (the parts must
        # multiply to the total; accumulation 1 by default would not)
        accumulation = total // (devices * per_pass)
    if total is None and per_pass is not None:
        total = devices * per_pass * accumulation
    if per_pass is None and total is not None and total % (devices * accumulation) == 0:
        per_pass = total // (devices * accumulation)
    return {"devices": devices, "sequences_per_pass": per_pass, "accumulation": accumulation,
            "sequences_per_update": total}


def division(side: Side) -> dict[str, int | None]:
    """How a run divides its sequences per update: devices × sequences per pass ×
    accumulation steps. A part it does not state is derived from the others where it can
    be (accumulation too: the total over devices × sequences per pass); devices default to
    its job's, else 1, and accumulation to 1."""
    return _division(_Leaves(side.config), side.job_devices)


def plan(side: Side) -> dict[str, Any]:
    """The fields two runs must share to train the same rows at every step: the named
    ones, then each other config value as `config.<path>`."""
    leaves = _Leaves(side.config)
    out: dict[str, Any] = {
        "method": (side.method or "").lower() or None,
        "dataset": side.dataset if side.dataset is not None else leaves.take(DATASET),
        "seed": leaves.take(SEED),
        "base_model": (side.base_model if side.base_model is not None
                       else leaves.take(BASE_MODEL)),
        "base_model_revision": leaves.take(REVISION),
        "sequences_per_update": _division(leaves, side.job_devices)["sequences_per_update"],
    }
    for path, value in leaves.rest():
        out[f"config.{path}"] = value
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True  # two NaN settings are alike
    return bool(a == b)


def plan_differences(run: Side, baseline: Side) -> list[dict[str, Any]]:
    """Each plan field the two runs set differently (or only one sets). Where either's
    sequences per update are unknown, a different division counts as a difference too,
    since the two may not train the same rows."""
    a, b = plan(run), plan(baseline)
    out = [{"field": name, "run": a.get(name), "baseline": b.get(name)}
           for name in list(a) + [k for k in b if k not in a]
           if not _same(a.get(name), b.get(name))]
    if a["sequences_per_update"] is None or b["sequences_per_update"] is None:
        da, db = division(run), division(baseline)
        out += [{"field": part, "run": da[part], "baseline": db[part]}
                for part in ("devices", "sequences_per_pass", "accumulation")
                if da[part] != db[part]]
    return out


# --- the comparison ------------------------------------------------------------------


def _median(values: FloatArray) -> float:
    """The median of finite values (np.median would import numpy.ma for its NaN check,
    a third of a second of a CLI command's start)."""
    half = values.size // 2
    if values.size % 2:
        return float(np.partition(values, half)[half])
    low, high = np.partition(values, (half - 1, half))[half - 1: half + 1]
    return float((low + high) / 2)


def _union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted distinct values of both arrays: np.union1d's result without its import
    of numpy.ma (a noticeable share of the CLI command's start-up)."""
    both = np.sort(np.concatenate((a, b)))
    return both[np.concatenate(([True], both[1:] != both[:-1]))] if both.size else both


def _spikes(series: Series | None, factor: float) -> tuple[float | None, IntArray]:
    """The median of a run's finite gradient norms and the steps above `factor` × it."""
    if series is None:
        return None, np.zeros(0, dtype=np.int64)
    finite = series.value[np.isfinite(series.value)]
    if finite.size == 0:
        return None, np.zeros(0, dtype=np.int64)
    median = _median(finite)
    if median <= 0:
        return median, np.zeros(0, dtype=np.int64)
    with np.errstate(invalid="ignore"):
        return median, series.step[series.value > factor * median]


def _window_means(values: FloatArray, w: int) -> list[float]:
    """Means of `values` over consecutive windows of `w`, the last one shorter if need be."""
    full = values.size // w
    out = values[: full * w].reshape(full, w).mean(axis=1).tolist() if full else []
    return out + ([float(values[full * w:].mean())] if values.size > full * w else [])


def _value_at(series: Series | None, steps: IntArray) -> list[float | None]:
    """`series`'s value at each of `steps` (None where it logged none)."""
    if series is None or series.step.size == 0:
        return [None] * int(steps.size)
    at = np.searchsorted(series.step, steps).clip(0, series.step.size - 1)
    hit = series.step[at] == steps
    return [float(v) if h else None for v, h in zip(series.value[at].tolist(), hit.tolist(),
                                                   strict=True)]


def _side_json(side: Side, median: float | None) -> dict[str, Any]:
    return {"run_id": side.run_id, "name": side.name, "method": side.method,
            "loss_key": side.loss.key if side.loss else None,
            "grad_norm_key": side.grad_norm.key if side.grad_norm else None,
            "loss_steps": int(side.loss.step.size) if side.loss else 0,
            "grad_norm_median": median, "division": division(side)}


def _nothing_shared(run: Side, baseline: Side, non_finite: int) -> str:
    """Why two runs have no step to compare: the steps each logged its loss at, and how
    many shared steps a NaN or infinite loss left out."""
    def logged(side: Side) -> str:
        assert side.loss is not None
        steps = side.loss.step
        return (f"{side.name} logged no training loss" if not steps.size else
                f"{side.name} logged it at steps {int(steps.min())}-{int(steps.max())}")
    why = (f"all {non_finite} steps both logged hold a NaN or infinite loss" if non_finite
           else f"{logged(run)}, {logged(baseline)}")
    return (f"runs {run.name} and {baseline.name} share no step where both logged a finite "
            f"training loss ({why}), so there is nothing to compare")


def compare(run: Side, baseline: Side, options: Options = Options()) -> dict[str, Any]:
    """The report of `run`'s training loss against `baseline`'s (difference = run −
    baseline, so a positive mean means the run's loss is higher).

    Raises NotSupervised for a run with no training loss (a reinforcement run),
    PlansDiffer for runs whose plans differ, unless `options.across_plans`, and
    CompareError for a run compared with itself and for runs that share no step with a
    finite loss (a report of no window would read as "no difference")."""
    if run.run_id == baseline.run_id:
        raise CompareError(f"run {run.name} is its own baseline, so nothing differs: "
                           "compare it with another run")
    for side in (run, baseline):
        check_supervised(side)
    differences = plan_differences(run, baseline)
    if differences and not options.across_plans:
        fields = ", ".join(d["field"] for d in differences)
        raise PlansDiffer(
            f"runs {run.name} and {baseline.name} follow different plans ({fields}): their "
            "loss differs because of their plans as well as what they learned", differences)
    assert run.loss is not None and baseline.loss is not None  # check_supervised
    steps, ia, ib = np.intersect1d(run.loss.step, baseline.loss.step, assume_unique=True,
                                   return_indices=True)
    diff = run.loss.value[ia] - baseline.loss.value[ib]
    finite = np.isfinite(diff)
    skipped = steps[~finite]
    steps, diff = steps[finite], diff[finite]
    if not steps.size:
        raise CompareError(_nothing_shared(run, baseline, skipped.size))

    w = options.window
    full = diff.size // w
    means = diff[: full * w].reshape(full, w).mean(axis=1)
    firsts = steps[0: full * w: w]
    lasts = steps[w - 1: full * w: w]
    rest = diff.size - full * w

    med_run, spike_run = _spikes(run.grad_norm, options.spike_factor)
    med_base, spike_base = _spikes(baseline.grad_norm, options.spike_factor)
    spike_steps = _union(spike_run, spike_base)

    bounds_lo = np.append(firsts, steps[full * w]) if rest else firsts
    bounds_hi = np.append(lasts, steps[-1]) if rest else lasts
    per_window = (np.searchsorted(spike_steps, bounds_hi, side="right")
                  - np.searchsorted(spike_steps, bounds_lo, side="left"))
    mean_list = _window_means(diff, w)
    counts = [w] * full + ([rest] if rest else [])
    loss_a = _window_means(run.loss.value[ia][finite], w)
    loss_b = _window_means(baseline.loss.value[ib][finite], w)
    windows = [{"first_step": a, "last_step": b, "steps": n, "full": n == w,
                "run_loss": la, "baseline_loss": lb, "mean_diff": m, "spikes": s}
               for a, b, n, la, lb, m, s in zip(
                   bounds_lo.tolist(), bounds_hi.tolist(), counts, loss_a, loss_b, mean_list,
                   per_window.tolist(), strict=True)]

    over = np.flatnonzero(np.abs(means) > options.margin)
    reported = None
    if over.size:
        i = int(over[0])
        reported = {"index": i, **windows[i],
                    "direction": "higher" if means[i] > 0 else "lower"}

    in_run = np.isin(spike_steps, spike_run)
    in_base = np.isin(spike_steps, spike_base)
    spikes = [{"step": s, "run": a, "baseline": b,
               "spiked": [n for n, hit in (("run", r), ("baseline", q)) if hit]}
              for s, a, b, r, q in zip(spike_steps.tolist(), _value_at(run.grad_norm,
                                                                      spike_steps),
                                       _value_at(baseline.grad_norm, spike_steps),
                                       in_run.tolist(), in_base.tolist(), strict=True)]

    div_run, div_base = division(run), division(baseline)
    return {
        "run": _side_json(run, med_run),
        "baseline": _side_json(baseline, med_base),
        "options": {"window": w, "margin": options.margin,
                    "spike_factor": options.spike_factor,
                    "across_plans": options.across_plans},
        "plan": {
            "same": not differences,
            "differences": differences,
            # only how they divide the same sequences per update differs
            "divided_differently": not differences and div_run != div_base,
        },
        "compared_steps": int(steps.size),
        "first_step": int(steps[0]) if steps.size else None,
        "last_step": int(steps[-1]) if steps.size else None,
        "nonfinite_steps": skipped.tolist(),
        "problems": run.problems + baseline.problems,
        "windows": windows,
        "spikes": spikes,
        "reported": reported,
    }
