"""`dpo.over_optimisation` in the unit the run logs its margin (session 37: a trial ran the
default DPO recipe for 300 steps instead of 150 and got 26 warnings on a healthy run, whose
held-out accuracy was 1 and whose chosen replies rose). Its limit, 10, is TRL's β-scaled
`rewards/margins`; the recipes and the SDK's spec log `mean_margin` in nats, unscaled, so
a run of β 0.3 read 3.6 as 12. A margin logged under runwatch's own name is held to the
limit divided by the run's `beta` (by 0.1, TRL's default, where the run gives none); one
logged under another trainer's name is judged as before."""

from __future__ import annotations

import pytest

from .helpers import evaluate, of_rule

STEPS = list(range(0, 300, 5))


def rising_to(top: float) -> list[float]:
    """A margin rising steadily from 0 to `top` over the run."""
    return [top * i / (len(STEPS) - 1) for i in range(len(STEPS))]


def over(key: str, top: float, **settings: float) -> list[str]:
    loss = [0.69 * (1 - i / (2 * len(STEPS))) for i in range(len(STEPS))]
    found = evaluate("dpo", dict(settings), {key: (STEPS, rising_to(top)), "loss": (STEPS, loss)})
    return [f.message for f in of_rule(found, "dpo.over_optimisation")]


@pytest.mark.parametrize("key", ["mean_margin", "val/mean_margin"])
def test_a_margin_in_nats_is_held_to_the_limit_over_beta(key: str) -> None:
    # the default recipe run longer: 12 nats at β 0.3 is 3.6 β-scaled, healthy
    assert over(key, 12.0, beta=0.3) == []
    assert over(key, 32.0, beta=0.3) == []  # near miss: 9.6 β-scaled
    (message,) = over(key, 36.0, beta=0.3)  # 10.8 β-scaled
    assert "above 33.3:" in message, message


def test_a_margin_in_nats_of_a_run_without_beta_is_read_at_trl_s_default() -> None:
    assert over("mean_margin", 95.0) == []
    (message,) = over("mean_margin", 105.0)
    assert "above 100:" in message
    # a beta that is no positive number is no beta
    assert over("mean_margin", 95.0, beta=0.0) == []


def test_the_deltas_under_runwatch_s_names_are_nats_too() -> None:
    loss = [0.6] * len(STEPS)
    series = {"mean_chosen_delta": (STEPS, [0.0] * len(STEPS)),
              "mean_rejected_delta": (STEPS, [-v for v in rising_to(12.0)]),
              "loss": (STEPS, loss)}
    assert of_rule(evaluate("dpo", {"beta": 0.3}, series), "dpo.over_optimisation") == []
    series["mean_rejected_delta"] = (STEPS, [-v for v in rising_to(36.0)])
    assert of_rule(evaluate("dpo", {"beta": 0.3}, series), "dpo.over_optimisation")


def test_trl_s_beta_scaled_margin_keeps_its_limit() -> None:
    # TRL's rewards/margins is β-scaled already: the run's beta does not scale it again
    assert over("rewards/margins", 9.5, beta=0.3) == []
    (message,) = over("rewards/margins", 12.0, beta=0.3)
    assert "above 10:" in message
    (message,) = over("eval_rewards/margins", 12.0, beta=0.1)
    assert "above 10:" in message
