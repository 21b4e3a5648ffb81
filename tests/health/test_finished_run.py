"""A finished run's whole log (`loss.flat_finished_run`): judged once the run has succeeded,
in the engine, through the folder indexer, after the SDK's finish, and in health-eval's
replay, where it appears at the last line as a live user would see it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine

import runwatch
from runwatch.health import store as health_store
from runwatch.health.engine import Engine as HealthEngine
from runwatch.health.findings import Finding
from runwatch.health.scoring import CorpusRun, Label, replay, score
from runwatch.ingest.indexer import Indexer

from .helpers import to_batch
from .test_store import append, listing, write_run

RULE = "loss.flat_finished_run"
# Six epochs logged once each: the loss never 1.3% below its start.
FLAT = [2.31, 2.30, 2.32, 2.29, 2.30, 2.28]


def judged(series: dict[str, Any], method: str = "sft", finished: bool = True,
           rule: str = RULE) -> list[Finding]:
    return [f for f in HealthEngine(method, finished=finished).feed(to_batch(series))
            if f.rule_id == rule]


def test_a_flat_short_loss_is_judged_once_the_run_has_succeeded() -> None:
    assert judged({"loss": FLAT}, finished=False) == []
    # six points: an info (a handful of points cannot tell "does not fall" from "has not
    # fallen yet"); from eight, a warning
    (f,) = judged({"loss": FLAT})
    assert (f.status, f.severity, f.first_step, f.last_step) == ("open", "info", 0, 5)
    assert f.message == ("Over its whole log of 6 points, loss never fell more than 1.3% below "
                         "where it started (2.31 → lowest 2.28, last 2.28).")
    assert f.evidence["points"] == 6 and f.evidence["start"] == 2.31
    assert judged({"loss": [*FLAT, 2.31]})[0].severity == "info"
    (f,) = judged({"loss": [*FLAT, 2.31, 2.29]})
    assert (f.severity, f.evidence["points"], f.last_step) == ("warning", 8, 7)


def test_what_it_leaves_alone() -> None:
    near = {
        # noisy, once 6% below its start: a short run that learns, its last point back up
        "falls": [2.31, 2.33, 2.25, 2.29, 2.17, 2.24],
        # ends 6% above its start: a rising loss, the rising rules' to judge
        "rises": [2.0, 2.02, 1.99, 2.08, 2.12, 2.15],
        # a loss already near 0 has little left to lose
        "low": [0.08, 0.079, 0.081, 0.08, 0.079, 0.08],
        "three points": FLAT[:3],
    }
    for name, losses in near.items():
        assert judged({"loss": losses}) == [], name
    # a window cut from a longer run: its start is not the run's, so an info that says so
    (f,) = judged({"loss": (list(range(500, 506)), FLAT)})
    assert (f.severity, f.evidence["mid_run"]) == ("info", 1.0)
    assert f.message.startswith("Over a log that starts mid-run (not at the run's start) of "
                                "6 points, loss never fell more than 1.3%")
    # a policy loss is not expected to fall
    assert judged({"loss": FLAT}, method="grpo") == []


def test_a_run_long_enough_for_the_live_rule_is_left_to_it() -> None:
    # 40 points: sft.loss_not_falling judged it (and found it flat); nothing to add
    found = HealthEngine("sft", finished=True).feed(to_batch({"loss": FLAT * 6 + FLAT[:4]}))
    assert {f.rule_id for f in found} >= {"sft.loss_not_falling"}
    assert RULE not in {f.rule_id for f in found}
    # 20 points spanning 19 steps: too few for its warm-up, so the end judges them
    assert len(judged({"loss": (FLAT * 4)[:20]})) == 1


def test_the_end_read_twice_changes_nothing_and_later_points_judge_again() -> None:
    engine = HealthEngine("sft")
    assert engine.feed(to_batch({"loss": FLAT})) == []
    state = orjson.loads(orjson.dumps(engine.state()))
    ended = HealthEngine("sft", state=state, finished=True)
    (f,) = ended.finish()
    assert f.record is not None
    f.record["id"] = 7  # as the store writes it back
    assert ended.finish() == []
    # points logged after the end (a batch that came late): one 10% below the start
    cols = to_batch({"loss": [2.3, 2.08]})
    for c in cols.values():
        c.steps[:] = [6, 7]
    (g,) = [x for x in ended.feed(cols) if x.rule_id == RULE]
    assert (g.status, g.id) == ("resolved", 7)


def _index(engine: Engine, runs: Path) -> None:
    Indexer(engine, runs, hooks=[health_store.on_metrics],
            events_hooks=[health_store.on_events]).index_once()


def _end(run: Path, phase: str) -> None:
    with open(run / "events.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"ts": 2e9, "seq": 1, "phase": phase}) + "\n")


def test_the_indexer_judges_a_run_when_its_end_is_read(engine: Engine, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    lines = [{"step": i, "loss": v} for i, v in enumerate(FLAT)]
    ok = write_run(runs, "ok", "sft", lines)
    failed = write_run(runs, "failed", "sft", lines)
    _index(engine, runs)
    assert listing(engine, "ok", now=0) == [] and listing(engine, "failed", now=0) == []
    _end(ok, "SUCCEEDED")
    _end(failed, "FAILED")  # ended for a reason of its own: that is the news
    _index(engine, runs)
    (f,) = listing(engine, "ok", now=0)
    assert (f["rule_id"], f["status"], f["last_step"]) == (RULE, "open", 5)
    assert listing(engine, "failed", now=0) == []
    # read again with nothing new: the same finding, nothing added
    append(ok, [], 6)
    _index(engine, runs)
    assert [g["id"] for g in listing(engine, "ok", now=0)] == [f["id"]]


def test_an_import_is_judged_as_it_is_indexed(engine: Engine, tmp_path: Path) -> None:
    # a folder read whole in one pass: its end first, then its points
    runs = tmp_path / "runs"
    run = write_run(runs, "imported", "sft", [{"step": i, "loss": v} for i, v in enumerate(FLAT)])
    _end(run, "SUCCEEDED")
    _index(engine, runs)
    assert [f["rule_id"] for f in listing(engine, "imported", now=0)] == [RULE]


def test_the_sdk_finish_ends_the_run_the_rules_judge(engine: Engine, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with runwatch.init(project="p", name="short", method="sft", dir=runs) as run:
        for step, v in enumerate(FLAT):
            run.log({"train/loss": v}, step=step)
    _index(engine, runs)
    (f,) = listing(engine, "short", now=0)
    assert f["rule_id"] == RULE and f["status"] == "open"


def test_health_eval_replay_finds_it_at_the_last_line(tmp_path: Path) -> None:
    log = tmp_path / "corpus" / "flat" / "log.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("".join(json.dumps({"step": 10 * (i + 1), "loss": v}) + "\n"
                           for i, v in enumerate([*FLAT, 2.31, 2.29])), encoding="utf-8")
    run = CorpusRun("flat", log, "sft", "train", "loss_not_falling",
                    [Label("loss_not_falling", 10)])
    result = replay(run, tmp_path / "replay")
    (det,) = [d for d in result.detections if d.rule_id == RULE]
    assert (det.point, det.step, det.cls, det.severity) == (7, 80, "loss_not_falling",
                                                            "warning")
    assert score([result], "train")["classes"]["loss_not_falling"]["detected"] == 1


# loss.fell_little: the finished run's loss ended less than 15% below its start, where no
# other finding about a loss that does not fall is open at the end. Always an info.
LITTLE = "loss.fell_little"
# Ten epochs logged once each, the loss 7% lower at the end.
SLOW = [2.00, 1.97, 1.95, 1.92, 1.90, 1.89, 1.88, 1.87, 1.86, 1.86]


def little(series: dict[str, Any], method: str = "sft", finished: bool = True) -> list[Finding]:
    return judged(series, method, finished, LITTLE)


def test_a_small_fall_is_stated_as_an_info_once_the_run_has_succeeded() -> None:
    assert little({"loss": SLOW}, finished=False) == []
    (f,) = little({"loss": SLOW})
    assert (f.status, f.severity, f.first_step, f.last_step) == ("open", "info", 0, 9)
    assert f.message == ("Over its whole log of 10 points, loss never fell more than 7.0% below "
                         "where it started (2 → lowest 1.86, last 1.86).")
    # a DPO loss from ln 2 down 9%: the same info
    dpo = [0.693, 0.69, 0.68, 0.67, 0.66, 0.66, 0.65, 0.64, 0.63, 0.63, 0.63, 0.63]
    (g,) = little({"loss": dpo}, method="dpo")
    assert g.severity == "info" and "9.1% below" in g.message
    # a long run whose live finding resolved once the loss had fallen past 5%: the fall
    # is still stated at the end, and never as more than an info however long the log
    long = [2.0 - 0.14 * i / 199 + 0.01 * (-1) ** i for i in range(200)]
    found = HealthEngine("sft", finished=True).feed(to_batch({"loss": long}))
    live = [f for f in found if f.rule_id == "sft.loss_not_falling"]
    assert live and all(f.status == "resolved" for f in live)
    (h,) = [f for f in found if f.rule_id == LITTLE]
    assert h.severity == "info"


def test_a_fall_that_is_enough_or_already_told_is_left_alone() -> None:
    # ends 20% below its start: it learned
    assert little({"loss": [2.0, 1.94, 1.88, 1.82, 1.76, 1.72, 1.68, 1.64, 1.61, 1.60]}) == []
    # a loss already near 0, a log too short, a run still running, a policy loss
    assert little({"loss": [0.09, 0.089, 0.088, 0.088, 0.087, 0.087]}) == []
    assert little({"loss": SLOW[:3]}) == []
    assert little({"loss": SLOW}, method="grpo") == []
    # flat: loss.flat_finished_run says it (a warning from 8 points); no second finding
    found = HealthEngine("sft", finished=True).feed(to_batch({"loss": [*FLAT, 2.31, 2.29]}))
    assert [f.rule_id for f in found] == [RULE]
    # 40 flat points: the live rule's finding is open at the end; no second finding either
    found = HealthEngine("sft", finished=True).feed(to_batch({"loss": FLAT * 6 + FLAT[:4]}))
    assert "sft.loss_not_falling" in {f.rule_id for f in found}
    assert LITTLE not in {f.rule_id for f in found}


def test_only_a_finding_about_the_loss_itself_silences_it() -> None:
    # a DPO loss down 10% while the margin sat at 0 or below on its last 10 logs:
    # dpo.train_margin_not_positive (of the same signal, about the margin) is open at the
    # end, but says nothing of how far the loss fell
    n = 40
    series = {"loss": [0.693 * (1 - 0.1 * i / (n - 1)) for i in range(n)],
              "mean_margin": [0.02] * (n - 12) + [-0.01] * 12}
    found = HealthEngine("dpo", finished=True).feed(to_batch(series))
    assert any(f.rule_id == "dpo.train_margin_not_positive" and f.status == "open"
               for f in found)
    assert [f.severity for f in found if f.rule_id == LITTLE] == ["info"]


def test_it_is_listed_apart_from_the_live_findings(engine: Engine, tmp_path: Path) -> None:
    # the live rule's warnings resolved as the loss fell past 5%: the list keeps them as
    # they were, and the end's info about the whole log beside them, not merged into it
    runs = tmp_path / "runs"
    long = [2.0 - 0.14 * i / 199 + 0.01 * (-1) ** i for i in range(200)]
    run = write_run(runs, "slow", "sft", [{"step": i, "loss": v} for i, v in enumerate(long)])
    _end(run, "SUCCEEDED")
    _index(engine, runs)
    items = listing(engine, "slow", now=0)
    assert [(f["rule_id"], f["status"]) for f in items if f["rule_id"] == LITTLE] == [
        (LITTLE, "open")]
    live = [f for f in items if f["rule_id"] == "sft.loss_not_falling"]
    assert live and all(f["severity"] == "warning" and f["status"] == "resolved" for f in live)


def test_a_small_fall_read_twice_changes_nothing() -> None:
    engine = HealthEngine("sft")
    assert engine.feed(to_batch({"loss": SLOW})) == []
    ended = HealthEngine("sft", state=orjson.loads(orjson.dumps(engine.state())),
                         finished=True)
    (f,) = ended.finish()
    assert f.rule_id == LITTLE and f.record is not None
    f.record["id"] = 3
    assert ended.finish() == []
