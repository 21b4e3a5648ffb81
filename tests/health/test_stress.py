"""The stress set (tests/health/stress.py): every class found in every trainer's names,
at strides of 1, 5, 10 and 50 steps and lengths from 4 to 2,000 logged points, where the
rules are meant to judge it; healthy runs in the same names raise no warning.

The lengths each class is checked at are where a careful reader sees it too: a spike
needs a loss history to stand out from (16 points), a reward's noise 10 points (under
that the early verdict is a chance one), a long run's slow drift the lengths docs/health.md
names. What is left out is listed there ("Stress set")."""

from __future__ import annotations

import pytest

from runwatch.health.rules.base import SEVERITY_RANK
from runwatch.health.scoring import RULE_CLASSES

from .helpers import evaluate
from .stress import HEALTHY, NAMES, PATHOLOGIES, series, shows

STRIDES = (1, 5, 10, 50)
# class -> the lengths (logged points) it must be found at, for every stride
LENGTHS: dict[str, tuple[int, ...]] = {
    "dpo_over_optimisation": (4, 8, 16, 40, 200),
    "nan": (4, 8, 16, 40, 200),
    "loss_spike": (40, 200),
    "loss_spikes_repeated": (40, 200),
    "rl_no_progress": (16, 40, 200),
    "entropy_collapse": (4, 8, 16, 40, 200),
    "kl_growth": (40,),
    "reward_zero_variance": (8, 16, 40, 200),
    "overfitting": (16, 40, 200),
    "loss_zero": (4, 8, 16, 40, 200),
    # 8 points over 50 steps show a loss that never moves; logged every step, 30 points.
    "loss_not_falling": (40, 200),
    "loss_rising": (40, 200),
}
LONG = 2000  # logged every step


def _missed(cls: str, lengths: tuple[int, ...], strides: tuple[int, ...]) -> list[str]:
    p = PATHOLOGIES[cls]
    want = "loss_spike" if cls == "loss_spikes_repeated" else cls
    missed = []
    for trainer in NAMES:
        if not shows(cls, trainer):
            continue
        for stride in strides:
            for n in lengths:
                found = evaluate(p.method, {}, series(p, trainer, stride, n, cls) or {})
                hits = [f for f in found if RULE_CLASSES.get(f.rule_id) == want]
                if cls == "loss_spikes_repeated":  # repeated spikes are a warning
                    hits = [f for f in hits if f.severity == "warning"]
                if not hits:
                    missed.append(f"{trainer} every {stride} steps, {n} points")
    return missed


@pytest.mark.parametrize("cls", sorted(PATHOLOGIES))
def test_each_class_is_found_in_every_trainers_names_strides_and_lengths(cls: str) -> None:
    assert _missed(cls, LENGTHS[cls], STRIDES) == []


@pytest.mark.parametrize("cls", ["dpo_over_optimisation", "nan", "loss_spike",
                                 "entropy_collapse", "kl_growth", "reward_zero_variance"])
def test_each_class_is_found_in_a_long_run(cls: str) -> None:
    assert _missed(cls, (LONG,), (1,)) == []


@pytest.mark.parametrize("method", sorted(HEALTHY))
def test_healthy_runs_raise_no_warning_in_any_names_stride_or_length(method: str) -> None:
    p = HEALTHY[method]
    alarms = []
    for trainer in NAMES:
        for stride in STRIDES:
            for n in (4, 8, 16, 40, 200):
                s = series(p, trainer, stride, n, method)
                if s is None:
                    continue
                alarms += [f"{trainer} every {stride} steps, {n} points: {f.message}"
                           for f in evaluate(p.method, {}, s)
                           if SEVERITY_RANK[f.severity] >= SEVERITY_RANK["warning"]]
    assert alarms == []
