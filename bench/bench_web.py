"""Web benchmark in the real browser (Playwright driving Debian's Chromium).

1. Navigation: from a click on a 100,000-step x 20-metric run in the list until every
   chart is drawn: warm (the server indexed the run, so its series are cached), after a
   restart (a fresh server reading the series files it saved) and cold (nothing cached
   or saved: the charts read the index's step summaries; bench_cold.py compares that
   with reading every point).
2. Live delay: from a metrics line written to disk to the point drawn on the open page.
3. Load: 50 runs logging live through the SDK (10 steps/s x 20 metrics each) while the
   page shows one of them: no point lost (in the index and on the page), and the page
   stays responsive (event-loop lag, time for a search to filter the list).

    python bench/bench_web.py                          # the full benchmark
    python bench/bench_web.py --steps 20000 --load-seconds 10   # a quick look
    python bench/bench_web.py --parts navigation                  # one part
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from playwright.sync_api import Page, sync_playwright
from sqlalchemy import func, select

from runwatch.sdk import init
from runwatch.server.runner import Runner, free_port
from runwatch.store import schema as s
from runwatch.store.db import open_engine
from verdict import add_strict, exit_status

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "build" / "bench" / "web.json"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
KEYS = ["loss", "val/loss", "learning_rate", "accuracy", "val/accuracy", "reward_mean",
        "val/reward_mean", "fb/loss/ratio/mean", "fb/loss/clip/clipped_ratio/mean",
        "fb/loss/clip/high_fraction", "fb/loss/clip/low_fraction", "fb/loss/kl_policy/mean",
        "fb/loss/kl_policy/k3/mean", "fb/loss/kl_ref/mean", "timing/step_total_s",
        "timing/sample_s", "timing/train_s", "timing/weights_sync_s", "grad_norm",
        "update_ratio"]
WRITER = r"""
import sys, threading, time
from runwatch.sdk import init
runs_dir, n_runs, seconds, keys = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
start = time.time() + 1.0
def one(i):
    run = init(name=f"load-{i:02d}", dir=runs_dir, method="grpo", base_model="tiny",
               dataset="arith", trainer="load", backend="local")
    steps = int(seconds * 10)
    for step in range(steps):
        time.sleep(max(0.0, start + step / 10 - time.time()))
        run.log({k: step * 1e-3 + j for j, k in enumerate(keys)}, step=step)
    run.finish("SUCCEEDED")
