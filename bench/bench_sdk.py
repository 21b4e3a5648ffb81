"""SDK benchmark: what `run.log()` costs a training loop, against the trackers in use today.

Every tracker runs the same workload (N steps of M float scalars) in its own subprocess,
so peak memory is the tracker's alone and timing runs without tracemalloc. Reported per
tracker: log() per-call median and p99 (perf_counter_ns around each call), the whole
workload's time including the final finish/close, and peak RSS. A second check logs
200,000 calls as fast as possible, so the loop outruns runwatch's writer, and samples
RSS along the way: memory should stay flat under backpressure, and every record land.

Peers (trackio in local mode, W&B offline, tensorboardX) run from `.bench-venv`, which
is created here when missing; they are never runtime dependencies of runwatch.

    python bench/bench_sdk.py                       # 20,000 steps x 10 and x 20, 3 repeats
    python bench/bench_sdk.py --steps 2000 --repeat 1 --backlog-calls 20000   # quick look
    python bench/bench_sdk.py --steps 0 --repeat 5  # only the backpressure check, 5 times
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PEER_VENV = ROOT / ".bench-venv"
PEER_PACKAGES = ("trackio", "wandb", "tensorboardX")
TRACKERS = ("bare-json", "runwatch", "trackio", "wandb", "tensorboardx")
# The import name of each peer, to check that the peer interpreter has it.
PEER_MODULE = {"trackio": "trackio", "wandb": "wandb", "tensorboardx": "tensorboardX"}
BACKLOG_MARKS = (25_000, 50_000, 100_000, 150_000, 200_000)
DEFAULT_OUT = ROOT / "build" / "bench" / "sdk.json"

LogFn = Callable[[dict[str, float], int], None]


# --- child: one tracker, one workload --------------------------------------------------


def _rss_mib() -> float:
    """Resident memory now (not the peak), from /proc."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _open_tracker(name: str, work: Path) -> tuple[LogFn, Callable[[], None], str]:
    """(log, finish, version) for tracker `name`, recording into `work`."""
    if name == "bare-json":
        f = open(work / "metrics.jsonl", "w")  # noqa: SIM115 - closed by finish
        dumps, write = json.dumps, f.write

        def bare_log(metrics: dict[str, float], step: int) -> None:
            write(dumps(metrics) + "\n")

        return bare_log, f.close, platform.python_version()
    if name == "runwatch":
        import runwatch

        run = runwatch.init("bench", name="sdk", dir=work / "runs")
        return run.log, run.finish, runwatch.__version__
    if name == "trackio":
        import trackio

        trackio.init(project="bench", name="sdk", embed=False)
        return trackio.log, trackio.finish, trackio.__version__
    if name == "wandb":
        import wandb

        wrun = wandb.init(project="bench", name="sdk", mode="offline", dir=str(work))

        def wandb_log(metrics: dict[str, float], step: int) -> None:
            wrun.log(metrics, step=step)

        return wandb_log, wrun.finish, wandb.__version__
    if name == "tensorboardx":
        import tensorboardX

        writer = tensorboardX.SummaryWriter(logdir=str(work / "tb"))
        add = writer.add_scalar

        def tb_log(metrics: dict[str, float], step: int) -> None:
            for key, value in metrics.items():
                add(key, value, step)

        return tb_log, writer.close, tensorboardX.__version__
    raise SystemExit(f"unknown tracker {name!r}; one of {', '.join(TRACKERS)}")


def _keys(n_metrics: int) -> list[str]:
    return [f"train/metric_{i:02d}" for i in range(n_metrics)]


