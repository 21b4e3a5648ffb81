"""`make bench`: run every bench/bench_*.py in turn and say which ones failed.

bench_sdk and bench_ingest run first, then the others in name order. Each runs in its
own process with this interpreter; its output is shown as it comes. A bench that fails
is reported and the next one runs; the exit status is non-zero if any failed. A bench
fails on a wrong answer; a timing target it misses is printed and fails it only with
--strict (bench/verdict.py).

    python bench/run_all.py                # all of them
    python bench/run_all.py sdk ingest     # only bench_sdk.py and bench_ingest.py
    python bench/run_all.py --strict       # a missed timing target fails its bench too
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from verdict import ENV_STRICT

BENCH_DIR = Path(__file__).resolve().parent
FIRST = ("bench_sdk.py", "bench_ingest.py")


def benches(only: list[str]) -> list[Path]:
    """The bench scripts to run, in order; `only` filters by name (with or without bench_)."""
    found = sorted(BENCH_DIR.glob("bench_*.py"), key=lambda p: (
        FIRST.index(p.name) if p.name in FIRST else len(FIRST), p.name))
    if not only:
        return found
    wanted = {w.removeprefix("bench_").removesuffix(".py") for w in only}
    return [p for p in found if p.stem.removeprefix("bench_") in wanted]


def main(argv: list[str]) -> int:
    strict = "--strict" in argv
    argv = [a for a in argv if a != "--strict"]
    env = {**os.environ, ENV_STRICT: "1" if strict else ""}
    scripts = benches(argv)
    if not scripts:
        print(f"no bench matches {' '.join(argv)}; the benches are: "
              f"{', '.join(p.stem for p in benches([]))}")
        return 2
    results: list[tuple[str, int, float]] = []
    for script in scripts:
        print(f"\n=== {script.name} ===", flush=True)
        start = time.perf_counter()
        try:
            code = subprocess.run([sys.executable, str(script)], cwd=BENCH_DIR.parent,
                                  env=env).returncode
        except KeyboardInterrupt:
            print(f"{script.name}: interrupted")
            return 130
        results.append((script.name, code, time.perf_counter() - start))
    print("\n=== summary ===")
    for name, code, took in results:
        print(f"  {name:<22} {'ok' if code == 0 else f'FAILED (exit {code})':<18} {took:7.1f} s")
    failed = [name for name, code, _ in results if code != 0]
    if failed:
        print(f"{len(failed)} of {len(results)} benches failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
