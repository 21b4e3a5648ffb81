"""The cost per step of RunwatchCallback against W&B's own Trainer callback
(`report_to="wandb"`, WANDB_MODE=offline) on the same tiny `Trainer` run.

One process trains a tiny GPT-2 (2 layers, vocab 64, random weights) with the real
`Trainer`, logging every step, three ways in turn: no reporting (the baseline), with
RunwatchCallback, with W&B's callback. Each callback's event methods are timed in place
(perf_counter around every call the Trainer makes), so "per step" is the time the
training thread spends in that callback, divided by the steps; train begin and end
(run start, final flush) are shown apart. The wall time of each whole run against the
baseline is shown too (noisy on a shared machine: the training step dominates it).

    .venv/bin/python bench/bench_callback.py [--steps 100] [--repeat 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")

import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from runwatch.compat.hf import RunwatchCallback

SETUP_EVENTS = ("on_train_begin", "on_train_end", "on_init_end")


def tiny_trainer(out: Path, steps: int, report_to: str,
                 callbacks: list[TrainerCallback]) -> Trainer:
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2,
                                       n_head=2, bos_token_id=0, eos_token_id=0))
    rows = [{"input_ids": ids, "labels": ids}
            for ids in ([(i * 7 + j) % 64 for j in range(16)] for i in range(64))]
    args = TrainingArguments(output_dir=str(out), max_steps=steps, logging_steps=1,
                             per_device_train_batch_size=4, save_strategy="no",
                             report_to=report_to, use_cpu=True, disable_tqdm=True,
                             run_name="bench-callback")
    return Trainer(model=model, args=args, train_dataset=rows, callbacks=callbacks)


def timed(callback: TrainerCallback, spent: dict[str, float]) -> None:
    """Time every event method of `callback` in place (the Trainer looks them up by name)."""
    for name in dir(type(callback)):
        if name.startswith("on_"):
            method = getattr(callback, name)
            setattr(callback, name, _timer(method, name, spent))


def _timer(method: Callable[..., Any], name: str,
           spent: dict[str, float]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - start
    return call


def one_run(kind: str, work: Path, steps: int) -> dict[str, float]:
    out = work / kind
    spent: dict[str, float] = {}
    callbacks: list[TrainerCallback] = []
    if kind == "runwatch":
        callbacks.append(RunwatchCallback(name=f"bench-{time.time_ns()}", dir=work / "runs"))
    trainer = tiny_trainer(out, steps, "wandb" if kind == "wandb" else "none", callbacks)
    if kind != "baseline":
        name = "RunwatchCallback" if kind == "runwatch" else "WandbCallback"
        target = next(cb for cb in trainer.callback_handler.callbacks
                      if type(cb).__name__ == name)
        timed(target, spent)
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    if kind == "wandb":
        import wandb  # W&B's callback leaves its run open; the next repeat starts afresh

        wandb.finish()
    per_step = sum(v for k, v in spent.items() if k not in SETUP_EVENTS)
    setup = sum(v for k, v in spent.items() if k in SETUP_EVENTS)
    return {"wall_s": wall, "per_step_us": per_step / steps * 1e6, "setup_s": setup}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("build/bench/callback.json"))
    opts = parser.parse_args()
    kinds = ("baseline", "runwatch", "wandb")
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("WANDB_DIR", tmp)
        for _ in range(opts.repeat):
            for kind in kinds:
                runs[kind].append(one_run(kind, Path(tmp), opts.steps))
    med = {k: {f: statistics.median(r[f] for r in runs[k]) for f in runs[k][0]} for k in kinds}
    base = med["baseline"]["wall_s"]
    print(f"{opts.steps} steps, logging every step, median of {opts.repeat}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'':10} {'in callback / step':>19} {'begin+end':>10} {'wall':>8} "
          f"{'wall − baseline / step':>23}")
    for kind in kinds:
        m = med[kind]
        extra = (m["wall_s"] - base) / opts.steps * 1e3
        print(f"{kind:10} {m['per_step_us']:16.1f} µs {m['setup_s']:8.3f} s "
              f"{m['wall_s']:6.2f} s {extra:20.2f} ms")
    ratio = med["runwatch"]["per_step_us"] / med["wandb"]["per_step_us"]
    print(f"runwatch / W&B, time in the callback per step: {ratio:.3f}")
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps({"steps": opts.steps, "repeat": opts.repeat, "runs": runs,
                                    "median": med, "ratio_per_step": ratio}, indent=1))


if __name__ == "__main__":
    main()
