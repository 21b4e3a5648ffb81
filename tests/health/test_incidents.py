"""One cause at one step is one finding that lists its metrics (issue 14: a NaN at one
step of a TRL DPO log gave one critical finding per metric, 16 for one run)."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select, update

from runwatch.health import store as health_store
from runwatch.health.engine import Engine as HealthEngine
from runwatch.health.findings import Finding
from runwatch.health.rules import BY_ID
from runwatch.ingest.importers import read_source
from runwatch.store import schema as s

from .helpers import evaluate, to_batch
from .test_store import append, index, listing, steps, write_run

NAN = math.nan
REAL = Path(__file__).resolve().parents[1] / "data" / "real"
DPO_KEYS = ("loss", "grad_norm", "rewards/margins", "logps/chosen")


def dpo_series(bad_steps: set[int], n: int = 40) -> dict[str, list[float]]:
    return {k: [NAN if i in bad_steps else 0.5 for i in range(n)] for k in DPO_KEYS}


def nonfinite(found: list[Finding]) -> list[Finding]:
    return [f for f in found if f.rule_id == "metric.non_finite"]


def test_nan_in_four_metrics_at_one_step_is_one_finding() -> None:
    (f,) = nonfinite(evaluate("dpo", {}, dpo_series({18})))
    assert f.status == "resolved" and f.first_step == f.last_step == 18
    assert f.evidence["metrics"] == list(DPO_KEYS)
    assert f.message == "loss, grad_norm, rewards/margins and logps/chosen were NaN at step 18."


def test_fed_step_by_step_it_is_still_one_finding() -> None:
    engine, series = HealthEngine("dpo"), dpo_series({18, 19})
    latest: dict[int, Finding] = {}  # finding id -> its latest state
    for step in range(40):
        batch = {k: ([step], [v[step]]) for k, v in series.items()}
        for f in nonfinite(engine.feed(to_batch(batch))):
            assert f.record is not None
            if f.record["id"] is None:
                f.record["id"] = len(latest) + 1  # what the store does on insert
            latest[f.record["id"]] = f
    (f,) = latest.values()
    assert f.status == "resolved"
    assert f.first_step == 18 and f.last_step == 19
    assert f.message.startswith("loss, grad_norm, rewards/margins and logps/chosen were NaN at "
                                "2 logged steps from 18 to 19")


def test_a_step_whose_lines_come_apart_counts_once() -> None:
    # An MLX log writes the validation loss and the training loss of step 3600 on two
    # lines, read in two batches by a live index; each was NaN. The incident counted the
    # step twice ("NaN at 54 logged steps" for 51) on the engine before.
    engine = HealthEngine("sft")
    found: list[Finding] = []
    for step, key in ((3590, "train_loss"), (3600, "val_loss"), (3600, "train_loss"),
                      (3610, "train_loss")):
        found += nonfinite(engine.feed(to_batch({key: ([step], [NAN])})))
    assert found[-1].evidence["count"] == 3
    assert "NaN at 3 logged steps from 3590 to 3610" in found[-1].message


def test_separate_bad_steps_are_separate_incidents() -> None:
    found = nonfinite(evaluate("dpo", {}, dpo_series({3, 30})))
    assert [(f.first_step, f.status) for f in found] == [(3, "resolved"), (30, "resolved")]


def test_real_trl_dpo_log_gives_one_finding_per_bad_stretch() -> None:
    # grad_norm is NaN at steps 1, 2, 18 and 74 of this run.
    imported = read_source(REAL / "dpo_soup_takehome" / "trainer_state.json")
    series: dict[str, tuple[list[int], list[float]]] = {}
    for rec in imported.records:
        for key, value in rec.items():
            if key not in ("step", "ts"):
                series.setdefault(key, ([], []))
                series[key][0].append(rec["step"])
                series[key][1].append(value)
    found = nonfinite(HealthEngine("dpo").feed(to_batch(series)))
    assert [(f.first_step, f.last_step, f.metric) for f in found] == [
        (1, 2, "grad_norm"), (18, 18, "grad_norm"), (74, 74, "grad_norm")]


def test_listing_names_every_metric_of_the_incident(engine: Engine, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = write_run(runs, "r", "dpo", steps(0, 5, loss=0.6, grad_norm=1.0))
    append(run, [{"step": 5, "loss": NAN, "grad_norm": math.inf}], 5)
    index(engine, runs)
    (f,) = [x for x in listing(engine, "r", now=0) if x["rule_id"] == "metric.non_finite"]
    assert f["status"] == "open" and f["metrics"] == ["loss", "grad_norm"]
    assert f["message"] == "loss and grad_norm were NaN or Infinity at step 5."
    append(run, steps(6, 8, loss=0.5, grad_norm=1.0), 6)
    index(engine, runs)
    (g,) = [x for x in listing(engine, "r", now=0) if x["rule_id"] == "metric.non_finite"]
    assert g["id"] == f["id"] and g["status"] == "resolved"


def test_a_flat_reward_over_a_long_run_is_one_finding() -> None:
    # A reward flat within its noise must not resolve and reopen as the noise wanders.
    rng = random.Random(0)
    reward = [0.5 + rng.gauss(0.0, 0.05) for _ in range(5000)]
    found = [f for f in evaluate("grpo", {}, {"reward_mean": reward})
             if f.rule_id == "rl.no_progress"]
    # One finding from the 5th point (too few to measure noise, the reward has not risen).
    assert [(f.first_step, f.status, f.severity) for f in found] == [(4, "open", "warning")]


def test_a_spike_in_loss_and_grad_norm_at_one_step_is_listed_once(engine: Engine,
                                                                    tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    lines = [{"step": i, "loss": 2.0 - 0.01 * i, "grad_norm": 1.0} for i in range(20)]
    lines += [{"step": 20, "loss": 3.0, "grad_norm": 20.0}]
    lines += [{"step": i, "loss": 1.8 - 0.01 * i, "grad_norm": 1.0} for i in range(21, 25)]
    write_run(runs, "r", "sft", lines)
    index(engine, runs)
    found = [x for x in listing(engine, "r", now=0) if x["first_step"] == 20]
    (f,) = found
    # One spike of each is info (a second within their hold would be the warning).
    assert f["severity"] == "info" and set(f["metrics"][:2]) == {"grad_norm", "loss"}
    assert {i["rule_id"] for i in f["evidence"]["incident"]} == {"optim.grad_norm_spike",
                                                                 "loss.spike"}
    assert "grad_norm spiked to 20" in f["message"] and "loss jumped from 1.81 to 3 (up 66%)" in \
        f["message"]


def test_a_k_of_n_count_read_whole_is_the_one_the_finding_held() -> None:
    # A run read whole: the clipping held on 9-10 of 10 steps, then stopped for 30 steps.
    # The resolved finding's count is what its window held, not the batch end's 0.
    series = {"grad_clip_factor": [0.5] * 20 + [1.0] * 30}
    found = [f for f in HealthEngine("sft").feed(to_batch(series))
             if f.rule_id == "optim.clipping_every_step"]
    assert found and found[0].status == "resolved"
    assert found[0].evidence["in_window"] == 10


def test_one_collapsing_entropy_is_listed_once(engine: Engine, tmp_path: Path) -> None:
    # The fast info rule, the trend's warning and the slow rules' warnings (fallen to a
    # quarter, to a tenth) all judge this entropy: one finding, led by a warning, naming
    # the four.
    runs = tmp_path / "runs"
    lines = [{"step": i, "entropy": 2.8 * math.exp(-i / 15)} for i in range(60)]
    write_run(runs, "r", "grpo", lines)
    index(engine, runs)
    found = [x for x in listing(engine, "r", now=0) if "entropy" in x["rule_id"]]
    (f,) = found
    assert f["severity"] == "warning" and f["first_step"] < 15
    assert {i["rule_id"] for i in f["evidence"]["incident"]} == {
        "grpo.entropy_falling", "grpo.entropy_collapse", "grpo.entropy_low",
        "grpo.entropy_crash"}
    # its message is the lead's alone, naming the others: theirs say the same again
    lead, *others = f["evidence"]["incident"]
    assert lead["rule_id"] == f["rule_id"] and f["message"].startswith(lead["message"])
    assert not any(o["message"] in f["message"] for o in others)
    assert all(BY_ID[o["rule_id"]].title.lower() in f["message"] for o in others)


def test_open_findings_are_counted_as_listed(engine: Engine, tmp_path: Path) -> None:
    # /metrics counts open findings by severity without listing each run: its count is the
    # listings' (one per incident), not the stored rows'.
    runs = tmp_path / "runs"
    write_run(runs, "entropy", "grpo",
              [{"step": i, "entropy": 2.8 * math.exp(-i / 15)} for i in range(60)])
    write_run(runs, "spikes", "sft",
              [{"step": i, "loss": 3.0 if i == 20 else 2.0 - 0.01 * i,
                "grad_norm": 20.0 if i == 20 else 1.0} for i in range(25)])
    write_run(runs, "nan", "dpo", [{"step": i, "loss": NAN if i in (3, 11) else 0.5,
                                    "grad_norm": math.inf if i == 11 else 1.0}
                                   for i in range(12)])
    write_run(runs, "fine", "sft", steps(0, 5, loss=0.6))
    index(engine, runs)
    listed: Counter[str] = Counter()
    for name in ("entropy", "spikes", "nan", "fine"):
        listed.update(f["severity"] for f in listing(engine, name, now=0)
                      if f["status"] == "open")
    with engine.connect() as conn:
        counted = health_store.open_by_severity(conn)
        stored = conn.execute(select(func.count()).select_from(s.findings)
                              .where(s.findings.c.status == "open")).scalar()
    assert counted == dict(listed)
    assert listed["warning"] and listed["critical"] == 1
    assert stored is not None and stored > sum(listed.values())


def test_a_nan_and_infinities_of_one_metric_are_named_each(engine: Engine,
                                                           tmp_path: Path) -> None:
    # loss went NaN, then +inf, then -inf: the message said "NaN" alone (each metric kept
    # its first kind), also when the steps come in batches apart, through the stored state.
    (f,) = nonfinite(evaluate("sft", {}, {"loss": [0.5, NAN, math.inf, -math.inf]}))
    assert f.message == "loss was NaN, Infinity or -Infinity at 3 logged steps from 1 to 3."
    (g,) = nonfinite(evaluate("sft", {}, {"loss": [0.5, math.inf, math.inf]}))
    assert g.message == "loss was Infinity at 2 logged steps from 1 to 2."
    runs = tmp_path / "runs"
    run = write_run(runs, "r", "sft", [{"step": 0, "loss": 0.5}, {"step": 1, "loss": NAN}])
    index(engine, runs)
    for seq, value in ((2, math.inf), (3, -math.inf)):
        append(run, [{"step": seq, "loss": value}], seq)
        index(engine, runs)
    (h,) = [x for x in listing(engine, "r", now=0) if x["rule_id"] == "metric.non_finite"]
    assert h["message"] == "loss was NaN, Infinity or -Infinity at 3 logged steps from 1 to 3."


def test_an_incident_saved_before_kinds_were_kept_still_names_its_first_kind(
        engine: Engine, tmp_path: Path) -> None:
    """A state saved by the version before kept no "kinds": the incident's NaN, seen
    then, stays in its message when an infinity comes after the upgrade."""
    runs = tmp_path / "runs"
    run = write_run(runs, "old", "sft", [{"step": 0, "loss": 0.5}, {"step": 1, "loss": NAN}])
    index(engine, runs)

    def without_kinds(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: without_kinds(v) for k, v in node.items() if k != "kinds"}
        return [without_kinds(v) for v in node] if isinstance(node, list) else node

    with engine.begin() as conn:
        (state,) = conn.execute(select(s.health_state.c.state)).scalars().all()
        assert '"kinds"' in state
        conn.execute(update(s.health_state).values(
            state=json.dumps(without_kinds(json.loads(state)))))
    append(run, [{"step": 2, "loss": math.inf}], 2)
    index(engine, runs)
    (h,) = [x for x in listing(engine, "old", now=0) if x["rule_id"] == "metric.non_finite"]
    assert h["message"] == "loss was NaN or Infinity at 2 logged steps from 1 to 2."


def test_an_exploding_loss_reads_by_how_far_it_rose(engine: Engine, tmp_path: Path) -> None:
    # A loss flat at 1 that then doubles every 6 steps, to about 800: the listing led
    # with "loss jumped from 1.023 to 1.506 (up 47%) and stayed up for 3 logged points",
    # the onset alone, and its spike finding quoted the latest jump ("up 13%; 35 jumps
    # within 10 points"), so nothing said how far the loss had gone.
    rng = random.Random(1)
    runs = tmp_path / "runs"
    lines = [{"step": i, "loss": 1.0 + rng.gauss(0.0, 0.02) if i <= 60
              else 2.0 ** ((i - 60) / 6.2) * (1 + rng.gauss(0.0, 0.1))} for i in range(1, 121)]
    write_run(runs, "boom", "sft", lines)
    index(engine, runs)
    listed = listing(engine, "boom", now=0)
    (up,) = [f for f in listed if f["rule_id"] in ("loss.doubled", "loss.above_start",
                                                   "loss.stepped_up", "loss.rising")]
    # the rise since the start leads, as a multiple; the others follow by their titles
    assert up["rule_id"] == "loss.doubled" and up["status"] == "open"
    fold = int(up["message"].split("rose ")[1].split("-fold")[0].replace(",", ""))
    assert 500 < fold < 1000
    assert "Also: " in up["message"] and "loss jumped and stayed up" in up["message"]
    # the step up says how long it stayed up and where the loss is now
    (stepped,) = [i for i in up["evidence"]["incident"] if i["rule_id"] == "loss.stepped_up"]
    stayed = int(stepped["message"].split("stayed up for ")[1].split(" ")[0])
    latest = float(stepped["message"].split("(latest ")[1].rstrip(").").replace(",", ""))
    assert stayed > 40 and latest == float(f"{lines[-1]['loss']:.4g}")
    # repeated jumps are counted from where they began
    (spike,) = [f for f in listed if f["rule_id"] == "loss.spike"]
    assert f"jumps from step {spike['first_step']}, each within 10 points" in spike["message"]
    # the upturn's "now" is a median of 3, and says so
    (turn,) = [f for f in listed if f["rule_id"] == "loss.upturn"]
    assert "its latest 3 points' median is" in turn["message"] and "times the low" in \
        turn["message"]


def test_a_message_names_the_metric_as_the_run_logs_it() -> None:
    # TRL logs its KL to the reference as `kl`; the finding read "fb/loss/kl_ref/mean rose
    # 0.24 from step 4 to 39", a name the run never logged
    series = {"kl": [0.01 * i for i in range(40)], "reward_mean": [0.1 + 0.01 * i
                                                                  for i in range(40)]}
    (kl,) = [f for f in evaluate("grpo", {}, series) if f.rule_id == "grpo.kl_ref_growing"]
    assert kl.message.startswith("kl rose "), kl.message
    assert kl.metric == "fb/loss/kl_ref/mean"  # the data keeps the canonical name
    # a key read through a transform is named with its canonical name and its own
    ppl = {"loss": [3.0 - 0.01 * i for i in range(60)],
           "eval_perplexity": [20.0] * 10 + [20.0 * 1.08 ** i for i in range(50)]}
    found = [f for f in evaluate("sft", {}, ppl) if f.metric == "val/loss"]
    assert found and all("val/loss (from eval_perplexity)" in f.message for f in found), \
        [f.message for f in found]


def test_a_step_up_counts_every_point_it_stayed_up() -> None:
    # the finding opens at the third point above the old level: it read "stayed up for 1
    # logged points" then, and always 2 fewer than it had (found in review)
    for after in (3, 4, 12):
        loss = [1.0 + 0.01 * (i % 2) for i in range(30)] + [2.0 + 0.01 * (i % 2)
                                                             for i in range(after)]
        (f,) = [x for x in evaluate("sft", {}, {"loss": loss}) if x.rule_id == "loss.stepped_up"]
        assert f"and stayed up for {after} logged points (latest " in f.message, f.message
