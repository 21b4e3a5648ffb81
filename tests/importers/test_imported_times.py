"""An imported log with no wall clock is timed by its own step times where it logs them, and
the run's manifest (`imported_times`) and the import's note say how its times were made.

Found in an audit (s40 hB, G1): a log of 60 steps of about 30 s each (`timing/step_total_s`)
was imported one second per step, and its run read "Training time: 59s" as fact.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from runwatch.ingest.importers import read_source, write_run_dir
from runwatch.ingest.importers.common import Imported, synthesize_ts
from runwatch.rundir.jsonl import loads_line
from tests.support.cli import cli_here, run_cli

STEP_S = [28.5 + (s % 5) for s in range(60)]  # 28.5 s to 32.5 s a step


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def lines(path: Path) -> list[dict[str, Any]]:
    return [loads_line(x) for x in path.read_bytes().splitlines()]


def test_a_log_s_step_times_make_its_duration_and_the_manifest_says_so(
        tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "grpo" / "metrics.jsonl", [
        {"step": s, "reward_mean": 0.3 + s / 200, "timing/step_total_s": STEP_S[s]}
        for s in range(60)])
    runs = tmp_path / "runs"
    said = run_cli("import", str(src), "--dir", str(runs), "--name", "timed").stdout
    assert ("note: the log has no wall clock: the run's times are rebuilt from its step "
            "times ('timing/step_total_s', logged at all 60 steps)") in " ".join(said.split())

    manifest = json.loads((runs / "timed" / "manifest.json").read_text())
    assert manifest["imported_times"] == {"basis": "step_times", "steps": 60,
                                          "key": "timing/step_total_s", "timed_steps": 60}
    metrics = lines(runs / "timed" / "metrics.jsonl")
    gaps = [b["ts"] - a["ts"] for a, b in itertools.pairwise(metrics)]
    assert gaps == pytest.approx(STEP_S[1:])
    # the run began one first step before its first record
    events = lines(runs / "timed" / "events.jsonl")
    assert [e["phase"] for e in events] == ["RUNNING", "SUCCEEDED"]
    assert metrics[0]["ts"] - events[0]["ts"] == pytest.approx(STEP_S[0])
    assert manifest["created_at"] == pytest.approx(events[0]["ts"])

    got = json.loads(cli_here("runs", "get", "timed", "--dir", str(runs), "-o", "json").stdout)
    assert got["cost"]["duration_s"] == pytest.approx(sum(STEP_S))  # about 30 minutes, not 59 s
    assert got["manifest"]["imported_times"]["basis"] == "step_times"
    # an estimate, and what it rests on
    assert got["cost"]["device_seconds_estimate"] is True
    assert got["cost"]["times"] == ("estimated from the log's step times "
                                    "(timing/step_total_s, logged at all 60 steps)")
    table = " ".join(cli_here("runs", "get", "timed", "--dir", str(runs)).stdout.split())
    assert "Times: estimated from the log's step times" in table


def test_steps_that_log_no_time_count_as_the_median_of_those_that_do(tmp_path: Path) -> None:
    # tinker-cookbook's `time/total`, the step-time role's alias; an evaluation row of its
    # own step without it
    rows: list[dict[str, Any]] = [{"step": s, "optim/lr": 1e-4, "time/total": 10.0 + s}
                                  for s in range(5)]
    rows.insert(3, {"step": 3, "test/env/all/reward/total": 0.5})  # step 3: two rows
    rows.append({"step": 9, "test/env/all/reward/total": 0.6})  # an untimed step
    imported = read_source(write_jsonl(tmp_path / "tinker" / "metrics.jsonl", rows))
    assert imported.times is not None
    assert imported.times.manifest() == {"basis": "step_times", "steps": 6,
                                         "key": "time/total", "timed_steps": 5}
    assert "logged at 5 of 6 steps; the others count as their median" in imported.notes[-1]
    at = {r["step"]: r["ts"] for r in imported.records}
    assert [at[s] - at[s - 1] for s in range(1, 5)] == pytest.approx([11.0, 12.0, 13.0, 14.0])
    assert at[9] - at[4] == pytest.approx(12.0)  # the median of 10…14
    assert imported.times.start == pytest.approx(at[0] - 10.0)


def test_a_log_without_step_times_is_still_one_second_a_step_and_marked_made_up(
        tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "plain" / "metrics.jsonl",
                      [{"step": s, "loss": 2.0 - s / 10} for s in (0, 10, 20, 1000)])
    imported = read_source(src)
    assert imported.times is None and not any("ts" in r for r in imported.records)
    run_dir = write_run_dir(imported, tmp_path / "runs", "plain")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["imported_times"] == {"basis": "one_second_per_step", "steps": 4}
    # how long it took is not known: no duration nor spend, and the cost says why
    got = json.loads(cli_here("runs", "get", "plain", "--dir", str(tmp_path / "runs"), "-o",
                              "json").stdout)["cost"]
    assert (got["duration_s"], got["spend"], got["device_seconds_estimate"]) == (
        None, None, True)
    assert got["times"].startswith("made up, one second a step")
    assert "no clock and no step times" in got["problem"]
    table = " ".join(cli_here("runs", "get", "plain", "--dir", str(tmp_path / "runs")
                              ).stdout.split())
    assert "Training time: unknown" in table and "Spend: the imported log has no clock" in table
    metrics = lines(run_dir / "metrics.jsonl")
    assert [r["ts"] - metrics[0]["ts"] for r in metrics] == [0, 1, 2, 3]
    # health scoring's replay gives a log so the same times (synthesize_ts, as before)
    records = [{"step": s, "loss": 1.0} for s in (5, 7, 7, 100)]
    made = synthesize_ts(records, end=1_000.0)
    assert made is not None and made.basis == "one_second_per_step"
    assert [r["ts"] for r in records] == [998.0, 999.0, 999.0, 1000.0]


def test_the_log_s_own_clock_is_no_made_up_time_and_w_and_b_runtime_is_elapsed(
        tmp_path: Path) -> None:
    clocked = write_jsonl(tmp_path / "clocked" / "metrics.jsonl",
                          [{"step": s, "ts": 1.7e9 + 30 * s, "loss": 1.0} for s in range(3)])
    own = read_source(clocked)
    assert own.times is None and [r["ts"] for r in own.records] == [1.7e9, 1.7e9 + 30,
                                                                    1.7e9 + 60]
    run_dir = write_run_dir(own, tmp_path / "runs", "clocked")
    assert "imported_times" not in json.loads((run_dir / "manifest.json").read_text())

    history = write_jsonl(tmp_path / "wandb" / "h.jsonl",
                          [{"_step": s, "_runtime": 5.0 + 20 * s, "reward": 0.1 * s}
                           for s in range(4)])
    elapsed = read_source(history)
    assert elapsed.times is not None and elapsed.times.manifest() == {
        "basis": "elapsed", "steps": 4, "key": "_runtime"}
    run_dir = write_run_dir(elapsed, tmp_path / "runs", "wandb")
    events = lines(run_dir / "events.jsonl")
    first = lines(run_dir / "metrics.jsonl")[0]
    assert first["ts"] - events[0]["ts"] == pytest.approx(5.0)  # the run began at _runtime 0
    assert events[-1]["ts"] - events[0]["ts"] == pytest.approx(65.0)


def test_records_an_importer_hands_over_untimed_are_timed_when_written(tmp_path: Path) -> None:
    imported = Imported("jsonl", "sft", [{"step": s, "loss": 1.0, "timing/step_total_s": 2.0}
                                         for s in range(3)], source="by hand")
    run_dir = write_run_dir(imported, tmp_path, "by-hand")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["imported_times"]["basis"] == "step_times"
    events = lines(run_dir / "events.jsonl")
    assert events[-1]["ts"] - events[0]["ts"] == pytest.approx(6.0)


def test_verl_s_step_time_times_its_log(tmp_path: Path) -> None:
    """verl logs a step's seconds as `timing_s/step`, an alias of `timing/step_total_s`."""
    src = write_jsonl(tmp_path / "verl" / "metrics.jsonl", [
        {"step": s + 1, "data": {"critic/rewards/mean": 0.1 * s, "timing_s/step": STEP_S[s]}}
        for s in range(10)])
    imported = read_source(src)
    assert imported.trainer == "verl"
    runs = tmp_path / "runs"
    cli_here("import", str(src), "--dir", str(runs), "--name", "v")
    manifest = json.loads((runs / "v" / "manifest.json").read_text())
    assert manifest["imported_times"] == {"basis": "step_times", "steps": 10,
                                          "key": "timing_s/step", "timed_steps": 10}
    got = json.loads(cli_here("runs", "get", "v", "--dir", str(runs), "-o", "json").stdout)
    assert got["cost"]["duration_s"] == pytest.approx(sum(STEP_S[:10]))