threads = [threading.Thread(target=one, args=(i,)) for i in range(n_runs)]
for t in threads: t.start()
for t in threads: t.join()
"""


def stats(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {"median": round(statistics.median(ms), 1),
            "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 1),
            "max": round(ordered[-1], 1), "n": len(ms)}


def write_big_run(runs_dir: Path, steps: int) -> None:
    run = init(name="big-run", dir=runs_dir, method="grpo", base_model="tiny-gpt",
               dataset="arith", trainer="bench", backend="local")
    run.finish("SUCCEEDED")
    with open(runs_dir / "big-run" / "metrics.jsonl", "wb") as f:
        for i in range(steps):
            rec = {"step": i, "ts": 1.7e9 + i, "seq": i}
            rec.update({k: 1.0 + j + (i % 97) * 1e-3 for j, k in enumerate(KEYS)})
            f.write(orjson.dumps(rec) + b"\n")


def navigate(page: Page, url: str, name: str) -> float:
    page.goto(f"{url}/runs")
    page.wait_for_selector(f'.run-row:has-text("{name}")')
    t = time.perf_counter()
    page.click(f'.run-row:has-text("{name}")')
    page.wait_for_selector(".chart-groups[data-drawn=true]", timeout=120_000)
    took = (time.perf_counter() - t) * 1000
    drawn = page.eval_on_selector_all("[data-chart]", "els => els.map(e => +e.dataset.points)")
    assert drawn and all(p > 0 for p in drawn), drawn
    return took


def bench_navigation(browser: Any, tmp: Path, steps: int, repeat: int) -> dict[str, Any]:
    runs_dir = tmp / "nav-runs"
    runs_dir.mkdir()
    write_big_run(runs_dir, steps)
    init(name="small-run", dir=runs_dir).finish("SUCCEEDED")
    db = tmp / "nav.db"
    out: dict[str, Any] = {"steps": steps, "metrics": len(KEYS), "points": steps * len(KEYS)}
    t = time.perf_counter()
    with Runner(open_engine(db), runs_dir=runs_dir, port=free_port()) as server:
        out["index_s"] = round(time.perf_counter() - t, 1)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        out["warm_ms"] = stats([navigate(page, server.url, "big-run") for _ in range(repeat)])
        out["charts"] = page.eval_on_selector_all("[data-chart]", "els => els.length")
        page.close()
    # a restarted server, before its startup prewarm: series come from the saved files
    with Runner(open_engine(db), port=free_port(), prewarm=False) as server:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        out["restart_first_ms"] = round(navigate(page, server.url, "big-run"), 1)
        page.close()
    # a server with nothing cached or saved: the charts read the step summaries, the
    # run detail's tiles whatever they read (bench_cold.py: with and without summaries)
    with Runner(open_engine(db), port=free_port(), prewarm=False, save_series=False) as server:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        out["cold_first_ms"] = round(navigate(page, server.url, "big-run"), 1)
        page.close()
    return out


WATCH = """() => { window.__seen = {}; const el = document.querySelector('[data-chart="loss"]');
  new MutationObserver(() => { window.__seen[el.dataset.points] = Date.now(); })
    .observe(el, {attributes: true, attributeFilter: ['data-points']}); }"""


def bench_live_delay(browser: Any, tmp: Path, samples: int) -> dict[str, Any]:
    runs_dir = tmp / "live-runs"
    runs_dir.mkdir()
    run = init(name="live-run", dir=runs_dir, method="sft", flush_interval=0.05)
    for i in range(10):
        run.log({"loss": 1.0 / (i + 1)}, step=i)
    time.sleep(1.0)  # the SDK's writer has flushed these by now
    metrics = runs_dir / "live-run" / "metrics.jsonl"
    delays: list[float] = []
    with Runner(open_engine(tmp / "live.db"), runs_dir=runs_dir, port=free_port()) as server:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{server.url}/runs")
        page.click('.run-row:has-text("live-run")')
        page.wait_for_selector(".chart-groups[data-drawn=true]")
        page.evaluate(WATCH)
        seq = len(metrics.read_bytes().splitlines())
        for k in range(samples):
            step = 10 + k
            line = orjson.dumps({"step": step, "ts": time.time(), "seq": seq + k, "loss": 0.05})
            with open(metrics, "ab") as f:
                f.write(line + b"\n")
                f.flush()
                written = time.time() * 1000
            page.wait_for_function(f"() => window.__seen['{step + 1}'] !== undefined")
            delays.append(page.evaluate(f"window.__seen['{step + 1}']") - written)
            time.sleep(0.3)
        page.close()
    run.finish("SUCCEEDED")
    return {"delay_ms": stats(delays), "index_interval_s": 0.2}


LAG = """() => { window.__lags = []; let last = performance.now();
  setInterval(() => { const now = performance.now(); window.__lags.push(now - last - 50);
  last = now; }, 50); }"""


def bench_load(browser: Any, tmp: Path, n_runs: int, seconds: float) -> dict[str, Any]:
    runs_dir = tmp / "load-runs"
    runs_dir.mkdir()
    steps = int(seconds * 10)
    engine = open_engine(tmp / "load.db")
    out: dict[str, Any] = {"runs": n_runs, "steps_per_s": 10, "metrics": len(KEYS),
                           "seconds": seconds, "points_per_s": n_runs * 10 * len(KEYS)}
    with Runner(engine, runs_dir=runs_dir, port=free_port()) as server:
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(runs_dir), str(n_runs),
                                   str(seconds), *KEYS])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{server.url}/runs")
        page.wait_for_selector('.run-row:has-text("load-00")', timeout=60_000)
        page.click('.run-row:has-text("load-00")')
        page.wait_for_selector("#detail[data-loaded=true]", timeout=60_000)
        page.evaluate(LAG)
        searches: list[float] = []
        while writer.poll() is None:
            time.sleep(2.0)
            t = time.perf_counter()
            page.fill("#search", "load-07")
            page.wait_for_function("() => document.querySelectorAll('.run-row').length === 1")
            searches.append((time.perf_counter() - t) * 1000)
            page.fill("#search", "")
            page.wait_for_function(
                f"() => document.querySelectorAll('.run-row').length === {n_runs}")
        writer_done = time.perf_counter()
        expected = n_runs * steps * len(KEYS)
        while True:
            with engine.connect() as conn:
                stored = conn.execute(select(func.count()).select_from(s.metric_points)).scalar()
                unfinished = conn.execute(select(func.count()).select_from(s.runs).where(
                    s.runs.c.status != "SUCCEEDED")).scalar()
            if stored == expected and not unfinished:
                break
            time.sleep(0.1)
        out["index_catch_up_s"] = round(time.perf_counter() - writer_done, 2)
        page.wait_for_function(
            f"() => document.querySelector('[data-chart=\"loss\"]').dataset.points === '{steps}'",
            timeout=60_000)
        lags = page.evaluate("window.__lags")
        out["points_stored"] = stored
        out["points_expected"] = expected
        out["page_points_of_open_run"] = steps
        out["event_loop_lag_ms"] = stats([max(0.0, x) for x in lags])
        out["event_loop_lag_ms"]["worst_at_tick"] = max(range(len(lags)), key=lambda i: lags[i])
        out["search_filter_ms"] = stats(searches)
        page.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--live-samples", type=int, default=20)
    ap.add_argument("--load-runs", type=int, default=50)
    ap.add_argument("--load-seconds", type=float, default=30.0)
    ap.add_argument("--parts", nargs="+", default=["navigation", "live", "load"],
                    choices=["navigation", "live", "load"], help="which parts to run")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    add_strict(ap)
    args = ap.parse_args()
    out: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() else {}
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        if "navigation" in args.parts:
            out["navigation"] = bench_navigation(browser, Path(tmp), args.steps, args.repeat)
            print(json.dumps(out["navigation"], indent=2), flush=True)
        if "live" in args.parts:
            out["live"] = bench_live_delay(browser, Path(tmp), args.live_samples)
            print(json.dumps(out["live"], indent=2), flush=True)
        if "load" in args.parts:
            out["load"] = bench_load(browser, Path(tmp), args.load_runs, args.load_seconds)
            print(json.dumps(out["load"], indent=2), flush=True)
        browser.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    nav, live, load = out["navigation"], out["live"], out["load"]
    missed = [f"{what} median {ms} ms > {target} ms" for what, ms, target in (
        ("warm navigation", nav["warm_ms"]["median"], 1500),
        ("disk-to-page delay", live["delay_ms"]["median"], 1000)) if ms > target]
    wrong = ([] if load["points_stored"] == load["points_expected"] else
             [f"{load['points_stored']:,} of {load['points_expected']:,} points stored"])
    print(f"\nnavigation to a {nav['steps']:,} x {nav['metrics']} run: warm median "
          f"{nav['warm_ms']['median']} ms, after a restart {nav['restart_first_ms']} ms, "
          f"nothing cached {nav['cold_first_ms']} ms (target <= 1500); "
          f"disk-to-page delay median {live['delay_ms']['median']} ms (target <= 1000); "
          f"{load['runs']} live runs: {load['points_stored']:,}/{load['points_expected']:,} "
          f"points stored; results in {args.out}")
    return exit_status(missed, args.strict, wrong)


if __name__ == "__main__":
    sys.exit(main())
