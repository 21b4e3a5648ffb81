"""The vocabulary is whole: every alias, rule and role names a metric it knows."""

from __future__ import annotations

import pytest

from runwatch.health.rules import Rule
from runwatch.metrics import BY_NAME, BY_ROLE, METRICS, Role, describe
from runwatch.metrics.aliases import EXACT, PATTERNS, SHOWN


def test_names_are_unique() -> None:
    assert len(BY_NAME) == len(METRICS)


def test_every_alias_names_a_known_metric() -> None:
    targets = [a.canonical for a in (*EXACT.values(), *SHOWN.values())]
    targets += [a.canonical for _, a in PATTERNS]
    assert sorted({t for t in targets if t not in BY_NAME}) == []


def test_every_role_has_one_metric() -> None:
    assert set(BY_ROLE) == set(Role)
    assert sum(1 for m in METRICS if m.role is not None) == len(Role)


def test_a_rule_that_reads_an_unknown_metric_is_refused() -> None:
    with pytest.raises(ValueError, match="does not know"):
        Rule(id="x.y", title="t", methods=("sft",), variants=(("los",),),
             detector="threshold", severity="info", condition="c", advice="a", message="m")


def test_describe_a_logged_key() -> None:
    assert describe("train/loss").canonical == "loss"
    assert describe("train/loss").role is Role.TRAIN_LOSS
    frac = describe("env/all/by_group/frac_mixed")
    assert (frac.canonical, frac.transform, frac.role) == ("zero_variance_skip_ratio", "1 - x",
                                                           None)
    other = describe("my/own_metric")
    assert (other.canonical, other.metric, other.role) == ("my/own_metric", None, None)
