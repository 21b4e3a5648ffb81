"""Import a Hugging Face / TRL `trainer_state.json` (its `log_history`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runwatch.ingest.importers.common import (
    Imported,
    SourceError,
    checked_step,
    is_number,
    numeric_items,
)

# Top-level fields of trainer_state.json worth keeping as the run's config.
CONFIG_FIELDS = ("train_batch_size", "max_steps", "num_train_epochs", "logging_steps",
                 "eval_steps", "save_steps")
# The end-of-training summary entry repeats totals that are not per-step metrics.
SUMMARY_KEYS = frozenset({"train_runtime", "train_samples_per_second",
                          "train_steps_per_second", "total_flos", "train_loss"})
SKIP = frozenset({"step"})


def guess_method(keys: set[str]) -> str:
    """DPO logs chosen/rejected rewards, GRPO logs sampled rewards; otherwise SFT."""
    if keys & {"rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies"}:
        return "dpo"
    if keys & {"reward", "frac_reward_zero_std", "completion_length",
               "completions/mean_length", "reward_std"}:
        return "grpo"
    return "sft"


def read(path: Path) -> Imported:
    try:
        # Python's json reads the NaN/Infinity tokens HF writes for diverged values.
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SourceError(f"cannot read {path} as JSON: {exc}") from exc
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise SourceError(f"{path} has no log_history: is it a trainer_state.json?")
    records: list[dict[str, Any]] = []
    for index, entry in enumerate(history):
        if not isinstance(entry, dict) or not isinstance(entry.get("step"), int):
            continue
        step = checked_step(entry["step"], f"{path}: log_history[{index}]",
                            "fix or delete that entry")
        values = numeric_items(entry, SKIP)
        if SUMMARY_KEYS & values.keys():
            values = {k: v for k, v in values.items() if k not in SUMMARY_KEYS and k != "epoch"}
        if not values:
            continue
        # Training and evaluation entries of one step become one record.
        if records and records[-1]["step"] == step and \
                not (records[-1].keys() & values.keys()) - {"epoch"}:
            records[-1].update(values)
        else:
            records.append({"step": step, **values})
    keys = {k for r in records for k in r}
    config = {k: state[k] for k in CONFIG_FIELDS if is_number(state.get(k))}
    return Imported("trl", guess_method(keys), records, config, str(path))
