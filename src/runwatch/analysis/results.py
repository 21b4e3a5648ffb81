"""A run's results, tiles and cost, computed from its keys, series, cost and settings.

Which key is the train loss, the eval loss, the reward and so on comes from the metric
vocabulary (`runwatch.metrics`), so a run that logs `train/loss` or `eval_loss` gets
the same results as one that logs `loss` and `val/loss`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from runwatch.jobs.cost import Cost
from runwatch.metrics import Role, describe, find_key, names
from runwatch.store.keys import KeyInfo

# The values of one key's series, in step order, with superseded points removed.
SeriesValues = Callable[[KeyInfo], npt.NDArray[np.float64]]

# Results: the last value of the key that plays each role, by result name.
RESULT_ROLES = {
    "train_loss": Role.TRAIN_LOSS,
    "val_loss": Role.EVAL_LOSS,
    "val_accuracy": Role.VAL_ACCURACY,
    "accuracy": Role.ACCURACY,
    "reward_mean": Role.REWARD,
    "val_reward_mean": Role.VAL_REWARD,
    "val_preference_accuracy": Role.VAL_PREFERENCE_ACCURACY,
    "val_mean_margin": Role.VAL_MARGIN,
}


def finite(value: float | None) -> float | None:
    """The value, or None when it is missing, NaN or infinite."""
    return value if value is not None and math.isfinite(value) else None


def _role_key(by_key: Mapping[str, KeyInfo], role: Role) -> KeyInfo | None:
    found = find_key(by_key, role)
    return None if found is None else by_key[found]


def _named_key(keys: Sequence[KeyInfo], name: str) -> KeyInfo | None:
    """The key that is the canonical metric `name` as logged (a catalogue metric with no
    role, such as `reward_std`): the canonical name itself first, then an alias."""
    found = [k for k in keys if describe(k.key).canonical == name
             and describe(k.key).transform is None]
    return next((k for k in found if k.key == name), found[0] if found else None)


def _latest(info: KeyInfo | None) -> float | None:
    """A key's last logged value as logged, NaN and ±Infinity included (the index stores
    a NaN as NULL: a key with points and a NULL last value last logged NaN); None when
    the run logs no such key. A run that diverged reads NaN, not "not logged", and the
    API sends a non-finite value as null (docs/api.md)."""
    if info is None or info.points == 0:
        return None
    return math.nan if info.last_value is None else info.last_value


def _series_stat(info: KeyInfo | None, values: SeriesValues, how: str) -> float | None:
    """The minimum, maximum or sum of a key's finite values (None when it has none)."""
    if info is None:
        return None
    # the server's values answer from step summaries without reading the whole series
    stat = getattr(values, "stat", None)
    if stat is not None:
        found: float | None = stat(info, how)
        return found
    arr = values(info)
    fin = arr[np.isfinite(arr)]
    if not fin.size:
        return None
    return float(fin.min() if how == "min" else fin.max() if how == "max" else fin.sum())


def running_total(values: npt.NDArray[np.float64]) -> bool:
    """Whether a count's values are a running total (TRL's `num_tokens`) rather than the
    count of each step: never falling, and rising at 90% or more of its steps (the web
    app's tokens axis reads a series the same way: web/src/charts.ts isRunningTotal)."""
    fin = values[np.isfinite(values)]
    if fin.size < 3:
        return False
    steps = np.diff(fin)
    return bool((steps >= 0).all() and (steps > 0).sum() >= 0.9 * (fin.size - 1))


def _count(info: KeyInfo | None, values: SeriesValues) -> float | None:
    """A count's total over the run: the sum of its per-step values, or the last value of
    a running total. The series is read only when its last value is its greatest and not
    its least, as a running total's is (one that never changes never rises)."""
    total = _series_stat(info, values, "sum")
    if info is None or total is None or info.last_value is None:
        return total
    if info.last_value != _series_stat(info, values, "max"):
        return total
    if info.last_value == _series_stat(info, values, "min"):
        return total
    return finite(info.last_value) if running_total(values(info)) else total


def find_setting(config: Any, names_: Sequence[str]) -> Any:
    """The first numeric setting named one of `names_` anywhere in a nested config mapping."""
    if isinstance(config, dict):
        for k, v in config.items():
            if k in names_ and isinstance(v, int | float):
                return v
        for v in config.values():
            found = find_setting(v, names_)
            if found is not None:
                return found
    return None


