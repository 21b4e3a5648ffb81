"""The keys API (`describe`) reads a key as the displays do, SHOWN names included.

`GET /api/runs/{run}/metrics/keys` said TRL's `num_tokens` and a loop's `lr` were
themselves, with no role, though docs/metrics.md lists them (`num_tokens` → trained_tokens,
role tokens) and the run's results found them through `find_key`: `describe` read the
alias tables the health rules read and not SHOWN, the names only the displays read.
"""

from __future__ import annotations

import pytest

from runwatch.metrics import BY_NAME, Role, describe, find_key
from runwatch.metrics.aliases import EXACT, SHOWN, canonical, health_name


@pytest.mark.parametrize(("key", "name", "role"), [
    ("num_tokens", "trained_tokens", Role.TOKENS),
    ("tokens", "trained_tokens", Role.TOKENS),
    ("lr", "learning_rate", Role.LEARNING_RATE),
    ("grad_accum", "gradient_accumulation_steps", Role.GRAD_ACCUM),
])
def test_a_shown_name_is_described_as_the_metric_it_shows(key: str, name: str,
                                                          role: Role) -> None:
    meaning = describe(key)
    assert (meaning.canonical, meaning.role) == (name, role)
    assert meaning.metric is BY_NAME[name]


def test_a_shown_name_stays_unread_by_the_health_rules() -> None:
    # SHOWN is the displays' on purpose (the HF Trainer's train_loss is the run's mean):
    # the rules read the alias tables, and train_loss and lr only alone (READ_WHEN_ALONE)
    assert canonical("num_tokens") == ("num_tokens", None)
    assert health_name("num_tokens") == ("num_tokens", None)
    assert describe("train/num_tokens").role is None  # as find_key: SHOWN by its own name


def _keys() -> list[str]:
    names = [*EXACT, *SHOWN, *BY_NAME]
    return [*names, *(f"train/{n}" for n in names), *(f"eval/{n}" for n in names),
            "val-core/gsm8k/acc/mean@1", "my/own_metric"]


def test_describe_and_find_key_give_a_key_the_same_role() -> None:
    # a key describe gives a role is the key find_key picks for it, alone, and the other way
    differ = [(k, r) for k in _keys() for r in Role
              if (describe(k).role == r) != (find_key([k], r) == k)]
    assert differ == []