def test_llama_factory_s_elapsed_time_is_its_clock(tmp_path: Path) -> None:
    """LLaMA-Factory's trainer_log.jsonl has no dates, but each line says how long the run
    has been going (`elapsed_time`, as `H:MM:SS`): the records keep that spacing."""
    elapsed = ["0:00:40", "0:01:21", "0:02:03", "1:00:00", "1 day, 0:00:30"]
    src = write_jsonl(tmp_path / "lf" / "trainer_log.jsonl", [
        {"current_steps": 10 * (i + 1), "total_steps": 50, "loss": 1.0 - i / 10,
         "percentage": 20.0 * (i + 1), "elapsed_time": e, "remaining_time": "0:03:00"}
        for i, e in enumerate(elapsed)])
    runs = tmp_path / "runs"
    said = " ".join(cli_here("import", str(src), "--dir", str(runs), "--name", "lf")
                    .stdout.split())
    assert ("the log has no dates, only the time since the run started ('elapsed_time'): "
            "the run's times keep that spacing and end at the import") in said
    manifest = json.loads((runs / "lf" / "manifest.json").read_text())
    assert manifest["imported_times"] == {"basis": "elapsed", "steps": 5, "key": "elapsed_time"}
    metrics = lines(runs / "lf" / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [10, 20, 30, 40, 50]
    assert "elapsed_time" not in metrics[0] and "remaining_time" not in metrics[0]
    gaps = [b["ts"] - a["ts"] for a, b in itertools.pairwise(metrics)]
    assert gaps == pytest.approx([41.0, 42.0, 3600.0 - 123.0, 86430.0 - 3600.0])


@pytest.mark.parametrize(("text", "seconds"), [
    ("0:00:00", 0.0), ("12:34:56", 45296.0), ("0:00:01.5", 1.5), ("2 days, 1:00:00", 176400.0),
    ("1:2", None), ("soon", None), ("x days, 1:00:00", None), ("-1:00:00", None), (90, None)])
def test_elapsed_time_text(text: Any, seconds: float | None) -> None:
    from runwatch.ingest.importers.common import clock_seconds

    assert clock_seconds(text) == seconds
