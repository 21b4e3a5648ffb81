"""Sender benchmark: what streaming a run to a server costs `run.log()`, against the
file-only SDK, in one invocation, as a ratio.

A real `runwatch server` (SQLite, in its own process) takes the streamed runs. Each
repeat runs two fresh SDK processes on the same workload, in alternating order: one
writes only the run folder, one also streams it (`runwatch.init(server=…)`). Two loops:

- tight: N steps of M scalars logged back to back (the sender's thread competes for the
  interpreter all the time: the worst case);
- paced: fewer steps with 1 ms of waiting between them (as a loop that waits on a GPU),
  where the sender works in the waits.

Reported per SDK and loop: log() per-call mean and p99, the loop's time per step (for
the paced loop, the 1 ms wait included: how much longer a 1 ms training step takes),
the process's CPU time per step from the loop's start to finish()'s end (every thread:
the writer's and the sender's work, which a loaded machine's scheduling does not blur),
finish() time (the sender's includes sending what is left), and the ratios sender /
file-only.
The bench fails (exit 1) when the server does not hold every point of every streamed run.

    python bench/bench_sender.py              # 20,000 x 20 tight, 2,000 paced, 3 repeats
    python bench/bench_sender.py --steps 2000 --paced-steps 200 --repeat 1   # quick look
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "build" / "bench" / "sender.json"


def child(mode: str, loop: str, steps: int, n_metrics: int, work: Path, url: str,
          token: str) -> dict[str, Any]:
    """One SDK process: log the workload, finish, and time it."""
    import runwatch

    server = {"server": url, "token": token} if mode == "sender" else {}
    run = runwatch.init("bench", name=f"{mode}-{loop}", dir=work, **server)
    keys = [(f"train/metric_{i:02d}", float(i)) for i in range(n_metrics)]
    times = [0] * steps
    clock = time.perf_counter_ns
    pause = 0.001 if loop == "paced" else 0.0
    start = time.perf_counter()
    cpu_start = time.process_time()
    for step in range(steps):
        metrics = {k: step * 1e-3 + o for k, o in keys}
        t = clock()
        run.log(metrics, step=step)
        times[step] = clock() - t
        if pause:
            time.sleep(pause)
    loop_end = time.perf_counter()
    run.finish()
    end = time.perf_counter()
    cpu = time.process_time() - cpu_start
    times.sort()
    sender = getattr(run, "_sender", None)
    return {"mode": mode, "loop": loop, "run_id": run.id, "steps": steps,
            "mean_us": sum(times) / steps / 1000, "p99_us": times[int(steps * 0.99)] / 1000,
            "loop_us_per_step": (loop_end - start) / steps * 1e6,
            "finish_s": end - loop_end, "cpu_us_per_step": cpu / steps * 1e6,
            "sent": None if sender is None else sender.report.records.get("metrics.jsonl", 0),
            "requests": None if sender is None else sender.report.requests,
            "sender_error": None if sender is None else sender.error}


def _start_server(db: Path, token: str) -> tuple[subprocess.Popen[str], str]:
    from runwatch.server.runner import free_port

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNWATCH_")}
    proc = subprocess.Popen([sys.executable, "-m", "runwatch", "server", "--db", str(db),
                             "--port", str(port), "--token", token],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    assert proc.stdout is not None
    said = proc.stdout.readline()
    if "serving" not in said:
        proc.kill()
        raise SystemExit(f"runwatch server did not start: {said!r}")
    return proc, f"http://127.0.0.1:{port}"


def _points(db: Path, run_id: str) -> int:
    from sqlalchemy import func, select

    from runwatch.store import schema as s
    from runwatch.store.db import open_engine

    engine = open_engine(db)
    with engine.connect() as conn:
        n = conn.execute(select(func.coalesce(func.sum(s.metric_keys.c.points), 0))
                         .join(s.runs, s.runs.c.pk == s.metric_keys.c.run_pk)
                         .where(s.runs.c.run_id == run_id)).scalar()
    engine.dispose()
    return int(n or 0)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20_000, help="tight-loop steps")
    p.add_argument("--paced-steps", type=int, default=2_000, help="paced-loop steps")
    p.add_argument("--metrics", type=int, default=20)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--child", nargs=5, metavar=("MODE", "LOOP", "WORK", "URL", "TOKEN"),
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        mode, loop, work, url, token = args.child
        steps = args.steps if loop == "tight" else args.paced_steps
        print(json.dumps(child(mode, loop, steps, args.metrics, Path(work), url, token)))
        return 0

    from runwatch.server.settings import new_token

    results: list[dict[str, Any]] = []
    lost = []
    with tempfile.TemporaryDirectory(prefix="bench-sender-") as tmp:
        db, token = Path(tmp) / "index.db", new_token()
        server, url = _start_server(db, token)
        try:
            for rep in range(args.repeat):
                for loop in ("tight", "paced"):
                    order = ("file", "sender") if rep % 2 == 0 else ("sender", "file")
                    for mode in order:
                        work = Path(tmp) / f"r{rep}"
                        proc = subprocess.run(
                            [sys.executable, __file__, "--steps", str(args.steps),
                             "--paced-steps", str(args.paced_steps), "--metrics",
                             str(args.metrics), "--child", mode, loop, str(work), url, token],
                            capture_output=True, text=True, timeout=900)
                        if proc.returncode != 0:
                            print(proc.stderr[-3000:])
                            return 1
                        res = json.loads(proc.stdout.strip().splitlines()[-1])
                        results.append(res)
                        if mode == "sender":
                            held = _points(db, res["run_id"])
                            want = res["steps"] * args.metrics
                            if held != want:
                                lost.append(f"{loop} repeat {rep}: server holds {held} of "
                                            f"{want} points ({res['sender_error']})")
        finally:
            server.terminate()
            server.wait(60)
    summary = _summary(results)
    _print(summary, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"results": results, "summary": summary, "lost": lost,
                                    "steps": args.steps, "paced_steps": args.paced_steps,
                                    "metrics": args.metrics, "repeat": args.repeat,
                                    "load": os.getloadavg()}, indent=1))
    print(f"written {args.out}")
    for line in lost:
        print(f"LOST: {line}")
    return 1 if lost else 0


def _summary(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Median over repeats of each figure, per (loop, mode), and the sender/file ratios."""
    out: dict[str, dict[str, float]] = {}
    for loop in ("tight", "paced"):
        for mode in ("file", "sender"):
            rows = [r for r in results if r["loop"] == loop and r["mode"] == mode]
            out[f"{loop}/{mode}"] = {k: statistics.median(r[k] for r in rows) for k in
                                     ("mean_us", "p99_us", "loop_us_per_step", "finish_s",
                                      "cpu_us_per_step")}
        f, s = out[f"{loop}/file"], out[f"{loop}/sender"]
        out[f"{loop}/ratio"] = {k: s[k] / f[k] if f[k] else float("nan")
                                for k in ("mean_us", "p99_us", "loop_us_per_step",
                                          "cpu_us_per_step")}
    return out


