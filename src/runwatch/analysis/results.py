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
from runwatch.metrics import METRICS, Role, describe, find_key, names
from runwatch.rundir.format import TRAINING_PHASES
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


# The memory key whose peak says what held the device at the step that held the most.
MEMORY_TOTAL = "memory/total_bytes"
# A memory key that is no part of the device's step: the process's own peak (host memory).
PROCESS_PEAK = "memory/process_peak_rss_bytes"
_CATALOGUE_ORDER = {m.name: i for i, m in enumerate(METRICS)}


def training_s(phase_millis: Mapping[str, float]) -> float | None:
    """A run's training time over all its attempts, from its time in each phase summed
    over them (`timing.phaseMillis`): the seconds in TRAINING_PHASES; None when it holds
    none of them (the run never trained, or when it did is a time no date can show)."""
    found = [phase_millis[p] for p in TRAINING_PHASES if p in phase_millis]
    return sum(found) / 1000 if found else None


def cost(run_cost: Cost, keys: Sequence[KeyInfo], values: SeriesValues,
         duration_s: float | None) -> dict[str, Any]:
    """What the run used: its training duration, queue wait, device time and spend over
    all attempts (an estimate until it ends), its last step time, its memory at its peak
    (`peak_memory`) and its data fit (`data_fit`)."""
    by_key = {k.key: k for k in keys}
    step_time = _role_key(by_key, Role.STEP_TIME)
    figures = {k: v for k, v in run_cost.as_dict().items() if k not in ("timing", "attempts")}
    return {
        "duration_s": duration_s,
        **figures,
        "last_step_time_s": _latest(step_time),
        "peak_memory_bytes": peak_memory(keys, values),
        "data_fit": data_fit(keys, values),
    }


def peak_memory(keys: Sequence[KeyInfo], values: SeriesValues) -> dict[str, float | None]:
    """What held the device at the peak of the step that held the most, by part
    (`memory/<part>_bytes` without its prefix): the total first, then the parts logged at
    the step where `memory/total_bytes` peaked, never a part's value from another step
    (one that peaked elsewhere would not add up to the total shown). A run that logs no
    total says nothing of which parts were held together: each part is then its own peak.
    `process_peak_rss_bytes`, the process's host memory, is its own peak either way."""
    mem = sorted((k for k in keys if k.key.startswith("memory/")), key=_memory_order)
    total = next((k for k in mem if k.key == MEMORY_TOTAL), None)
    parts = [k for k in mem if k.key != PROCESS_PEAK]
    found = (_at_peak(total, parts, values) if total is not None
             else {k.key: _series_stat(k, values, "max") for k in parts})
    found.update({k.key: _series_stat(k, values, "max") for k in mem if k.key == PROCESS_PEAK})
    return {key.split("/", 1)[1]: value for key, value in found.items()}


def _memory_order(info: KeyInfo) -> tuple[int, int, str]:
    """The total first, then the parts in the catalogue's order (weights, adapter, ...),
    any other part by name, and the process's own peak last."""
    rank = 0 if info.key == MEMORY_TOTAL else 2 if info.key == PROCESS_PEAK else 1
    return rank, _CATALOGUE_ORDER.get(info.key, len(_CATALOGUE_ORDER)), info.key


def _at_peak(total: KeyInfo, parts: Sequence[KeyInfo], values: SeriesValues
             ) -> dict[str, float | None]:
    """Each of `parts` (the total among them) at the step where the total peaked. The
    recipes log memory only on a step that sets a new peak, so the total's last record is
    usually its peak, and the parts logged with it are those whose last record has its
    step: nothing is read. Otherwise (a resumed attempt whose peak was lower, or a loop
    that logs memory every step) the series are read: a part logged in every record the
    total was (its series as long, ending at the same step) is read at the total's peak;
    any other is left out, since at which step its values were logged is not known here."""
    peak = _series_stat(total, values, "max")
    if peak is None:
        return {total.key: None}
    if total.last_value == peak:
        return {k.key: finite(k.last_value) for k in parts if k.last_step == total.last_step}
    total_values = values(total)
    at = int(np.where(np.isfinite(total_values), total_values, -np.inf).argmax())
    found: dict[str, float | None] = {}
    for k in parts:
        part_values = total_values if k is total else values(k)
        if part_values.size == total_values.size and k.last_step == total.last_step:
            found[k.key] = finite(float(part_values[at]))
    return found


def data_fit(keys: Sequence[KeyInfo], values: SeriesValues) -> dict[str, float | None]:
    """How a supervised run's rows fitted max_seq_length: the last value of each
    `data_fit/<count>` it logged, in the catalogue's order (`rows`, `rows_at_max_length`,
    `rows_lost_target_end`, `rows_dropped_empty`); then `padding_fraction`, the share of
    its batches that was padding, where it logs the metric `padding_fraction` (the SFT and
    DPO recipes do, each step's share) and no `data_fit/padding_fraction` of its own: the
    mean of the steps' shares (no step's token count is logged to weigh them by)."""
    logged = sorted((k for k in keys if k.key.startswith("data_fit/")),
                    key=lambda k: (_CATALOGUE_ORDER.get(k.key, len(_CATALOGUE_ORDER)), k.key))
    fit = {k.key.split("/", 1)[1]: _latest(k) for k in logged}
    padding = _named_key(keys, "padding_fraction")
    if padding is not None and "padding_fraction" not in fit:
        padding_values = values(padding)
        shares = padding_values[np.isfinite(padding_values)]
        fit["padding_fraction"] = float(shares.mean()) if shares.size else None
    return fit
