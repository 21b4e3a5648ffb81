"""An upgrade that changes only what a rule's findings say (its advice) is a new rule
catalogue too: the findings an older runwatch stored with its advice are judged again, by
`runwatch runs health` on the run it shows and by `runwatch index` over the index, and
carry this runwatch's advice, keeping their ids. The older runwatch is this one's own
code, copied, with one rule's advice changed, indexing the runs folder in its own process.

Every field of a rule that a stored finding or engine state copies is in the catalogue's
fingerprint, so a field a later rule gains is too unless it is named as read live; and the
mark is the same in every process (a function's repr holds its address)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

import runwatch
from runwatch.health.engine import READ_LIVE, catalogue_fingerprint
from runwatch.health.rules import CATALOGUE
from runwatch.health.rules.base import Rule
from runwatch.health.store import CATALOGUE_MARK
from runwatch.store import schema as s
from tests.health.test_findings_judged_again_after_upgrade import grpo_run, pk_of
from tests.support import run_cli

RULE = "metric.non_finite"  # what grpo_run's NaN loss opens
OLDER_ADVICE = "An older runwatch's advice for a loss that went NaN."
# Appended to the copy's rule catalogue: that runwatch's only difference from this one.
OLDER_CATALOGUE = f"""
import dataclasses as _dataclasses

CATALOGUE = tuple(_dataclasses.replace(rule, advice={OLDER_ADVICE!r})
                  if rule.id == {RULE!r} else rule for rule in CATALOGUE)
BY_ID = {{rule.id: rule for rule in CATALOGUE}}
"""


@pytest.fixture
def older_runwatch(tmp_path: Path) -> Path:
    """A folder to put first on PYTHONPATH for an older runwatch: this one's package,
    copied, whose rule `RULE` gave `OLDER_ADVICE`."""
    root = tmp_path / "older"
    shutil.copytree(Path(runwatch.__file__).parent, root / "runwatch",
                    ignore=shutil.ignore_patterns("__pycache__", "static"))
    rules = root / "runwatch" / "health" / "rules" / "__init__.py"
    rules.write_text(rules.read_text() + OLDER_CATALOGUE)
    return root


def advice_stored(engine: Engine, run_pk: int) -> dict[int, str]:
    """The advice of the run's stored findings of `RULE`, by id."""
    f = s.findings.c
    with engine.connect() as conn:
        rows = conn.execute(select(f.id, f.advice)
                            .where(f.run_pk == run_pk, f.rule_id == RULE)).all()
    return {int(r.id): r.advice for r in rows}


def judged_by_the_older(engine: Engine, runs_dir: Path, db_url: str,
                        older: Path) -> tuple[int, dict[int, str]]:
    """The run `g` indexed and judged by the older runwatch; its pk and the older advice
    stored, by finding id."""
    grpo_run(runs_dir, "g")
    run_cli("index", str(runs_dir), "--db", db_url, env={"PYTHONPATH": str(older)})
    pk = pk_of(engine, "g")
    found = advice_stored(engine, pk)
    assert found and set(found.values()) == {OLDER_ADVICE}, found
    return pk, found


def todays_advice(runs_dir: Path, tmp_path: Path) -> str:
    """The advice this runwatch gives the run's `RULE` finding, on an index of its own."""
    fresh = tmp_path / "fresh.db"
    run_cli("index", str(runs_dir), "--db", str(fresh))
    answer = json.loads(run_cli("runs", "health", "g", "--db", str(fresh), "-o", "json").stdout)
    advice = {f["advice"] for f in answer["findings"] if f["rule_id"] == RULE}
    assert len(advice) == 1, answer
    return str(advice.pop())


def test_runs_health_shows_this_runwatch_s_advice_for_findings_an_older_one_stored(
        engine: Engine, runs_dir: Path, db_url: str, older_runwatch: Path,
        tmp_path: Path) -> None:
    """Before the fix the catalogue's mark held no advice: `runs health` found the older
    state current and showed the older advice forever."""
    pk, older = judged_by_the_older(engine, runs_dir, db_url, older_runwatch)
    answer = json.loads(run_cli("runs", "health", "g", "--db", db_url, "-o", "json").stdout)
    shown = {f["id"]: f["advice"] for f in answer["findings"] if f["rule_id"] == RULE}
    today = todays_advice(runs_dir, tmp_path)
    assert shown == {i: today for i in older}  # the same findings, with today's advice
    assert advice_stored(engine, pk) == shown


def test_runwatch_index_stores_this_runwatch_s_advice(
        engine: Engine, runs_dir: Path, db_url: str, older_runwatch: Path,
        tmp_path: Path) -> None:
    """`runwatch index` judges the run again though its folder holds nothing new."""
    pk, older = judged_by_the_older(engine, runs_dir, db_url, older_runwatch)
    out = run_cli("index", str(runs_dir), "--db", db_url).stdout
    assert "judged 1 run again with this runwatch's health rules" in out, out
    assert advice_stored(engine, pk) == {i: todays_advice(runs_dir, tmp_path) for i in older}


def _other(name: str, value: Any) -> Any:
    """A value of rule field `name`'s type that differs from `value` (a metric the vocabulary
    knows, for a field that names one)."""
    if name == "learning":
        return "loss" if value != "loss" else "reward_mean"
    if name == "not_with":
        return (*value, "num_turns_mean" if "num_turns_mean" not in value else "loss")
    if isinstance(value, bool):
        return not value
    if isinstance(value, str):
        return value + " (changed)"
    if isinstance(value, tuple):
        return (*value, value[0] if value else "x")
    if value is None or isinstance(value, (int, float)):
        return 1.5 if value != 1.5 else 2.5
    if callable(value):
        return _other_function
    return {**value, "changed": 1}


def _other_function() -> None:
    """A `derive` other than any rule's."""


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(Rule)])
def test_every_rule_field_a_finding_or_state_copies_is_in_the_fingerprint(name: str) -> None:
    """Changing any one field of one rule changes the catalogue's fingerprint, but for the
    fields every listing reads from the rule as it is now (`READ_LIVE`); a rule with a
    `derive` is changed by another function."""
    rules = list(CATALOGUE)
    at = next(i for i, rule in enumerate(rules) if rule.derive is not None)
    rules[at] = dataclasses.replace(rules[at], **{name: _other(name, getattr(rules[at], name))})
    changed = catalogue_fingerprint(rules) != catalogue_fingerprint(CATALOGUE)
    assert changed == (name not in READ_LIVE)


def test_the_catalogue_mark_is_the_same_in_every_process() -> None:
    """A mark that differed between processes would judge every run again at each start."""
    there = subprocess.run(
        [sys.executable, "-c",
         "from runwatch.health.store import CATALOGUE_MARK; print(CATALOGUE_MARK)"],
        capture_output=True, text=True, check=True).stdout.strip()
    assert there == CATALOGUE_MARK
