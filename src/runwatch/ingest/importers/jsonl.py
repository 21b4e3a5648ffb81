"""Import a verl, tinker-cookbook or LLaMA-Factory JSON-lines log (one object per step).

tinker-cookbook writes `{"step": …, metric: …}`; verl's file logger writes `{"step": …,
"data": {metric: …}}`; LLaMA-Factory's `trainer_log.jsonl` counts its steps in
`current_steps` (with `total_steps`, `percentage` and the times `elapsed_time` and
`remaining_time` beside them, which are not metrics; its log has no dates, and is timed by
its `elapsed_time`, the time since the run started). All are read; NaN and Infinity tokens
are kept. A line whose `split` (or `mode`) says it is held out (`val`, `eval`, `test`, …)
has its metrics under `val/` names, so a loop that logs training and validation rows under
one set of names keeps them apart. A line without a step counts as the next line number; a
step the run format does not take (negative, fractional, text) is refused, naming the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runwatch.ingest.importers import trl
from runwatch.ingest.importers.common import (
    Imported,
    as_held_out,
    checked_step,
    clock_seconds,
    elapsed_clock,
    held_out,
    json_rows,
    numeric_items,
    read_bytes,
)

SKIP = frozenset({"step", "ts", "seq"})
# LLaMA-Factory's progress fields: its step, and where it stands in the plan
LLAMA_FACTORY = frozenset({"current_steps", "total_steps", "percentage"})
# and its clock: the time since the run started, as `H:MM:SS`
FACTORY_ELAPSED = "elapsed_time"


def guess(keys: set[str]) -> tuple[str, str]:
    """(trainer, method) from the metric names."""
    if any(k.startswith(("actor/", "critic/", "val-core/", "response_length/")) for k in keys):
        return "verl", "grpo"
    if any(k.startswith(("env/", "test/env/")) for k in keys):
        return "tinker-cookbook", "grpo"
    if any(k.startswith(("optim/", "progress/", "time/")) for k in keys):
        return "tinker-cookbook", "sft"
    if "current_steps" in keys:
        return "llama-factory", "sft"
    # a method's telltale keys first (a DPO or GRPO log has a `loss` too), then a loss
    # alone is supervised
    method = trl.guess_method(keys)
    return "jsonl", method if method != "sft" else "sft" if "loss" in keys else "grpo"


def read(path: Path) -> Imported:
    records: list[dict[str, Any]] = []
    elapsed: dict[int, float] = {}  # step -> LLaMA-Factory's elapsed_time, in seconds
    factory = False
    for number, obj in json_rows(path, read_bytes(path)):
        where = f"{path}: line {number}"
        nested = obj.get("data")
        data: dict[str, Any] = nested if isinstance(nested, dict) else obj
        step = obj.get("step", data.get("progress/batch", data.get("current_steps")))
        factory = factory or "current_steps" in data
        if isinstance(step, float) and step.is_integer():
            step = int(step)  # 12.0: a logger that writes every number as a float
        # a line without a step counts lines; one with a step the run format does not take
        # is refused, as the indexer would skip it
        step = len(records) if step is None else checked_step(
            step, where, "fix or delete that line")
        values = numeric_items(data, SKIP | LLAMA_FACTORY if factory else SKIP)
        if held_out(data) or held_out(obj):
            values = as_held_out(values, where)
        rec: dict[str, Any] = {"step": step, **values}
        if isinstance(obj.get("ts"), int | float):
            rec["ts"] = float(obj["ts"])
        took = clock_seconds(data.get(FACTORY_ELAPSED)) if factory else None
        if took is not None:
            elapsed[step] = max(took, elapsed.get(step, took))
        records.append(rec)
    keys = {k for r in records for k in r}
    trainer, method = ("llama-factory", _factory_method(keys)) if factory else guess(keys)
    times = elapsed_clock(records, elapsed, FACTORY_ELAPSED) if elapsed else None
    return Imported(trainer, method, records, {}, str(path), times=times)


def _factory_method(keys: set[str]) -> str:
    """LLaMA-Factory writes one trainer_log.jsonl for every stage: a PPO run's has `reward`,
    a DPO/KTO run's `accuracy` (its rewards/accuracies), a supervised run's neither."""
    return "grpo" if "reward" in keys else "dpo" if "accuracy" in keys else "sft"