def child_workload(tracker: str, steps: int, n_metrics: int, work: Path) -> dict[str, Any]:
    """Log `steps` steps of `n_metrics` scalars through `tracker`; timings and memory."""
    t0 = time.perf_counter()
    log, finish, version = _open_tracker(tracker, work)
    init_s = time.perf_counter() - t0
    offsets = [(k, float(i)) for i, k in enumerate(_keys(n_metrics))]
    times = [0] * steps
    clock = time.perf_counter_ns
    rss_before = _rss_mib()
    start = time.perf_counter()
    for step in range(steps):
        # A fresh dict per step, as a training loop builds one; not part of the timing.
        base = step * 1e-3
        metrics = {k: base + o for k, o in offsets}
        t = clock()
        log(metrics, step)
        times[step] = clock() - t
    loop_end = time.perf_counter()
    finish()
    end = time.perf_counter()
    times.sort()
    return {
        "tracker": tracker, "version": version, "steps": steps, "metrics": n_metrics,
        "median_us": times[steps // 2] / 1000, "p99_us": times[int(steps * 0.99)] / 1000,
        "max_us": times[-1] / 1000, "mean_us": sum(times) / steps / 1000,
        "init_s": init_s, "loop_s": loop_end - start, "finish_s": end - loop_end,
        "total_s": end - start, "rss_before_mib": rss_before, "peak_rss_mib": _peak_rss_mib(),
        "lines": _count_lines(tracker, work),
    }


def _count_lines(tracker: str, work: Path) -> int | None:
    """Metric records on disk, for the two trackers whose files are plain JSONL."""
    path = {"bare-json": work / "metrics.jsonl",
            "runwatch": work / "runs" / "sdk" / "metrics.jsonl"}.get(tracker)
    if path is None or not path.exists():
        return None
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def child_backlog(tracker: str, calls: int, n_metrics: int, work: Path) -> dict[str, Any]:
    """Log `calls` calls as fast as possible, sampling RSS and (runwatch) the queue length."""
    log, finish, version = _open_tracker(tracker, work)
    # runwatch's writer, read (never changed) to show the queue and the unwritten bytes.
    writer = getattr(getattr(log, "__self__", None), "_writer", None)
    max_pending = 0
    offsets = [(k, float(i)) for i, k in enumerate(_keys(n_metrics))]
    marks = {m for m in BACKLOG_MARKS if m <= calls} | {calls}
    samples = []
    max_queue = 0
    blocked = 0
    clock = time.perf_counter_ns
    rss_before = _rss_mib()
    start = time.perf_counter()
    for step in range(calls):
        base = step * 1e-3
        metrics = {k: base + o for k, o in offsets}
        t = clock()
        log(metrics, step)
        if clock() - t > 1_000_000:
            blocked += 1
        if writer is not None and step % 500 == 0:
            max_queue = max(max_queue, len(writer.queue))
            pending = sum(s.pending_bytes for s in list(writer._sinks.values()))
            max_pending = max(max_pending, pending)
        if step + 1 in marks:
            samples.append({"calls": step + 1, "rss_mib": _rss_mib(),
                            "peak_rss_mib": _peak_rss_mib(),
                            "elapsed_s": time.perf_counter() - start})
    loop_end = time.perf_counter()
    finish()
    end = time.perf_counter()
    return {
        "tracker": tracker, "version": version, "calls": calls, "metrics": n_metrics,
        "rss_before_mib": rss_before, "samples": samples, "max_queue": max_queue,
        "max_unwritten_mib": max_pending / 2**20,
        "dropped_lines": sum(s.dropped for s in writer._sinks.values()) if writer else None,
        "calls_blocked_over_1ms": blocked, "loop_s": loop_end - start,
        "finish_s": end - loop_end, "peak_rss_mib": _peak_rss_mib(),
        "lines": _count_lines(tracker, work),
    }


# --- parent: environments, subprocesses, the table ------------------------------------


def _peer_python(install: bool) -> tuple[str, str | None]:
    """The interpreter for every tracker, and why peers are unavailable (None if they are)."""
    py = PEER_VENV / "bin" / "python"
    if not py.exists() and install:
        print(f"creating {PEER_VENV.name} with {', '.join(PEER_PACKAGES)} (once) …", flush=True)
        try:
            subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
            pip = [str(PEER_VENV / "bin" / "pip"), "install", "-q"]
            subprocess.run([*pip, *PEER_PACKAGES], check=True)
            subprocess.run([*pip, "-e", str(ROOT)], check=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            shutil.rmtree(PEER_VENV, ignore_errors=True)
            return sys.executable, f"could not create {PEER_VENV.name} ({exc})"
    if not py.exists():
        return sys.executable, f"{PEER_VENV.name} does not exist (run without --no-install)"
    return str(py), None


def _missing_module(python: str, module: str) -> str | None:
    res = subprocess.run([python, "-c", f"import {module}"], capture_output=True, text=True)
    if res.returncode == 0:
        return None
    lines = res.stderr.strip().splitlines()
    return lines[-1] if lines else f"import {module} failed"


def _child_env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    # The working tree's runwatch, whatever is installed in the interpreter.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                      env.get("PYTHONPATH")]))
    env.update({
        "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DIR": str(work),
        "WANDB_CACHE_DIR": str(work / "wandb-cache"),
        "WANDB_CONFIG_DIR": str(work / "wandb-config"),
        "TRACKIO_DIR": str(work / "trackio"), "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(work / "hf"),
    })
    return env


def _tree_rss_mib(pid: int) -> float:
    """RSS of `pid` and all its descendants now (W&B keeps its writer in a helper process)."""
    total = 0.0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return total


def run_child(python: str, mode: str, tracker: str, count: int, n_metrics: int,
              timeout: float) -> dict[str, Any]:
    """Run one measurement in a fresh process; its result, or {"error": …}."""
    with tempfile.TemporaryDirectory(prefix="runwatch-bench-") as tmp:
        work = Path(tmp)
        out = work / "result.json"
        cmd = [python, str(Path(__file__).resolve()), "--child", mode, "--tracker", tracker,
               "--count", str(count), "--n-metrics", str(n_metrics), "--work", str(work),
               "--result", str(out)]
        proc = subprocess.Popen(cmd, env=_child_env(work), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, cwd=work)
        peak_tree = 0.0
        stop = threading.Event()

        def sample() -> None:
            nonlocal peak_tree
            while not stop.wait(0.1):
                peak_tree = max(peak_tree, _tree_rss_mib(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
            return {"tracker": tracker, "metrics": n_metrics,
                    "error": f"timed out after {timeout:.0f} s"}
        finally:
            stop.set()
            sampler.join()
        if proc.returncode != 0 or not out.exists():
            tail = " | ".join(output.strip().splitlines()[-3:])
            return {"tracker": tracker, "metrics": n_metrics,
                    "error": f"exit {proc.returncode}: {tail}"}
        result: dict[str, Any] = json.loads(out.read_text())
        result["tree_peak_rss_mib"] = max(peak_tree, result["peak_rss_mib"])
        return result


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run whose whole-workload time is the median of the repeats."""
    ok = sorted((r for r in runs if "error" not in r), key=lambda r: r["total_s"])
    if not ok:
        return runs[-1]
    chosen = dict(ok[(len(ok) - 1) // 2])
    chosen["repeats"] = len(ok)
    chosen["total_s_all"] = [r["total_s"] for r in ok]
    chosen["median_us_all"] = [r["median_us"] for r in ok]
    return chosen


def _paired_ratio(runs: list[dict[str, Any]], bare: list[dict[str, Any]]) -> float | None:
    """Median over repeats of total time / the bare loop's total time in the same repeat.

    Load on a shared machine drifts between repeats; a ratio taken within one repeat
    (the two runs were seconds apart) cancels most of it.
    """
    ratios = sorted(r["total_s"] / b["total_s"] for r, b in zip(runs, bare, strict=False)
                    if "error" not in r and "error" not in b)
    return ratios[(len(ratios) - 1) // 2] if ratios else None


def _table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'tracker':<13}{'version':>9}{'metrics':>8}{'median µs':>11}{'p99 µs':>10}"
            f"{'×bare':>7}{'total s':>9}{'×bare':>7}{'×pair':>7}{'finish s':>10}"
            f"{'peak MiB':>10}"
            f"{'tree MiB':>10}")
    out = [head, "-" * len(head)]
    bare = {r["metrics"]: r for r in rows if r["tracker"] == "bare-json" and "error" not in r}
    for r in rows:
        if "error" in r or "skipped" in r:
            why = r.get("skipped") or r.get("error")
            out.append(f"{r['tracker']:<13}{'':>9}{r['metrics']:>8}  skipped: {why}")
            continue
        b = bare.get(r["metrics"])
        x_med = f"{r['median_us'] / b['median_us']:.2f}" if b else "-"
        x_tot = f"{r['total_s'] / b['total_s']:.2f}" if b else "-"
        pair = r.get("total_x_bare_paired")
        x_pair = "-" if pair is None else f"{pair:.2f}"
        out.append(f"{r['tracker']:<13}{r['version']:>9}{r['metrics']:>8}"
                   f"{r['median_us']:>11.2f}{r['p99_us']:>10.2f}{x_med:>7}"
                   f"{r['total_s']:>9.3f}{x_tot:>7}{x_pair:>7}{r['finish_s']:>10.3f}"
                   f"{r['peak_rss_mib']:>10.1f}{r['tree_peak_rss_mib']:>10.1f}")
    return "\n".join(out)


def _backlog_table(results: list[dict[str, Any]]) -> str:
    """One line per run of the backpressure check; every run is shown, the worst matters."""
    if "error" in results[0]:
        return f"{results[0]['tracker']}: skipped: {results[0]['error']}"
    r0 = results[0]
    marks = [s["calls"] for s in r0["samples"]]
    head = (f"{'run':>4}" + "".join(f"{f'@{m // 1000}k':>7}" for m in marks)
            + f"{'peak':>7}{'queue':>8}{'unwritten':>11}{'dropped':>9}{'on disk':>10}"
            f"{'loop s':>8}{'finish s':>9}")
    out = [f"{r0['tracker']}: {r0['calls']:,} calls x {r0['metrics']} metrics as fast as "
           f"possible; RSS in MiB after N calls (before the loop: "
           f"{r0['rss_before_mib']:.1f}), largest queue seen, encoded MiB not yet written, "
           "lines the writer dropped, records on disk", head]
    for i, r in enumerate(results, 1):
        if "error" in r:
            out.append(f"{i:>4}  failed: {r['error']}")
            continue
        ok = "" if _backlog_ok(r) else "  LOST"
        out.append(f"{i:>4}" + "".join(f"{s['rss_mib']:>7.1f}" for s in r["samples"])
                   + f"{r['peak_rss_mib']:>7.1f}{r['max_queue']:>8,}"
                   f"{_mib(r.get('max_unwritten_mib')):>11}{r.get('dropped_lines')!s:>9}"
                   f"{r['lines']!s:>10}{r['loop_s']:>8.2f}{r['finish_s']:>9.2f}{ok}")
    return "\n".join(out)


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _backlog_ok(res: dict[str, Any]) -> bool:
    """Every call's record reached the disk (checked where the file is plain JSONL)."""
    return res.get("lines") is None or res["lines"] == res["calls"]


def _machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "loadavg": os.getloadavg()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20_000, help="0 skips the side-by-side table")
    p.add_argument("--metrics", default="10,20", help="comma-separated scalar counts")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs per row (the table shows the run with the median total "
                   "time) and of the backpressure check (all shown)")
    p.add_argument("--trackers", default=",".join(TRACKERS))
    p.add_argument("--backlog-calls", type=int, default=200_000,
                   help="calls of the memory-under-backpressure check (0 skips it)")
    p.add_argument("--backlog-trackers", default="runwatch")
    p.add_argument("--no-install", action="store_true", help="never create .bench-venv")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--json", type=Path, default=DEFAULT_OUT, help="where results are written")
    p.add_argument("--child", choices=("workload", "backlog"), help=argparse.SUPPRESS)
    p.add_argument("--tracker", help=argparse.SUPPRESS)
    p.add_argument("--count", type=int, help=argparse.SUPPRESS)
    p.add_argument("--n-metrics", type=int, help=argparse.SUPPRESS)
    p.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args(argv)

    if a.child:
        fn = child_workload if a.child == "workload" else child_backlog
        result = fn(a.tracker, a.count, a.n_metrics, a.work)
        a.result.write_text(json.dumps(result))
        return 0

    python, peer_problem = _peer_python(install=not a.no_install)
    trackers = [t.strip() for t in a.trackers.split(",") if t.strip()]
    widths = [int(m) for m in a.metrics.split(",")]
    skipped: dict[str, str] = {}
    for t in trackers:
        if t in PEER_MODULE:
            why = peer_problem or _missing_module(python, PEER_MODULE[t])
            if why:
                skipped[t] = why
    print(f"interpreter: {python}", flush=True)
    machine_before = _machine()

    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    # Repeats go round-robin over the trackers so that a burst of load on this shared
    # machine lands on every tracker alike rather than on one.
    for rep in range(a.repeat if a.steps > 0 else 0):
        for width in widths:
            for t in trackers:
                if t in skipped:
                    continue
                res = run_child(python, "workload", t, a.steps, width, a.timeout)
                runs.setdefault((t, width), []).append(res)
                what = res.get("error") or (f"median {res['median_us']:.2f} µs, "
                                            f"total {res['total_s']:.3f} s")
                print(f"  [{rep + 1}/{a.repeat}] {t:<13} x{width:<3} {what}", flush=True)
    rows = []
    for width in widths if a.steps > 0 else ():
        for t in trackers:
            if t in skipped:
                rows.append({"tracker": t, "metrics": width, "skipped": skipped[t]})
                continue
            row = _median_run(runs[(t, width)])
            row["total_x_bare_paired"] = _paired_ratio(runs[(t, width)],
                                                       runs.get(("bare-json", width), []))
            rows.append(row)

    backlog: list[list[dict[str, Any]]] = []
    if a.backlog_calls > 0:
        for t in [t.strip() for t in a.backlog_trackers.split(",") if t.strip()]:
            if t in skipped:
                backlog.append([{"tracker": t, "error": skipped[t]}])
                continue
            backlog.append([run_child(python, "backlog", t, a.backlog_calls, max(widths),
                                      a.timeout) for _ in range(a.repeat)])

    if rows:
        print()
        print(f"log() per call and whole workload: {a.steps:,} steps, median run of "
              f"{a.repeat}")
        print(_table(rows))
    for results in backlog:
        print()
        print(_backlog_table(results))
    report = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
              "interpreter": python, "steps": a.steps, "repeat": a.repeat,
              "machine_before": machine_before, "machine_after": _machine(),
              "rows": rows, "all_runs": {f"{t}x{w}": r for (t, w), r in runs.items()},
              "backlog": backlog}
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(report, indent=1))
    print(f"\nresults: {a.json}")
    failed = [r for r in rows if "error" in r or r.get("lines") not in (None, a.steps)]
    failed += [b for results in backlog for b in results
               if ("error" in b and b["tracker"] not in skipped)
               or ("error" not in b and not _backlog_ok(b))]
    for f in failed:
        print(f"FAILED: {f['tracker']}: {f.get('error') or 'records missing on disk'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