def _print(summary: dict[str, dict[str, float]], args: argparse.Namespace) -> None:
    print(f"sender vs file-only SDK: {args.metrics} metrics per log(), tight {args.steps} "
          f"steps, paced {args.paced_steps} steps (1 ms waits), median of {args.repeat} "
          f"repeats, load {os.getloadavg()[0]:.1f}")
    print(f"{'loop':<7}{'sdk':<8}{'log() mean':>12}{'log() p99':>12}{'loop/step':>12}"
          f"{'cpu/step':>12}{'finish':>10}")
    for loop in ("tight", "paced"):
        for mode in ("file", "sender"):
            r = summary[f"{loop}/{mode}"]
            print(f"{loop:<7}{mode:<8}{r['mean_us']:>10.2f}us{r['p99_us']:>10.2f}us"
                  f"{r['loop_us_per_step']:>10.2f}us{r['cpu_us_per_step']:>10.2f}us"
                  f"{r['finish_s']:>9.2f}s")
        q = summary[f"{loop}/ratio"]
        print(f"{loop:<7}{'ratio':<8}{q['mean_us']:>11.2f}x{q['p99_us']:>11.2f}x"
              f"{q['loop_us_per_step']:>11.2f}x{q['cpu_us_per_step']:>11.2f}x")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
