"""Benchmark of the health engine: every rule on 100,000 steps × 50 metrics, then the
incremental update for one new step, in memory and through the SQLite store.

Run with `python bench/bench_health.py [--steps N] [--repeat N]` (part of `make bench`, at the
defaults). Targets: full evaluation ≤ 2 s, one-step update ≤ 5 ms.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import insert

from runwatch.health import store as health_store
from runwatch.health.engine import Engine
from runwatch.store import schema as s
from runwatch.store.db import open_engine
from runwatch.store.points import PointColumns

STEPS = 100_000
VAL_EVERY = 10
REPEAT = 3
SETTINGS = {"max_sample_tokens": 1024.0, "max_sampling_attempts": 4.0, "batch_size": 32.0,
            "max_steps_off_policy": 2.0, "groups_in_flight": 8.0}

# Healthy levels and noise of the metrics the GRPO rules read, plus filler to 50.
LEVELS: dict[str, tuple[float, float]] = {
    "fb/loss/ratio/mean": (1.0, 0.01), "fb/loss/kl_policy/mean": (0.001, 0.0002),
    "fb/loss/kl_ref/mean": (0.01, 0.002), "fb/loss/clip/high_fraction": (0.01, 0.003),
    "fb/loss/clip/low_fraction": (0.01, 0.003), "fb/loss/aggregate/active_fraction": (0.6, 0.02),
    "accuracy": (0.5, 0.05), "reward_mean": (0.5, 0.05), "zero_variance_skip_ratio": (0.2, 0.05),
    "identical_nonzero_reward_skip_ratio": (0.05, 0.02), "truncated_ratio": (0.05, 0.02),
    "mean_sampled_response_length": (400.0, 40.0), "mean_response_budget": (1000.0, 10.0),
    "post_budget_clip_ratio": (0.0, 0.001), "mean_overlong_penalty": (-0.01, 0.005),
    "completion_advantage_std": (0.5, 0.05), "mean_logprob": (-0.5, 0.02),
    "dynamic_sampling/attempts": (1.0, 0.0), "dynamic_sampling/kept_groups": (32.0, 0.0),
    "terminated_ratio": (0.9, 0.02), "parse_failure_ratio": (0.01, 0.005),
    "context_overflow_ratio": (0.01, 0.005), "async/accepted_groups": (32.0, 0.0),
    "async/dropped_stale_groups": (0.0, 0.0), "async/dropped_zero_variance_groups": (2.0, 1.0),
    "async/staleness_max": (1.0, 0.0), "async/train_wait_s": (0.1, 0.05),
    "async/queue_depth": (3.0, 1.0), "policy/target_weights_version": (0.0, 0.0),
    "policy/applied_weights_version": (0.0, 0.0), "policy/trainer_step": (0.0, 0.0),
    "grad_norm": (1.0, 0.2), "grad_clip_factor": (1.0, 0.0), "update_ratio": (0.001, 0.0002),
}
FILLER = [f"timing/phase_{i}_s" for i in range(50 - len(LEVELS))]
VALIDATION = {"val/accuracy": (0.6, 0.01), "val/reward_mean": (0.6, 0.01),
              "val/mean_response_length": (400.0, 5.0)}


def series(rng: random.Random, steps: list[int], level: float, noise: float,
           name: str) -> list[float]:
    if name.startswith("policy/"):
        return [float(s) for s in steps]  # versions advance with the trainer
    return [level + rng.gauss(0.0, noise) if noise else level for _ in steps]


def make_batch(rng: random.Random, first: int, count: int) -> dict[str, PointColumns]:
    steps = list(range(first, first + count))
    ts = [1.0e9 + 5.0 * st for st in steps]
    batch: dict[str, PointColumns] = {}
    for name, (level, noise) in LEVELS.items():
        batch[name] = PointColumns(steps, steps, ts, series(rng, steps, level, noise, name))
    for name in FILLER:
        batch[name] = PointColumns(steps, steps, ts, [rng.random() for _ in steps])
    vsteps = [st for st in steps if st % VAL_EVERY == 0]
    vts = [1.0e9 + 5.0 * st for st in vsteps]
    for name, (level, noise) in VALIDATION.items():
        batch[name] = PointColumns(vsteps, vsteps, vts, series(rng, vsteps, level, noise, name))
    return batch


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=STEPS, help="steps of the full evaluation")
    p.add_argument("--repeat", type=int, default=REPEAT, help="full evaluations (best is shown)")
    a = p.parse_args(argv)
    steps, repeat = a.steps, a.repeat
    rng = random.Random(7)
    batch = make_batch(rng, 0, steps)
    dense = len(LEVELS) + len(FILLER)
    points = sum(len(c.steps) for c in batch.values())
    walls, cpus = [], []
    for _ in range(repeat):  # best of a few: the figure is the engine's, not the neighbours'
        engine = Engine("grpo", SETTINGS)
        t0, c0 = time.perf_counter(), time.process_time()
        found = engine.feed(batch)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    print(f"full evaluation: {steps:,} steps × {dense} metrics (+{len(VALIDATION)} validation "
          f"metrics every {VAL_EVERY} steps) = {points:,} points, {len(engine.evals)} rule "
          f"evaluators, {len(found)} findings: best {min(walls):.2f} s wall "
          f"({min(cpus):.2f} s CPU), median {statistics.median(walls):.2f} s of {repeat}")

    times, c0 = [], time.process_time()
    for i in range(200):
        one = make_batch(rng, steps + i, 1)
        t0 = time.perf_counter()
        engine.feed(one)
        times.append(time.perf_counter() - t0)
    cpu = (time.process_time() - c0) / 200
    print(f"incremental, one new step ({dense} metrics), in memory: median "
          f"{statistics.median(times) * 1e3:.2f} ms wall, max {max(times) * 1e3:.2f} ms "
          f"(mean {cpu * 1e3:.2f} ms CPU incl. making the step)")

    with tempfile.TemporaryDirectory() as tmp:
        db = open_engine(Path(tmp) / "index.db")
        with db.begin() as conn:
            pk = conn.execute(insert(s.runs).values(
                run_id="bench", name="bench", project="default", method="grpo",
                created_at=time.time(), status="RUNNING", tags="[]", manifest="{}", problems=0,
                config="\n".join(f"{k}: {v}" for k, v in SETTINGS.items()),
            )).inserted_primary_key
            assert pk is not None
            run_pk = int(pk[0])
            health_store.save(conn, run_pk, engine, found, steps)
        times, cpus = [], []
        for i in range(100):
            step = steps + 200 + i
            ts = 1.0e9 + 5.0 * step
            # one record's points by key, as ingest hands them to the hook
            points = {name: PointColumns([step], [step], [ts], [float(col.values[0])])
                      for name, col in make_batch(rng, step, 1).items() if col.values}
            with db.begin() as conn:
                t0, c0 = time.perf_counter(), time.process_time()
                health_store.on_metrics(conn, run_pk, points)
                times.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
        print(f"incremental, one new step, SQLite store (load state, evaluate, write findings "
              f"and state): median {statistics.median(times) * 1e3:.2f} ms wall "
              f"({statistics.median(cpus) * 1e3:.2f} ms CPU), max {max(times) * 1e3:.2f} ms")
        with db.connect() as conn:
            t0 = time.perf_counter()
            listed = health_store.health_for_run(conn, run_pk)
            print(f"listing {len(listed)} stored findings: "
                  f"{(time.perf_counter() - t0) * 1e3:.2f} ms")
        db.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
