"""Session 22: what the train split showed about two verdicts that wait on the evidence.

- `loss.fell_little` (an info, tests in test_finished_run.py): a finished loss that ended
  less than 15% below its start, where readers split on whether that is healthy.
- `rl.no_progress` is released when the reward's mean has risen by 3 standard errors (a
  Welch test of the two halves), not only its median: a reward that is 0 on most steps
  and pays on a growing share of them rises in its mean while both medians stay 0.
"""

from __future__ import annotations

import random

from runwatch.health.engine import Engine
from runwatch.health.findings import Finding
from runwatch.health.thresholds import Overrides

from .helpers import to_batch

RULE = "rl.no_progress"


def _successes(shares: list[float], seed: int = 0) -> list[float]:
    """A reward of 1 or 0 per step, paid with the share of that step."""
    rng = random.Random(seed)
    return [1.0 if rng.random() < p else 0.0 for p in shares]


def _episodes(reward: list[float], mean_z: float | None = None) -> list[Finding]:
    rules = {} if mean_z is None else {RULE: {"mean_z": mean_z}}
    engine = Engine("grpo", overrides=Overrides(rules=rules))
    found = []
    for i, v in enumerate(reward):  # one logged step at a time, as a live run sends them
        found += [f for f in engine.feed(to_batch({"reward_mean": ([i], [v])}))
                  if f.rule_id == RULE]
    return found


def test_a_reward_that_pays_more_often_is_released_by_its_mean() -> None:
    # 40 steps paying 1 in 20, then a share that climbs to 40% by step 120 and stays there
    # for 120 more: the mean goes 0 -> 0.44 over 25-point halves while the latest half's
    # median is still 0 on most judgements
    reward = _successes([0.05] * 40 + [0.05 + 0.35 * i / 79 for i in range(80)] + [0.4] * 120)
    found = _episodes(reward)
    assert [f for f in found if f.status == "open" and f.severity == "warning"]
    resolved = [f for f in found if f.status == "resolved"]
    assert resolved and resolved[0].last_step < 200
    # without the means the finding stays open to the end
    held = _episodes(reward, mean_z=float("inf"))
    assert not [f for f in held if f.status == "resolved"]


def test_a_reward_that_pays_as_rarely_throughout_stays_not_improving() -> None:
    found = _episodes(_successes([0.15] * 160))
    assert any(f.severity == "warning" for f in found)
    assert not [f for f in found if f.status == "resolved"]
