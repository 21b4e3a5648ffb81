"""The health rules' score on the labelled corpus of real logs (tests/data/real): every run
replayed one logged step at a time through the live path (runs folder, indexer, health
hook), then precision, recall and the delay from onset to detection per class, for the
train split and, separately, the held-out third.

Run with `python bench/bench_health_eval.py` (part of `make bench`); the same as
`runwatch health-eval`; held-back runs are also reported by the round they were added in.
Targets (issue 14, held-out runs): recall ≥ 90% of labelled
pathologies, no warning on a healthy run, median delay ≤ 10 logged points.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from runwatch.health.scoring import load_corpus, replay_all, score, summary_line

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "real"


def _pct(value: float | None) -> str:
    return "  —" if value is None else f"{value:4.0%}"


def main() -> int:
    start = time.perf_counter()
    results = replay_all(load_corpus(CORPUS))
    took = time.perf_counter() - start
    points = sum(len(r.steps) for r in results)
    print(f"replayed {len(results)} runs, {points} logged steps, in {took:.1f} s "
          f"({1000 * took / max(points, 1):.1f} ms per step through index + health)")
    met = True
    rounds = sorted({r.run.round for r in results if r.run.round is not None})
    for split, rnd in [("train", None), ("holdout", None), *(("holdout", n) for n in rounds)]:
        sc = score(results, split, rnd)
        title = split if rnd is None else f"holdout round {rnd}"
        # the summary line names the split; the table of its classes follows
        print("\n" + summary_line(f"{title} ({sc['runs']} runs)", sc))
        print(f"  {'class':<24}{'runs':>5}{'found':>6}{'recall':>8}{'false+':>7}"
              f"{'precision':>10}{'delay pts':>10}{'delay steps':>12}")
        for cls, c in sc["classes"].items():
            delay_p = "—" if c["median_delay_points"] is None else f"{c['median_delay_points']:g}"
            delay_s = "—" if c["median_delay_steps"] is None else f"{c['median_delay_steps']:g}"
            print(f"  {cls:<24}{c['runs']:>5}{c['detected']:>6}{_pct(c['recall']):>8}"
                  f"{len(c['false_positives']):>7}{_pct(c['precision']):>10}{delay_p:>10}"
                  f"{delay_s:>12}")
        p, h = sc["pathologies"], sc["healthy"]
        for name, rules in h["with_warnings"].items():
            print(f"    {name}: {', '.join(rules)}")
        if split == "holdout" and rnd is None:
            met = ((p["recall"] or 0) >= 0.9 and not h["with_warnings"]
                   and (p["median_delay_points"] or 0) <= 10)
    print(f"\nheld-out targets (recall ≥ 90%, no warning on healthy, delay ≤ 10 points): "
          f"{'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
