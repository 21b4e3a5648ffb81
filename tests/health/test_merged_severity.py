"""A group of findings listed as one is as severe as its worst: a warning that resolved
under an open info of the same signal is not hidden from the listing, the open counts or
`runs health --fail-on`, and a what-if lists its findings grouped as the stored listing
does."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from runwatch.health import store as health_store
from tests.support.cli import cli_here, run_cli

from .test_store import index, listing, write_run


def _finding(rule_id: str, severity: str, status: str, first: int, last: int,
             message: str) -> dict[str, Any]:
    return health_store.finding_json({
        "id": None, "rule_id": rule_id, "title": rule_id, "severity": severity,
        "status": status, "metric": "val/loss", "first_step": first, "last_step": last,
        "evidence": {"metric": "val/loss"}, "message": message, "advice": "."})


def test_a_resolved_warning_under_an_open_info_makes_the_group_a_warning() -> None:
    found = [_finding("sft.overfitting", "warning", "resolved", 99, 299,
                      "val/loss rose 6.3% while training loss fell 6.6%."),
             _finding("val.loss_above_best", "info", "open", 179, 399,
                      "val/loss rose from its best 0.90 to 0.94 (up 3.8%).")]
    (group,) = health_store.listed(found)
    # the lead says what holds now; the group's severity is its worst
    assert group["rule_id"] == "val.loss_above_best" and group["status"] == "open"
    assert group["severity"] == "warning"
    assert (group["first_step"], group["last_step"]) == (99, 399)
    assert "(warning, resolved at step 299)" in group["message"]
    assert [(i["rule_id"], i["severity"], i["status"]) for i in group["evidence"]["incident"]
            ] == [("val.loss_above_best", "info", "open"),
                  ("sft.overfitting", "warning", "resolved")]
    assert health_store.listed_open(found) == {"warning": 1}


def test_a_group_of_one_severity_names_the_others_plainly() -> None:
    # near miss: nothing more severe than the lead, so no severity in the message
    found = [_finding("val.gap_rising", "warning", "resolved", 99, 299, "gap rose."),
             _finding("sft.overfitting", "warning", "open", 179, 399, "val/loss rose.")]
    (group,) = health_store.listed(found)
    assert group["rule_id"] == "sft.overfitting" and group["severity"] == "warning"
    assert "Also: " in group["message"] and "(warning" not in group["message"]


def _overfit_then_eases(seed: int) -> list[dict[str, Any]]:
    """A training loss that falls all along; a validation loss logged every 20 steps that
    falls for 6 validations, rises for 7 and eases back, staying above its best."""
    rng = random.Random(seed)
    lines: list[dict[str, Any]] = []
    val_steps = range(19, 400, 20)
    for step in range(400):
        line: dict[str, Any] = {"step": step,
                                "loss": 2.718 ** (-step / 80) + 0.7 + rng.gauss(0, 0.01)}
        if step in val_steps:
            k = (step - 19) // 20
            v = 1.0 - 0.02 * k if k < 6 else (0.9 + 0.015 * (k - 6) if k < 13
                                              else 0.995 - 0.01 * (k - 13))
            line["val/loss"] = v + rng.gauss(0, 0.001)
        lines.append(line)
    return lines


def test_fail_on_warning_sees_a_warning_merged_under_an_info(
        engine: Engine, db_url: str, tmp_path: Path) -> None:
    """The trial's run: sft.overfitting (warning, resolved) and val.loss_above_best (info,
    open) listed as one info finding, and `--fail-on warning` exited 0."""
    runs = tmp_path / "runs"
    write_run(runs, "r", "sft", _overfit_then_eases(1), phase="SUCCEEDED")
    index(engine, runs)
    found = listing(engine, "r", now=0)
    (group,) = [f for f in found if "sft.overfitting" in
                {i["rule_id"] for i in f["evidence"].get("incident", [])}]
    assert group["status"] == "open" and group["severity"] == "warning"
    args = ("runs", "health", "r", "--dir", str(runs), "--db", db_url)
    assert cli_here(*args, "--fail-on", "warning", check=False).returncode == 1
    assert cli_here(*args, "--fail-on", "critical", check=False).returncode == 0
    shown = json.loads(cli_here(*args, "-o", "json").stdout)["findings"]
    assert [(f["rule_id"], f["severity"]) for f in shown] == [
        (f["rule_id"], f["severity"]) for f in found]


def test_fail_on_judges_the_findings_merged_into_an_incident() -> None:
    from runwatch.cli.health import worst

    # a group listed at its lead's severity (a server before groups took their worst)
    group = {"severity": "info", "evidence": {"incident": [
        {"rule_id": "val.loss_above_best", "severity": "info"},
        {"rule_id": "sft.overfitting", "severity": "warning"}]}}
    assert worst([group]) == 1
    assert worst([{"severity": "info", "evidence": {}}]) == 0
    assert worst([]) == -1


def test_a_what_if_groups_findings_as_the_stored_listing_does(
        engine: Engine, db_url: str, tmp_path: Path) -> None:
    """With an unrelated override, the what-if listed separately the findings the stored
    listing merges (grpo.reward_std_zero_often beside grpo.reward_std_zero)."""
    runs = tmp_path / "runs"
    lines = [{"step": i, "reward_std": 0.0 if i >= 10 else 0.3} for i in range(40)]
    write_run(runs, "r", "grpo", lines)
    index(engine, runs)
    stored = [(f["rule_id"], f["severity"], f["status"]) for f in listing(engine, "r", now=0)]
    assert ("grpo.reward_std_zero", "warning", "open") in stored
    assert "grpo.reward_std_zero_often" not in {r for r, _, _ in stored}
    overrides = tmp_path / "unrelated.yaml"
    overrides.write_text("rules:\n  grpo.clip_high: {above: 0.2}\n", encoding="utf-8")
    said = run_cli("runs", "health", "r", "--dir", str(runs), "--db", db_url,
                   "--thresholds", str(overrides), "-o", "json")
    what_if = [(f["rule_id"], f["severity"], f["status"])
               for f in json.loads(said.stdout)["findings"] if f["rule_id"] != "run.stalled"]
    assert what_if == [f for f in stored if f[0] != "run.stalled"]


def test_migration_0016_counts_a_group_at_its_worst(engine: Engine, db_url: str,
                                                    tmp_path: Path) -> None:
    """An index written before 0016 counted the trial's group at its lead's severity (an
    open info); opened by this runwatch, it counts it as the listing shows it."""
    from sqlalchemy import text

    from runwatch.store.db import open_engine
    from tests.support.migrations import downgrade

    runs = tmp_path / "runs"
    write_run(runs, "r", "sft", _overfit_then_eases(1), phase="SUCCEEDED")
    index(engine, runs)
    with engine.connect() as conn:
        now = health_store.open_by_severity(conn)
    assert now.get("warning") == 1, now
    with engine.begin() as conn:  # as the counting before it left the row
        conn.execute(text("UPDATE health_state SET open_info = open_info + 1, "
                          "open_warning = open_warning - 1"))
    downgrade(engine, "0015")
    engine.dispose()
    upgraded = open_engine(db_url)
    try:
        with upgraded.connect() as conn:
            assert health_store.open_by_severity(conn) == now
    finally:
        upgraded.dispose()


def test_one_rule_on_one_metric_through_two_variants_is_listed_once() -> None:
    """grpo.reward_hacking judges val/accuracy against accuracy and against reward_mean:
    one fall of the validation was two critical findings with the same steps (a trial,
    session 36). They are one listing; its evidence keeps both."""
    found = [_finding("grpo.reward_hacking", "critical", "open", 79, 199,
                      "val/accuracy fell 0.1 while accuracy rose 0.2."),
             _finding("grpo.reward_hacking", "critical", "open", 79, 199,
                      "val/accuracy fell 0.1 while reward_mean rose 0.3.")]
    (group,) = health_store.listed(found)
    assert group["severity"] == "critical" and len(group["evidence"]["incident"]) == 2
    # near miss: the same rule at steps apart stays two
    apart = [found[0], {**found[1], "first_step": 300, "last_step": 400}]
    assert len(health_store.listed(apart)) == 2
