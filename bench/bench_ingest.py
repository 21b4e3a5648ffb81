"""Ingest benchmark: one large run through the SDK, the indexer and back out of the CLI.

100,000 steps x 20 scalars (2,000,000 points) are logged with the SDK; then timed:
`Indexer.index_once()` in this process (points per second; with the health engine's
hook, as `runwatch index` runs it, and without), `runwatch index` as a command on a
fresh database, a second pass that must add nothing, and
`runwatch runs metrics RUN -o json` written to a file, which must hold every point.

The run's keys (`train/metric_NN`) are read by no health rule, so its figure with the
health engine is that of ingest alone. A second run of the same shape names its first
three keys as a supervised fine-tune logs them (`loss`, a falling and noisy loss;
`learning_rate`, warmed up then decayed; `grad_norm`), and is indexed with and without
the health engine too: that figure is what the rules a real run wakes cost.

    python bench/bench_ingest.py                    # 100,000 x 20, 3 repeats
    python bench/bench_ingest.py --steps 10000 --repeat 1   # quick look
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy

import runwatch
from runwatch.health.store import on_metrics as health_hook
from runwatch.ingest.indexer import Indexer
from runwatch.store import open_engine

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "build" / "bench" / "ingest.json"
RUN_NAME = "ingest-bench"
SFT_RUN = "ingest-bench-sft"
SFT_KEYS = ("loss", "learning_rate", "grad_norm")  # as an SFT trainer names them


def _cli() -> list[str]:
    """The `runwatch` command of this interpreter."""
    script = Path(sys.executable).parent / "runwatch"
    return [str(script)] if script.exists() else [sys.executable, "-m", "runwatch"]


def _children_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def log_sft_run(runs_dir: Path, steps: int, n_metrics: int) -> None:
    """A run shaped as the bench's whose first keys are an SFT run's: a loss falling from
    2.5 towards 0.5 with noise, a learning rate warmed up over 3% of the run then decayed
    on a cosine, a noisy gradient norm; the other keys as in `one_round`."""
    rng = random.Random(36)
    keys = [*SFT_KEYS, *(f"train/metric_{i:02d}" for i in range(len(SFT_KEYS), n_metrics))]
    keys = keys[:n_metrics]
    warmup = max(1, steps * 3 // 100)
    run = runwatch.init("bench", name=SFT_RUN, dir=runs_dir, method="sft")
    for step in range(steps):
        values = {
            "loss": 0.5 + 2.0 * math.exp(-3 * step / steps) + 0.05 * rng.gauss(0, 1),
            "learning_rate": 2e-5 * min(1.0, step / warmup)
            * 0.5 * (1 + math.cos(math.pi * step / steps)),
            "grad_norm": 1.0 + 0.3 * rng.random(),
        }
        run.log({k: values.get(k, step * 1e-3 + i) for i, k in enumerate(keys)}, step)
    run.finish()


def index_pass(db: Path, runs_dir: Path, health: bool) -> tuple[float, float, int]:
    """One `Indexer.index_once()` of `runs_dir` into a fresh database `db`, with the health
    engine's hook or without it: wall seconds, CPU seconds and rows added."""
    engine = open_engine(db)
    t, cpu = time.perf_counter(), time.process_time()
    rows = Indexer(engine, runs_dir, hooks=[health_hook] if health else []).index_once().rows
    # SQLite works in this thread, so CPU time is the whole cost less the waiting for
    # a core on a shared machine (and for the disk).
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    engine.dispose()
    return wall, cpu, rows


