"""A synthetic stress set for the health rules (issue 14): each pathology class written
under several trainers' metric names, logged at several strides and run lengths, so a
rule that only works for one trainer's names, every-step logging or long runs shows.

A case is a class's series in one trainer's names at one stride and length; a finding of
the class (runwatch.health.scoring.RULE_CLASSES) must come. Healthy series in the same
names must raise no warning. The series are seeded and deterministic; the names are what
each trainer's source logs (docs/metrics.md lists them).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

Series = dict[str, tuple[list[int], list[float]]]

# What each trainer calls the metrics the classes below read.
NAMES: dict[str, dict[str, str]] = {
    "trl": {"loss": "loss", "val_loss": "eval_loss", "reward": "reward",
            "reward_std": "reward_std", "zero_std": "frac_reward_zero_std",
            "entropy": "entropy", "kl": "kl", "margin": "rewards/margins",
            "chosen": "rewards/chosen", "rejected": "rewards/rejected",
            "accuracy": "rewards/accuracies", "grad_norm": "grad_norm"},
    "verl": {"reward": "critic/rewards/mean", "entropy": "actor/entropy",
             "kl": "actor/kl_loss", "grad_norm": "actor/grad_norm"},
    "openrlhf": {"loss": "gpt_loss", "reward": "reward", "entropy": "policy_entropy",
                 "kl": "kl", "chosen": "chosen_reward", "rejected": "reject_reward",
                 "grad_norm": "actor_grad_norm"},
    "tinker": {"loss": "train_mean_nll", "reward": "env/all/reward/total",
               "zero_std": "env/all/by_group/frac_mixed", "entropy": "optim/entropy"},
    "tensorboard": {"loss": "train/loss", "val_loss": "eval/loss", "reward": "train/reward",
                    "margin": "train/rewards/margins", "accuracy": "train/rewards/accuracies",
                    "entropy": "train/entropy", "kl": "train/kl",
                    "grad_norm": "train/grad_norm"},
    # A hand-written loop's `val_loss` and `reward/mean` are read where the run logs no
    # other name for those roles (docs/health.md, "Changed in session 8").
    "plain": {"loss": "loss", "val_loss": "val_loss", "reward": "mean_reward",
              "reward_std": "train_reward_std", "entropy": "policy/entropy",
              "grad_norm": "grad_norm"},
    "loop": {"loss": "train_loss", "val_loss": "val_loss", "reward": "reward/mean"},
    "nemo": {"loss": "reduced_train_loss", "val_loss": "val_loss", "grad_norm": "grad_norm"},
    "lightning": {"loss": "train_loss_step", "val_loss": "val_loss"},
}


@dataclass(frozen=True)
class Pathology:
    """One class (or a healthy run): the method it is imported as, the roles it logs, and
    a series maker (role -> values at logged points 0..n-1, given n and a seed)."""

    method: str
    roles: tuple[str, ...]
    make: Callable[[int, random.Random], dict[str, list[float]]]
    # Some roles are logged less often (validation): every `sparse` logged points.
    sparse: tuple[str, ...] = ()


def _dpo_over_optimisation(n: int, rng: random.Random) -> dict[str, list[float]]:
    # The margin grows past 100 as the rejected reward collapses, the loss sinks to 0.
    t = [i / max(1, n - 1) for i in range(n)]
    rejected = [-(150 * x * x) - rng.uniform(0, 0.5) for x in t]
    chosen = [-2 * x - rng.uniform(0, 0.3) for x in t]
    margin = [c - r for c, r in zip(chosen, rejected, strict=True)]
    loss = [math.log1p(math.exp(-m)) if m < 30 else 0.0 for m in margin]
    return {"margin": margin, "chosen": chosen, "rejected": rejected, "loss": loss,
            "accuracy": [min(1.0, 0.5 + m) for m in margin]}


def _nan(n: int, rng: random.Random) -> dict[str, list[float]]:
    loss = [2.0 * math.exp(-3 * i / n) + rng.uniform(0, 0.02) for i in range(n)]
    grad = [1.0 + rng.uniform(0, 0.1) for _ in range(n)]
    at = n // 2
    loss[at] = math.nan
    grad[at] = math.nan
    return {"loss": loss, "grad_norm": grad}


def _loss_spike(n: int, rng: random.Random) -> dict[str, list[float]]:
    loss = [2.0 * math.exp(-2 * i / n) + rng.gauss(0, 0.01) for i in range(n)]
    loss[(3 * n) // 4] *= 1.8
    return {"loss": loss}


def _loss_spikes_repeated(n: int, rng: random.Random) -> dict[str, list[float]]:
    loss = [2.0 * math.exp(-2 * i / n) + rng.gauss(0, 0.01) for i in range(n)]
    at = (3 * n) // 4
    loss[at - 3] *= 1.8
    loss[at] *= 1.8
    return {"loss": loss}


def _no_progress(n: int, rng: random.Random) -> dict[str, list[float]]:
    return {"reward": [0.4 + rng.gauss(0, 0.05) for _ in range(n)]}


def _entropy_collapse(n: int, rng: random.Random) -> dict[str, list[float]]:
    return {"entropy": [1.2 * math.exp(-5 * i / max(1, n - 1)) * (1 + rng.gauss(0, 0.03))
                        for i in range(n)]}


def _kl_growth(n: int, rng: random.Random) -> dict[str, list[float]]:
    return {"kl": [0.6 * (i / max(1, n - 1)) ** 1.2 + abs(rng.gauss(0, 0.005))
                   for i in range(n)]}


def _zero_variance(n: int, rng: random.Random) -> dict[str, list[float]]:
    return {"zero_std": [min(1.0, 0.7 + 0.3 * i / max(1, n - 1) + rng.uniform(0, 0.05))
                         for i in range(n)]}


def _loss_zero(n: int, rng: random.Random) -> dict[str, list[float]]:
    # One real loss, then exactly 0 on every later log (no supervised token left).
    return {"loss": [2.0 + rng.uniform(0, 0.1)] + [0.0] * (n - 1)}


def _loss_at_chance(n: int, rng: random.Random) -> dict[str, list[float]]:
    # A model that never leaves a uniform guess over GPT-2's vocabulary: ln 50257.
    return {"loss": [10.825 + rng.uniform(-0.002, 0.002) for _ in range(n)]}


def _loss_stepped_up(n: int, rng: random.Random) -> dict[str, list[float]]:
    # Falls and settles, then jumps 40% at three quarters of the run and stays there.
    at = (3 * n) // 4
    return {"loss": [(2.0 * math.exp(-3 * i / n) + 0.8) * (1.4 if i >= at else 1.0)
                     + rng.gauss(0, 0.005) for i in range(n)]}


def _healthy(n: int, rng: random.Random) -> dict[str, list[float]]:
    """Every role as a healthy run logs it: the loss falls and levels, DPO's margin grows to
    a few units, the reward climbs and levels, the entropy eases down by a third, the KL
    rises to 0.05 and is held there, most groups keep a reward spread."""
    t = [i / max(1, n - 1) for i in range(n)]
    loss = [0.6 + 1.4 * math.exp(-4 * x) + rng.gauss(0, 0.01) for x in t]
    margin = [3.0 * x + rng.gauss(0, 0.1) for x in t]
    return {
        "loss": loss, "val_loss": [0.7 + 1.3 * math.exp(-4 * x) for x in t],
        "grad_norm": [1.0 + rng.uniform(0, 0.2) for _ in t],
        "margin": margin, "chosen": [-0.5 * x for x in t],
        "rejected": [-0.5 * x - m for x, m in zip(t, margin, strict=True)],
        "accuracy": [0.5 + 0.4 * x for x in t],
        "reward": [0.2 + 0.5 * (1 - math.exp(-4 * x)) + rng.gauss(0, 0.03) for x in t],
        "reward_std": [0.3 + rng.uniform(0, 0.05) for _ in t],
        "zero_std": [0.2 + rng.uniform(0, 0.1) for _ in t],
        "entropy": [0.9 - 0.3 * x + rng.gauss(0, 0.01) for x in t],
        "kl": [0.05 * min(1.0, 5 * x) + abs(rng.gauss(0, 0.002)) for x in t],
    }


def _overfitting(n: int, rng: random.Random) -> dict[str, list[float]]:
    loss = [2.0 * math.exp(-3 * i / n) + rng.uniform(0, 0.02) for i in range(n)]
    # Validation falls for the first third, then climbs by half of its level.
    val = [1.5 - 0.3 * min(i, n / 3) / (n / 3) + 0.8 * max(0.0, i - n / 3) / n
           for i in range(n)]
    return {"loss": loss, "val_loss": val}


PATHOLOGIES: dict[str, Pathology] = {
    "dpo_over_optimisation": Pathology(
        "dpo", ("margin", "chosen", "rejected", "loss", "accuracy"), _dpo_over_optimisation),
    "nan": Pathology("sft", ("loss", "grad_norm"), _nan),
    "loss_spike": Pathology("sft", ("loss",), _loss_spike),
    "loss_spikes_repeated": Pathology("sft", ("loss",), _loss_spikes_repeated),
    "rl_no_progress": Pathology("grpo", ("reward",), _no_progress),
    "entropy_collapse": Pathology("grpo", ("entropy",), _entropy_collapse),
    "kl_growth": Pathology("grpo", ("kl",), _kl_growth),
    "reward_zero_variance": Pathology("grpo", ("zero_std",), _zero_variance),
    "overfitting": Pathology("sft", ("loss", "val_loss"), _overfitting, sparse=("val_loss",)),
    "loss_zero": Pathology("sft", ("loss",), _loss_zero),
    "loss_not_falling": Pathology("sft", ("loss",), _loss_at_chance),
    "loss_rising": Pathology("sft", ("loss",), _loss_stepped_up),
}
HEALTHY: dict[str, Pathology] = {
    "sft": Pathology("sft", ("loss", "val_loss", "grad_norm"), _healthy, sparse=("val_loss",)),
    "dpo": Pathology("dpo", ("margin", "chosen", "rejected", "loss", "accuracy"), _healthy),
    "grpo": Pathology("grpo", ("reward", "reward_std", "zero_std", "entropy", "kl",
                               "grad_norm"), _healthy),
}
# Names whose value is the complement of the role's (tinker-cookbook logs the share of
# groups with mixed rewards).
COMPLEMENT = {("tinker", "zero_std")}
# Roles any one of which a class can be found from (a DPO margin, or the chosen and
# rejected rewards it is the difference of).
ANY_OF = {"dpo_over_optimisation": ({"margin"}, {"chosen", "rejected"})}


def series(p: Pathology, trainer: str, stride: int, n: int, seed: str = "",
           sparse_every: int = 5) -> Series | None:
    """`p`'s series in `trainer`'s names, `n` logged points every `stride` steps
    (validation every `sparse_every` of them); the roles the trainer has no name for are
    left out, and None is returned when what is left cannot show the class."""
    names = NAMES[trainer]
    values = p.make(n, random.Random(f"{seed}-{trainer}-{stride}-{n}"))
    out: Series = {}
    for role in p.roles:
        name = names.get(role)
        if name is None:
            continue
        steps = [stride * (i + 1) for i in range(n)]
        vals = values[role]
        if (trainer, role) in COMPLEMENT:
            vals = [1.0 - v for v in vals]
        if role in p.sparse:
            keep = [i for i in range(n) if (i + 1) % sparse_every == 0]
            steps, vals = [steps[i] for i in keep], [vals[i] for i in keep]
        out[name] = (steps, vals)
    return out or None


def shows(cls: str, trainer: str) -> bool:
    """Whether `trainer` names the roles class `cls` is found from."""
    names = NAMES[trainer]
    groups = ANY_OF.get(cls, (set(PATHOLOGIES[cls].roles),))
    return any(all(r in names for r in g) for g in groups)
