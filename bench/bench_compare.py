"""Benchmark of `runwatch runs compare` on two 100,000-step runs: the CLI end to end (a
new process each time, as a user runs it) and GET /api/compare, medians of several runs.

Two supervised runs of one plan are written by the SDK (loss, grad_norm, learning_rate at
every step; the run's loss drifts from the baseline's halfway) and indexed once. Then:
the comparison alone (runwatch.analysis.compare), the CLI with -o json and with its
table (process start, the index check and the series reads included: the first compare
after indexing reads them from SQLite, the second run's in a forked process, the later
ones from the files it saves beside the index; CPU seconds include the forked
process's), the CLI's start-up alone
(`runwatch --help`), the floor of a command that reads the index (`runs list` on the same
folder), and the API: the first request of fresh servers (the series read from the files
the CLI saved beside the index, which the server reads and saves too; and with those
files removed, from the index), then warm.

    python bench/bench_compare.py                     # 100,000 steps, 5 repeats
    python bench/bench_compare.py --steps 20000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

import runwatch
from runwatch.analysis import compare as cmp
from runwatch.cli.compare_cmd import read_side
from runwatch.health.store import on_metrics
from runwatch.ingest.indexer import Indexer
from runwatch.server.runner import Runner, free_port
from runwatch.store import plain
from runwatch.store.db import open_engine
from verdict import add_strict, exit_status

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "build" / "bench" / "compare.json"
TARGET_S = 1.0
CONFIG = {"seed": 3, "batch_size": 64, "learning_rate": 1e-4, "max_steps": 100_000}


def write_runs(runs: Path, steps: int) -> None:
    for name, drift in (("baseline", 0.0), ("candidate", 0.04)):
        with runwatch.init(project="bench", name=name, dir=runs, method="sft",
                           base_model="tiny", dataset="arith", config=CONFIG) as run:
            for i in range(steps):
                loss = 2.0 / (1 + i / 1000) + 0.01 * math.sin(i) + (drift if i > steps // 2
                                                                      else 0.0)
                grad = 30.0 if i % 10_007 == 5 else 1.0 + 0.1 * math.cos(i)
                run.log({"loss": loss, "grad_norm": grad, "learning_rate": 1e-4}, step=i)


def timed(fn: Any, n: int) -> tuple[dict[str, float], Any]:
    """Wall-clock summary of `n` calls of `fn` in this process, with the median CPU seconds
    this process used meanwhile (what a busy machine does not inflate; for the API, the
    client's and the server's threads together), and the last result."""
    wall, cpu, result = [], [], None
    for _ in range(n):
        t, c = time.perf_counter(), time.process_time()
        result = fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return {**summary(wall), "median_cpu_s": round(statistics.median(cpu), 3)}, result


def summary(seconds: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(seconds), 3), "min_s": round(min(seconds), 3),
            "max_s": round(max(seconds), 3)}


def cli(runs: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    where = ["--dir", str(runs)] if runs is not None else []
    proc = subprocess.run([sys.executable, "-m", "runwatch", *args, *where],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"})
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    return proc


def cli_timed(runs: Path | None, n: int, *args: str, forget: Path | None = None
              ) -> tuple[dict[str, float], str]:
    """Wall-clock summary of `n` runs of a CLI command, with the median CPU seconds its
    processes used (what a busy machine does not inflate), and the last output; the
    folder `forget` is removed before each run (untimed)."""
    cpu = []

    def one() -> subprocess.CompletedProcess[str]:
        if forget is not None:
            shutil.rmtree(forget, ignore_errors=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = cli(runs, *args)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        return done

    wall, proc = timed(one, n)
    return {**wall, "median_cpu_s": round(statistics.median(cpu), 3)}, proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--target", type=float, default=TARGET_S, help="seconds; a median above "
                    "it is printed as a miss (exit 1 with --strict)")
    add_strict(ap)
    args = ap.parse_args()
    out: dict[str, Any] = {"steps": args.steps, "repeat": args.repeat, "target_s": args.target,
                           "loadavg_start": round(os.getloadavg()[0], 1)}
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        t = time.perf_counter()
        write_runs(runs, args.steps)
        out["write_runs_s"] = round(time.perf_counter() - t, 1)
        engine = open_engine(runs / ".runwatch" / "index.db")
        t = time.perf_counter()
        Indexer(engine, runs, hooks=[on_metrics]).index_once()
        out["index_s"] = round(time.perf_counter() - t, 1)

        reader = plain.Reader(plain.connect_sqlite(runs / ".runwatch" / "index.db"))
        sides = [read_side(reader, name) for name in ("candidate", "baseline")]
        out["analysis"], report = timed(lambda: cmp.compare(sides[0], sides[1]), args.repeat)
        assert report["compared_steps"] == args.steps and report["reported"] is not None

        def read_and_compare() -> dict[str, Any]:
            pair = [read_side(reader, name) for name in ("candidate", "baseline")]
            return cmp.compare(pair[0], pair[1])

        out["read_and_analysis"] = timed(read_and_compare, args.repeat)[0]
        out["cli_startup_help"] = cli_timed(None, args.repeat, "--help")[0]
        out["cli_floor_runs_list"] = cli_timed(runs, args.repeat, "runs", "list")[0]
        # the first compare after indexing finds the folder unchanged, reads the series
        # from SQLite and saves them beside the index; the next ones read those files.
        # Timed as often as the others: the saved files are removed before each.
        out["cli_json_first"] = cli_timed(runs, args.repeat, "runs", "compare", "candidate",
                                          "baseline", "-o", "json",
                                          forget=runs / ".runwatch" / "index.compare")[0]
        out["cli_json"], printed = cli_timed(runs, args.repeat, "runs", "compare", "candidate",
                                             "baseline", "-o", "json")
        assert json.loads(printed)["compared_steps"] == args.steps
        out["cli_table"] = cli_timed(runs, args.repeat, "runs", "compare", "candidate",
                                     "baseline")[0]

        params = {"run": "candidate", "baseline": "baseline"}

        def api(client: httpx.Client) -> dict[str, Any]:
            resp = client.get("/api/compare", params=params)
            resp.raise_for_status()
            body: dict[str, Any] = resp.json()
            assert body["compared_steps"] == args.steps
            return body

        def first_of_fresh_server(saved: bool) -> tuple[dict[str, float], Any]:
            """The first compare of each of `repeat` fresh servers (its start untimed):
            the series read from the files the CLI saved (`index.compare`), or, with
            `saved` False, from the index (those files removed first)."""
            wall, cpu = [], []
            for _ in range(args.repeat):
                shutil.rmtree(runs / ".runwatch" / "index.series", ignore_errors=True)
                if not saved:
                    shutil.rmtree(runs / ".runwatch" / "index.compare", ignore_errors=True)
                with Runner(engine, port=free_port()) as server, \
                        httpx.Client(base_url=server.url, timeout=120) as client:
                    one, body = timed(lambda: api(client), 1)
                wall.append(one["median_s"])
                cpu.append(one["median_cpu_s"])
            return {**summary(wall), "median_cpu_s": round(statistics.median(cpu), 3)}, body

        out["api_first"], first = first_of_fresh_server(saved=True)
        out["api_first_unsaved"] = first_of_fresh_server(saved=False)[0]
        out["api_first_request_s"] = out["api_first"]["median_s"]
        with Runner(engine, port=free_port()) as server, \
                httpx.Client(base_url=server.url, timeout=120) as client:
            api(client)
            out["api_warm"], body = timed(lambda: api(client), args.repeat)
        assert body == first, "a warm answer is the first one"
        reader.conn.close()
        engine.dispose()
    out["loadavg_end"] = round(os.getloadavg()[0], 1)
    timed_against = ("cli_json", "cli_json_first", "api_warm", "api_first")
    missed = [f"{name} median {out[name]['median_s']} s > {args.target} s"
              for name in timed_against if out[name]["median_s"] > args.target]
    out["meets_target"] = not missed
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))
    print(f"\nruns compare, two {args.steps:,}-step runs: CLI -o json median "
          f"{out['cli_json']['median_s']} s, {out['cli_json']['median_cpu_s']} CPU s (the "
          f"first after indexing {out['cli_json_first']['median_s']} s, "
          f"{out['cli_json_first']['median_cpu_s']} CPU s; process "
          f"start included: `runwatch --help` takes {out['cli_startup_help']['median_s']} s, "
          f"`runs list` {out['cli_floor_runs_list']['median_s']} s), "
          "API median "
          f"{out['api_warm']['median_s']} s (a fresh server's first "
          f"{out['api_first']['median_s']} s, {out['api_first']['median_cpu_s']} CPU s; "
          f"with no saved series {out['api_first_unsaved']['median_s']} s, "
          f"{out['api_first_unsaved']['median_cpu_s']} CPU s), "
          f"the comparison alone {out['analysis']['median_s']} s; target <= {args.target} s; "
          f"results in {args.out}")
    return exit_status(missed, args.strict)


if __name__ == "__main__":
    sys.exit(main())