def one_round(tmp: Path, steps: int, n_metrics: int) -> dict[str, Any]:
    """Log, index (in process and by command), re-index and export one run; the timings."""
    runs_dir = tmp / "runs"
    keys = [f"train/metric_{i:02d}" for i in range(n_metrics)]
    offsets = [(k, float(i)) for i, k in enumerate(keys)]
    points = steps * n_metrics
    out: dict[str, Any] = {"steps": steps, "metrics": n_metrics, "points": points}

    t = time.perf_counter()
    run = runwatch.init("bench", name=RUN_NAME, dir=runs_dir)
    for step in range(steps):
        base = step * 1e-3
        run.log({k: base + o for k, o in offsets}, step)
    run.finish()
    out["log_s"] = time.perf_counter() - t
    out["metrics_jsonl_mib"] = (runs_dir / RUN_NAME / "metrics.jsonl").stat().st_size / 2**20

    engine = open_engine(tmp / "index.db")
    t, cpu = time.perf_counter(), time.process_time()
    first = Indexer(engine, runs_dir, hooks=[health_hook]).index_once()
    out["index_s"] = time.perf_counter() - t
    # SQLite works in this thread, so CPU time is the whole cost less the waiting for
    # a core on a shared machine (and for the disk).
    out["index_cpu_s"] = time.process_time() - cpu
    out["index_points_per_cpu_s"] = points / out["index_cpu_s"]
    out["index_rows"] = first.rows
    out["index_points_per_s"] = points / out["index_s"]
    t = time.perf_counter()
    second = Indexer(engine, runs_dir, hooks=[health_hook]).index_once()
    out["reindex_s"] = time.perf_counter() - t
    out["reindex_rows"] = second.rows
    with engine.connect() as conn:
        stored = conn.execute(sqlalchemy.text("SELECT count(*) FROM metric_points")).scalar()
    out["stored_points"] = stored
    engine.dispose()

    # The same pass without the health engine's hook: the cost of ingest alone.
    bare_engine = open_engine(tmp / "index-no-health.db")
    t, cpu = time.perf_counter(), time.process_time()
    plain = Indexer(bare_engine, runs_dir).index_once()
    out["index_no_health_s"] = time.perf_counter() - t
    out["index_no_health_cpu_s"] = time.process_time() - cpu
    out["index_no_health_points_per_s"] = points / out["index_no_health_s"]
    out["index_no_health_points_per_cpu_s"] = points / out["index_no_health_cpu_s"]
    out["index_no_health_rows"] = plain.rows
    bare_engine.dispose()

    cli_db = tmp / "cli.db"
    t = time.perf_counter()
    subprocess.run([*_cli(), "index", str(runs_dir), "--db", str(cli_db)], check=True,
                   capture_output=True)
    out["cli_index_s"] = time.perf_counter() - t
    out["cli_index_points_per_s"] = points / out["cli_index_s"]
    t = time.perf_counter()
    res = subprocess.run([*_cli(), "index", str(runs_dir), "--db", str(cli_db)], check=True,
                         capture_output=True, text=True)
    out["cli_reindex_s"] = time.perf_counter() - t
    out["cli_reindex_says"] = res.stdout.strip().splitlines()[0] if res.stdout else ""

    export = tmp / "metrics.json"
    t = time.perf_counter()
    with open(export, "wb") as f:
        subprocess.run([*_cli(), "runs", "metrics", RUN_NAME, "--dir", str(runs_dir),
                        "--db", str(tmp / "index.db"), "-o", "json"], check=True, stdout=f)
    out["export_s"] = time.perf_counter() - t
    out["export_mib"] = export.stat().st_size / 2**20
    out["cli_peak_rss_mib"] = _children_peak_mib()

    # The SFT-named run, indexed with the health engine and without it.
    sft_dir = tmp / "runs-sft"
    log_sft_run(sft_dir, steps, n_metrics)
    for label, health in (("sft_index", True), ("sft_index_no_health", False)):
        wall, cpu, rows = index_pass(tmp / f"{label}.db", sft_dir, health)
        out.update({f"{label}_s": wall, f"{label}_cpu_s": cpu, f"{label}_rows": rows,
                    f"{label}_points_per_s": points / wall,
                    f"{label}_points_per_cpu_s": points / cpu})
    t = time.perf_counter()
    data = orjson.loads(export.read_bytes())
    got = data["steps"]
    out["export_steps"] = len(got)
    out["export_points"] = sum(len(s["measured"]) for s in got)
    out["export_exact"] = (
        len(got) == steps
        and all(s["step"] == i for i, s in enumerate(got))
        and all(s["measured"] == {k: i * 1e-3 + o for k, o in offsets}
                for i, s in enumerate(got))
    )
    out["verify_s"] = time.perf_counter() - t
    out["round_trip_s"] = (out["log_s"] + out["index_s"] + out["reindex_s"]
                           + out["export_s"])
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _report(r: dict[str, Any]) -> str:
    ok = lambda cond: "ok" if cond else "FAILED"  # noqa: E731
    return "\n".join([
        f"run: {r['steps']:,} steps x {r['metrics']} metrics = {r['points']:,} points "
        f"(metrics.jsonl {r['metrics_jsonl_mib']:.0f} MiB)",
        f"  log through the SDK, finish included  {r['log_s']:8.2f} s",
        "  Indexer.index_once(), first pass (health engine included, as `runwatch index`)",
        f"                                        {r['index_s']:8.2f} s  "
        f"{r['index_points_per_s']:>11,.0f} points/s  ({r['index_rows']:,} rows)",
        f"    the same pass in CPU time             {r['index_cpu_s']:8.2f} s  "
        f"{r['index_points_per_cpu_s']:>11,.0f} points per CPU second",
        f"  the same without the health engine    {r['index_no_health_s']:8.2f} s  "
        f"{r['index_no_health_points_per_s']:>11,.0f} points/s",
        f"    in CPU time                         {r['index_no_health_cpu_s']:8.2f} s  "
        f"{r['index_no_health_points_per_cpu_s']:>11,.0f} points per CPU second",
        f"  the same shape, keys named as an SFT run's ({', '.join(SFT_KEYS)}, ...):",
        f"    health engine included              {r['sft_index_s']:8.2f} s  "
        f"{r['sft_index_points_per_s']:>11,.0f} points/s  ({r['sft_index_rows']:,} rows)",
        f"    in CPU time                         {r['sft_index_cpu_s']:8.2f} s  "
        f"{r['sft_index_points_per_cpu_s']:>11,.0f} points per CPU second",
        f"    without the health engine           {r['sft_index_no_health_s']:8.2f} s  "
        f"{r['sft_index_no_health_points_per_s']:>11,.0f} points/s",
        f"    in CPU time                         {r['sft_index_no_health_cpu_s']:8.2f} s  "
        f"{r['sft_index_no_health_points_per_cpu_s']:>11,.0f} points per CPU second",
        f"  Indexer.index_once(), second pass     {r['reindex_s']:8.2f} s  "
        f"adds {r['reindex_rows']} rows  [{ok(r['reindex_rows'] == 0)}]",
        f"  `runwatch index` command, fresh db    {r['cli_index_s']:8.2f} s  "
        f"{r['cli_index_points_per_s']:>11,.0f} points/s (process start included)",
        f"  `runwatch index` command, again       {r['cli_reindex_s']:8.2f} s  "
        f"\"{r['cli_reindex_says']}\"",
        f"  `runwatch runs metrics -o json`       {r['export_s']:8.2f} s  "
        f"{r['export_mib']:.0f} MiB, {r['export_steps']:,} steps, "
        f"{r['export_points']:,} points, values exact  "
        f"[{ok(r['export_points'] == r['points'] and r['export_exact'])}]",
        f"  round trip (log + index + re-index + export)  {r['round_trip_s']:.2f} s",
        f"  peak RSS: this process {r['peak_rss_mib']:.0f} MiB, largest CLI process "
        f"{r['cli_peak_rss_mib']:.0f} MiB; stored points {r['stored_points']:,}",
    ])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--metrics", type=int, default=20)
    p.add_argument("--repeat", type=int, default=3,
                   help="rounds; the report shows the round with the median ingest time")
    p.add_argument("--json", type=Path, default=DEFAULT_OUT, help="where results are written")
    a = p.parse_args(argv)

    rounds = []
    for i in range(a.repeat):
        with tempfile.TemporaryDirectory(prefix="runwatch-bench-ingest-") as tmp:
            r = one_round(Path(tmp), a.steps, a.metrics)
        rounds.append(r)
        print(f"  [{i + 1}/{a.repeat}] index {r['index_points_per_s']:,.0f} points/s "
              f"({r['index_points_per_cpu_s']:,.0f} per CPU second), without health "
              f"{r['index_no_health_points_per_s']:,.0f} points/s; SFT-named run "
              f"{r['sft_index_points_per_cpu_s']:,.0f} per CPU second, without health "
              f"{r['sft_index_no_health_points_per_cpu_s']:,.0f}; "
              f"export {r['export_s']:.2f} s, round trip {r['round_trip_s']:.2f} s",
              flush=True)
    chosen = sorted(rounds, key=lambda r: r["index_s"])[(len(rounds) - 1) // 2]
    print()
    print(f"median round of {len(rounds)} (by first-pass index time):")
    print(_report(chosen))
    report = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
              "python": platform.python_version(), "sqlalchemy": sqlalchemy.__version__,
              "runwatch": runwatch.__version__, "orjson": orjson.__version__,
              "sqlite_library": __import__("sqlite3").sqlite_version,
              "cpus": os.cpu_count(), "loadavg": os.getloadavg(),
              "chosen": chosen, "rounds": rounds}
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(report, indent=1))
    print(f"\nresults: {a.json}")
    good = all(r["reindex_rows"] == 0 and r["export_points"] == r["points"]
               and r["index_no_health_rows"] == r["index_rows"]
               and r["sft_index_rows"] == r["sft_index_no_health_rows"] == r["index_rows"]
               and r["export_exact"] and r["stored_points"] == r["points"] for r in rounds)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
