"""The corpus score: replay through the live path, precision, recall and delay per class
(tiny labelled fixture with a known detection, a known miss and a known false positive),
and `runwatch health-eval` on the real corpus."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from runwatch.cli.main import app
from runwatch.health.rules import BY_ID
from runwatch.health.scoring import (
    RULE_CLASSES,
    CorpusRun,
    interval,
    load_corpus,
    read_labels,
    replay,
    replay_all,
    score,
)
from runwatch.ingest.importers import read_source

REAL = Path(__file__).resolve().parents[1] / "data" / "real"


def trl_log(folder: Path, losses: list[float]) -> None:
    """A TRL trainer_state.json logging `losses` at steps 1, 2, …"""
    folder.mkdir(parents=True)
    history = [{"step": i + 1, "loss": v, "grad_norm": 1.0} for i, v in enumerate(losses)]
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": history}),
                                               encoding="utf-8")


def fixture(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    steady = [1.0 - 0.01 * i for i in range(8)]
    trl_log(corpus / "found", [*steady[:4], math.nan, *steady[5:]])
    trl_log(corpus / "missed", steady)
    trl_log(corpus / "healthy_nan", [*steady[:6], math.nan, steady[7]])
    labels: dict[str, Any] = {"runs": {
        "found": {"file": "trainer_state.json", "method": "sft", "split": "train",
                  "label": "nan", "onset_step": 4},
        "missed": {"file": "trainer_state.json", "method": "sft", "split": "holdout",
                   "round": 2, "label": "overfitting", "onset_step": 3},
        "healthy_nan": {"file": "trainer_state.json", "method": "sft", "split": "train",
                        "label": "healthy", "onset_step": None},
    }}
    (corpus / "labels.yaml").write_text(yaml.safe_dump(labels), encoding="utf-8")
    return corpus


def test_score_of_a_known_detection_a_miss_and_a_false_positive(tmp_path: Path) -> None:
    results = replay_all(load_corpus(fixture(tmp_path)))
    every = score(results, "all")
    nan = every["classes"]["nan"]
    # Found on its run one logged step after the onset it was labelled with (the NaN
    # is at step 5), and once on a healthy run: precision 1/2.
    assert (nan["runs"], nan["detected"], nan["recall"]) == (1, 1, 1.0)
    assert nan["false_positives"] == ["healthy_nan"] and nan["precision"] == 0.5
    assert nan["delays_points"] == {"found": 1} and nan["median_delay_steps"] == 1
    over = every["classes"]["overfitting"]
    assert (over["detected"], over["recall"], over["precision"]) == (0, 0.0, None)
    assert over["missed"] == ["missed"]
    assert every["pathologies"] == {"runs": 2, "detected": 1, "recall": 0.5, "warned": 1,
                                    "warned_recall": 0.5, "median_delay_points": 1,
                                    "recall_interval": interval(1, 2)}
    assert every["healthy"]["with_warnings"] == {"healthy_nan": ["metric.non_finite"]}
    held = score(results, "holdout")
    assert held["runs"] == 1 and held["pathologies"]["recall"] == 0.0
    assert "nan" not in held["classes"]


def test_a_pathology_found_by_an_info_alone_is_found_but_not_warned(tmp_path: Path) -> None:
    # One isolated jump of a noisy falling loss: loss.spike finds it as an info (a warning
    # takes two jumps), so the run counts as found and not as warned; the NaN run beside
    # it is told by a critical finding, so it counts as both.
    corpus = tmp_path / "corpus"
    noise = [0.004, -0.007, 0.009, -0.002, 0.006, -0.009, 0.001, 0.008, -0.005, 0.003]
    losses = [2.0 - 0.01 * i + noise[i % 10] for i in range(30)]
    losses[20] *= 1.6
    trl_log(corpus / "spike", losses)
    trl_log(corpus / "nan", [*losses[:4], math.nan, *losses[5:20]])
    labels = {"runs": {
        "spike": {"file": "trainer_state.json", "method": "sft", "split": "train",
                  "label": "loss_spike", "onset_step": 21},
        "nan": {"file": "trainer_state.json", "method": "sft", "split": "train",
                "label": "nan", "onset_step": 5}}}
    (corpus / "labels.yaml").write_text(yaml.safe_dump(labels), encoding="utf-8")
    results = replay_all(load_corpus(corpus))
    spike = next(r for r in results if r.run.name == "spike")
    assert {(d.rule_id, d.severity) for d in spike.detections
            if d.cls == "loss_spike"} == {("loss.spike", "info")}
    sc = score(results, "train")["pathologies"]
    assert (sc["detected"], sc["recall"], sc["warned"], sc["warned_recall"]) == (2, 1.0, 1, 0.5)
    res = CliRunner().invoke(app, ["health-eval", "--corpus", str(corpus), "--split", "train"])
    assert res.exit_code == 0, res.output
    assert "2 of 2 pathologies found (100%, 95% interval 34-100%; 1 by a warning, 50%)" \
        in res.output


def test_the_score_states_each_share_with_its_wilson_interval() -> None:
    # Wilson's bounds in closed form where k is 0 or n: z²/(n + z²) and n/(n + z²)
    z2 = 1.96 ** 2
    assert interval(0, 243) == (0.0, pytest.approx(z2 / (243 + z2)))
    assert interval(154, 154) == (pytest.approx(154 / (154 + z2)), pytest.approx(1.0))
    # symmetric in found and missed, and narrower than the share's whole range
    low, high = interval(121, 154) or (0, 0)
    other = interval(33, 154) or (0, 0)
    assert (low, high) == (pytest.approx(1 - other[1]), pytest.approx(1 - other[0]))
    assert 0.71 < low < 121 / 154 < high < 0.85
    assert interval(0, 0) is None


def test_health_eval_scores_one_round_on_its_own(tmp_path: Path) -> None:
    # What the lead runs once a new round is merged: `--round N` scores that round's
    # held-back runs alone, under the round's name.
    corpus = fixture(tmp_path)
    res = CliRunner().invoke(app, ["health-eval", "--corpus", str(corpus), "--round", "2",
                                   "-o", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert list(out["scores"]) == ["holdout round 2"]
    assert [r["name"] for r in out["runs"]] == ["missed"]
    assert out["scores"]["holdout round 2"]["pathologies"]["runs"] == 1
    none = CliRunner().invoke(app, ["health-eval", "--corpus", str(corpus), "--round", "3"])
    assert none.exit_code != 0 and "has no held-back run of round 3" in none.output
    # A round is held back: with --split train there is nothing to score (it printed
    # the held-back round's score as if --split were not given).
    train = CliRunner().invoke(app, ["health-eval", "--corpus", str(corpus), "--round", "2",
                                     "--split", "train"])
    assert train.exit_code != 0 and "--split train has none" in train.output


def test_every_classed_rule_exists() -> None:
    assert all(rule_id in BY_ID for rule_id in RULE_CLASSES)


# Only rounds already scored are replayed: a round merged but not yet scored keeps its one
# clean score for the lead (labels.yaml's scored_rounds).
REAL_DATA = read_labels(REAL)  # each xdist worker reads labels.yaml when it collects
REAL_LABELS: dict[str, Any] = REAL_DATA["runs"]
HELD = sorted(n for n, x in REAL_LABELS.items()
              if x["split"] == "holdout" and x["round"] in REAL_DATA["scored_rounds"])


def _one_of_each_kind(names: list[str]) -> list[str]:
    """The shortest held-back run of each log format and method: every importer and method
    the held-back part holds, without replaying all of it (every run is imported by
    tests/importers/test_real_corpus.py, and replayed by `make bench`). Not one per round
    too: a round adds no code path, and 76 replays took 440 worker-seconds of the suite."""
    kinds: dict[tuple[Any, ...], tuple[int, str]] = {}
    for n in names:
        label = REAL_LABELS[n]
        fmt = json.loads((REAL / n / "source.json").read_text(encoding="utf-8"))["format"]
        size = (REAL / n / label["file"]).stat().st_size
        kind = (fmt, label["method"])
        kinds[kind] = min(kinds.get(kind, (size, n)), (size, n))
    return sorted(n for _, n in kinds.values())


@pytest.fixture(scope="session")
def real_corpus() -> dict[str, CorpusRun]:
    """The real corpus's runs by name, as health-eval loads them (load_corpus): once per
    process, not once per replay (its labels.yaml takes load_corpus a second to read)."""
    return {run.name: run for run in load_corpus(REAL)}


@pytest.mark.parametrize("name", _one_of_each_kind(HELD))
def test_a_held_out_run_replays_step_by_step(tmp_path: Path, real_corpus: dict[str, CorpusRun],
                                             name: str) -> None:
    # One test per run, so xdist spreads the replays (all of them in one test took 123 s;
    # one a run, 157 worker-seconds for 50 runs); what is asserted is the replay's
    # bookkeeping, never a score to tune to.
    run = real_corpus[name]
    result = replay(run, tmp_path)
    assert result.steps == sorted(r["step"] for r in read_source(run.path).records)
    for det in result.detections:
        assert det.step == result.steps[det.point] and det.first_step <= det.step
        assert det.cls == RULE_CLASSES.get(det.rule_id)
    sc = score([result], "holdout", run.round)
    sick = int(run.label != "healthy")
    assert (sc["runs"], sc["pathologies"]["runs"], sc["healthy"]["runs"]) == (1, sick, 1 - sick)


def test_health_eval_on_the_real_corpus_scores_each_held_out_round() -> None:
    # The aggregate over several rounds through the command, on the shortest held-back
    # run of each scored round (the replays themselves are checked one by one above).
    sizes = {n: (REAL / n / REAL_LABELS[n]["file"]).stat().st_size for n in HELD}
    rounds = sorted({REAL_LABELS[n]["round"] for n in HELD})
    held = sorted(min((n for n in HELD if REAL_LABELS[n]["round"] == r), key=sizes.__getitem__)
                  for r in rounds)
    res = CliRunner().invoke(app, ["health-eval", "--split", "holdout", "--corpus", str(REAL),
                                   "-o", "json", *(f"--run={n}" for n in held)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert list(out["scores"]) == ["holdout", *(f"holdout round {n}" for n in rounds)]
    assert [r["name"] for r in out["runs"]] == held
    for n in held:
        assert out["scores"][f"holdout round {REAL_LABELS[n]['round']}"]["runs"] == 1
    sc = out["scores"]["holdout"]
    sick = [n for n in held if REAL_LABELS[n]["label"] != "healthy"]
    assert sc["runs"] == len(held) and sc["pathologies"]["runs"] == len(sick)
    assert sc["healthy"]["runs"] == len(held) - len(sick)
    table = CliRunner().invoke(app, ["health-eval", "--corpus", str(REAL), "--run",
                                     "grpo_memory_redteam", "--run", "tinker_rubric_rl"])
    assert table.exit_code == 0, table.output
    assert "reward_zero_var" in table.output and "train: 2 runs" in table.output


def test_a_finding_counts_at_the_highest_severity_it_reaches(tmp_path: Path) -> None:
    # rl.no_progress is info from its 10th point and a warning once it holds over 30: a
    # healthy run whose reward stays flat for 40 steps has a warning, though the finding
    # was info when it appeared (the score took the severity of its first line).
    corpus = tmp_path / "corpus"
    (corpus / "flat").mkdir(parents=True)
    history = [{"step": i + 1, "reward": 0.5 + 0.05 * math.sin(1.7 * i), "loss": 0.01}
               for i in range(40)]
    (corpus / "flat" / "trainer_state.json").write_text(
        json.dumps({"log_history": history}), encoding="utf-8")
    labels = {"runs": {"flat": {"file": "trainer_state.json", "method": "grpo",
                                "split": "train", "label": "healthy", "onset_step": None}}}
    (corpus / "labels.yaml").write_text(yaml.safe_dump(labels), encoding="utf-8")
    (result,) = replay_all(load_corpus(corpus))
    (found,) = [d for d in result.detections if d.rule_id == "rl.no_progress"]
    assert found.severity == "warning" and found.point < 30
    assert "rl.no_progress" in score([result], "train")["healthy"]["with_warnings"]["flat"]


def test_the_table_names_train_runs_and_counts_held_back_ones(tmp_path: Path) -> None:
    # A held-back healthy run with a warning is listed as a count by rule, not by name (a
    # held-back run's findings are not read run by run); a train one by name. A healthy
    # run with an info and no warning is counted apart: no false alarm, but read.
    corpus = tmp_path / "corpus"
    noise = [0.004, -0.007, 0.009, -0.002, 0.006, -0.009, 0.001, 0.008, -0.005, 0.003]
    losses = [2.0 - 0.01 * i + noise[i % 10] for i in range(30)]
    spiked = list(losses)
    spiked[20] *= 1.6
    trl_log(corpus / "train_nan", [*losses[:6], math.nan, *losses[7:]])
    trl_log(corpus / "held_nan", [*losses[:8], math.nan, *losses[9:]])
    trl_log(corpus / "held_spike", spiked)
    trl_log(corpus / "held_ok", [0.5 + 1.5 * 0.9 ** i for i in range(30)])
    runs: dict[str, Any] = {
        name: {"file": "trainer_state.json", "method": "sft", "split": split,
               "label": "healthy", "onset_step": None}
        for name, split in (("train_nan", "train"), ("held_nan", "holdout"),
                            ("held_spike", "holdout"), ("held_ok", "holdout"))}
    for name in ("held_nan", "held_spike", "held_ok"):
        runs[name]["round"] = 3
    (corpus / "labels.yaml").write_text(yaml.safe_dump({"runs": runs}), encoding="utf-8")
    res = CliRunner().invoke(app, ["health-eval", "--corpus", str(corpus)])
    assert res.exit_code == 0, res.output
    assert "train_nan: metric.non_finite" in res.output
    assert "held_nan" not in res.output and "held_spike" not in res.output
    assert "held back, 1 run (by rule): metric.non_finite 1" in res.output
    assert ("holdout: 0 of 0 pathologies found (—; 0 by a warning, —), median delay — "
            "logged points; 1 of 3 healthy runs with a warning (33%, 95% interval 6-79%), "
            "1 of them resolved by the run's end, 1 more with an info only") in res.output
    wide = CliRunner().invoke(app, ["health-eval", "--corpus", str(corpus), "-o", "wide"])
    assert wide.exit_code == 0 and "held_nan" not in wide.output
    out = json.loads(CliRunner().invoke(app, ["health-eval", "--corpus", str(corpus),
                                              "--split", "holdout", "-o", "json"]).stdout)
    healthy = out["scores"]["holdout"]["healthy"]
    assert list(healthy["with_warnings"]) == ["held_nan"]
    assert list(healthy["with_infos_only"]) == ["held_spike"]
    assert "loss.spike" in healthy["with_infos_only"]["held_spike"]


def test_a_warning_taken_back_by_the_run_s_end_is_counted(tmp_path: Path) -> None:
    # Two healthy GRPO runs whose reward sits flat for their first 45 steps: one rises
    # from there, and rl.no_progress's warning resolves; the other stays flat, and its
    # warning is open at the end. Both are warned; only the first was taken back.
    corpus = tmp_path / "corpus"
    noise = [0.03, -0.02, 0.05, -0.04, 0.01, -0.05, 0.02, 0.04, -0.01, -0.03]

    def grpo_log(name: str, rises: bool) -> None:
        rows = [{"step": i + 1, "loss": 0.01, "reward_std": 0.3,
                 "reward": 0.1 + noise[i % 10] + (0.05 * (i - 44) if rises and i > 44 else 0)}
                for i in range(120)]
        (corpus / name).mkdir(parents=True)
        (corpus / name / "trainer_state.json").write_text(
            json.dumps({"log_history": rows}), encoding="utf-8")

    grpo_log("late_riser", True)
    grpo_log("never_rose", False)
    runs = {name: {"file": "trainer_state.json", "method": "grpo", "split": "train",
                   "label": "healthy", "onset_step": None}
            for name in ("late_riser", "never_rose")}
    (corpus / "labels.yaml").write_text(yaml.safe_dump({"runs": runs}), encoding="utf-8")
    results = replay_all(load_corpus(corpus))
    healthy = score(results, "train")["healthy"]
    assert healthy["with_warnings"] == {"late_riser": ["rl.no_progress"],
                                        "never_rose": ["rl.no_progress"]}
    assert healthy["warnings_resolved_by_end"] == ["late_riser"]
    res = CliRunner().invoke(app, ["health-eval", "--corpus", str(corpus), "--split", "train"])
    assert ("2 of 2 healthy runs with a warning (100%, 95% interval 34-100%), 1 of them "
            "resolved by the run's end") in res.output


def test_the_wide_table_counts_held_back_misses(tmp_path: Path) -> None:
    # The fixture's overfitting run is held back and missed: -o wide gives it as a count
    # in the missed column; -o json still names it.
    corpus = fixture(tmp_path)
    wide = CliRunner().invoke(app, ["health-eval", "--corpus", str(corpus), "--split",
                                    "holdout", "-o", "wide"])
    assert wide.exit_code == 0, wide.output
    assert "1 held back" in wide.output
    out = json.loads(CliRunner().invoke(app, ["health-eval", "--corpus", str(corpus),
                                              "--split", "holdout", "-o", "json"]).stdout)
    assert out["scores"]["holdout"]["classes"]["overfitting"]["missed"] == ["missed"]
