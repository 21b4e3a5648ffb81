"""`loss.implausible`: a supervised loss far above a uniform guess over the vocabulary
(session 37: an SFT run of TRL's SFTTrainer at learning rate 100 logged 47,768, 514,506 and
146,162 nats a token for a 47-token model, and the engine said nothing, or only resolved
findings: every loss rule compares a loss with where it started, and this one blew up
before its first log)."""

from __future__ import annotations

import math

from runwatch.health.build import budget_value
from runwatch.health.rules import BY_ID

from .helpers import evaluate, of_rule


def implausible(settings: dict[str, float], loss: list[float],
                key: str = "loss") -> list[str]:
    found = evaluate("sft", settings, {key: (list(range(len(loss))), loss)})
    return [f"{f.status} {f.message}" for f in of_rule(found, "loss.implausible")]


def test_a_loss_blown_up_before_its_first_log_is_a_warning() -> None:
    assert implausible({"vocab_size": 47}, [47768.0, 514506.0, 146162.0]) == [
        "open loss reached 5.145e+05, above 7.7: 2 times the 3.85 nats of a uniform guess "
        "over the model's vocabulary."]
    # logged every step: 3.23, then 95,533
    assert implausible({"vocab_size": 47}, [3.23, 95533.0, 61217.0])
    # a validation loss too
    assert implausible({"vocab_size": 50257}, [1.9, 40.0], key="val/loss")


def test_near_misses() -> None:
    # a fine-tune of a real vocabulary: far below ln(50257) = 10.8
    assert implausible({"vocab_size": 50257}, [2.1, 1.9, 1.8, 1.7]) == []
    # a model trained from random weights starts near, even a little above, a uniform guess
    assert implausible({"vocab_size": 47}, [4.3, 4.0, 3.6, 3.2]) == []
    # no vocabulary size in the config: nothing to compare with
    assert implausible({}, [47768.0, 514506.0]) == []
    # a vocabulary of one token (or a setting that is no size) has no uniform guess
    assert implausible({"vocab_size": 1}, [47768.0]) == []


def test_the_budget_is_the_log_of_the_setting() -> None:
    rule = BY_ID["loss.implausible"]
    assert budget_value(rule, rule.params, {"vocab_size": 47.0}) == math.log(47.0)
    assert budget_value(rule, rule.params, {}) is None