def scalars(keys: Sequence[KeyInfo], values: SeriesValues, config: Any,
            observed_step: int | None) -> dict[str, Any]:
    """The run's tiles: steps, examples, tokens, grad accumulation and the headline values
    (the web app shows the loss tiles for SFT and DPO, the reward tiles for GRPO, whose
    training loss is no progress signal, and the preference tiles for DPO)."""
    by_key = {k.key: k for k in keys}
    train = _role_key(by_key, Role.TRAIN_LOSS)
    reward = _role_key(by_key, Role.REWARD)
    steps = observed_step
    if steps is None and keys:
        steps = max((k.last_step for k in keys if k.last_step is not None), default=None)
    tiles: dict[str, Any] = {
        "steps": steps,
        "examples": _count(_role_key(by_key, Role.EXAMPLES), values),
        "tokens": _count(_role_key(by_key, Role.TOKENS), values),
        "grad_accum": find_setting(config, names(Role.GRAD_ACCUM)),
        "best_train_loss": _series_stat(train, values, "min"),
        "latest_train_loss": _latest(train),
        "eval_loss": _latest(_role_key(by_key, Role.EVAL_LOSS)),
        "mean_reward": _latest(reward),
        "best_mean_reward": _series_stat(reward, values, "max"),
        "reward_std": _latest(_named_key(keys, "reward_std")),
        "val_reward": _latest(_role_key(by_key, Role.VAL_REWARD)),
        "val_accuracy": _latest(_role_key(by_key, Role.VAL_ACCURACY)),
        "preference_accuracy": _latest(_role_key(by_key, Role.PREFERENCE_ACCURACY)),
        "margin": _latest(_role_key(by_key, Role.MARGIN)),
        "val_preference_accuracy": _latest(_role_key(by_key, Role.VAL_PREFERENCE_ACCURACY)),
        "val_margin": _latest(_role_key(by_key, Role.VAL_MARGIN)),
    }
    # the API sends a non-finite value as null, like one never logged: these say which
    # were logged (a loss gone NaN is shown as NaN, not left out)
    tiles["non_finite"] = [name for name, value in tiles.items()
                           if isinstance(value, float) and not math.isfinite(value)]
    return tiles


def results(keys: Sequence[KeyInfo], best_train_loss: float | None,
            checkpoints: Sequence[Any]) -> dict[str, Any]:
    """The run's results: the last value of each result metric it logs, its best train
    loss and its registered (inference) checkpoint; then, where any of them is NaN or
    infinite, `non_finite` naming them (the API sends such a value as null, like one that
    is not known: a client reads it back as NaN from this list, `runwatch runs get
    --server` among them)."""
    by_key = {k.key: k for k in keys}
    out: dict[str, Any] = {}
    for name, role in RESULT_ROLES.items():
        info = _role_key(by_key, role)
        if info is not None:
            out[name] = _latest(info)
    out["best_train_loss"] = best_train_loss
    out["registered_model"] = next((c.ckpt_id for c in reversed(checkpoints)
                                    if c.kind == "inference"), None)
    non_finite = [name for name, value in out.items()
                  if isinstance(value, float) and not math.isfinite(value)]
    if non_finite:  # only then: every other entry is a result a table lists
        out["non_finite"] = non_finite
    return out


def cost(run_cost: Cost, keys: Sequence[KeyInfo], values: SeriesValues,
         duration_s: float | None) -> dict[str, Any]:
    """What the run used: its training duration, queue wait, device time and spend over
    all attempts (an estimate until it ends), its last step time, the peak of each
    memory part it logged (`memory/<part>_bytes`: the recipes log the parts of their one
    device's step with the most memory) and its data fit (the last value of each
    `data_fit/<count>` it logged: how its rows fitted max_seq_length)."""
    by_key = {k.key: k for k in keys}
    step_time = _role_key(by_key, Role.STEP_TIME)
    figures = {k: v for k, v in run_cost.as_dict().items() if k not in ("timing", "attempts")}
    return {
        "duration_s": duration_s,
        **figures,
        "last_step_time_s": _latest(step_time),
        "peak_memory_bytes": {k.key.split("/", 1)[1]: _series_stat(k, values, "max")
                              for k in keys if k.key.startswith("memory/")},
        "data_fit": {k.key.split("/", 1)[1]: _latest(k)
                     for k in keys if k.key.startswith("data_fit/")},
    }
