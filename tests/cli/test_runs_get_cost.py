"""`runwatch runs get`'s Cost and Data fit, and the API's detail beside it: the memory of
the step that held the most (never one part's peak from another step), the data fit with
the share of the batches that was padding, a training time over every attempt as the web
app counts it, and no spend shown for a device time shown as nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

import runwatch
from runwatch.analysis.results import training_s
from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import dumps_line
from runwatch.server.app import create_app
from tests.server.apiclient import Api
from tests.support import cli_here, run_cli
from tests.support.rundirs import write_run

T0 = 1.7e9
GIB = 2**30
Record = dict[str, Any]


def write_events(run: Path, events: list[Record]) -> None:
    (run / "events.jsonl").write_text(
        "".join(json.dumps({**e, "seq": i}) + "\n" for i, e in enumerate(events)))


def write_runs(runs_dir: Path, runs: dict[str, list[Record]]) -> None:
    for name, records in runs.items():
        write_run(runs_dir, name, [{"ts": T0 + r["step"], **r, "seq": i}
                                   for i, r in enumerate(records)], method="sft")


def details(runs_dir: Path, db_url: str, engine: Engine, name: str
            ) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The run's detail as `runs get -o json` and the API send it, and its table."""
    where = ["--dir", str(runs_dir), "--db", db_url]
    cli = json.loads(cli_here("runs", "get", name, *where, "-o", "json").stdout)
    api = Api(create_app(engine, runs_dir=runs_dir)).ok(f"/api/runs/{name}")
    return cli, api, cli_here("runs", "get", name, *where).stdout


# A step that held 6 GiB, mostly activations, then the run's peak, 8 GiB, mostly optimizer
# state: each part's own peak (activations 5, optimizer 5, weights 1) is 11 GiB.
MIXED = [
    {"step": 1, "loss": 2.0, "memory/weights_bytes": 1 * GIB,
     "memory/activations_bytes": 5 * GIB, "memory/total_bytes": 6 * GIB},
    {"step": 2, "loss": 1.9, "memory/weights_bytes": 1 * GIB,
     "memory/activations_bytes": 2 * GIB, "memory/optimizer_state_bytes": 5 * GIB,
     "memory/total_bytes": 8 * GIB},
]
# A resumed attempt logs its own first peak, lower than the first attempt's: the run's
# peak is not its last record. The optimizer state logged only then is of another step.
RESUMED = [
    {"step": 1, "memory/weights_bytes": 2 * GIB, "memory/activations_bytes": 8 * GIB,
     "memory/total_bytes": 10 * GIB, "memory/process_peak_rss_bytes": 3 * GIB},
    {"step": 51, "memory/weights_bytes": 2 * GIB, "memory/activations_bytes": 4 * GIB,
     "memory/optimizer_state_bytes": GIB, "memory/total_bytes": 7 * GIB,
     "memory/process_peak_rss_bytes": 4 * GIB},
]


def test_memory_is_the_peak_steps_own(runs_dir: Path, db_url: str, engine: Engine) -> None:
    write_runs(runs_dir, {"mixed": MIXED, "resumed": RESUMED})
    cli_here("index", str(runs_dir), "--db", db_url)

    cli, api, table = details(runs_dir, db_url, engine, "mixed")
    assert cli["cost"]["peak_memory_bytes"] == api["cost"]["peak_memory_bytes"] == {
        "total_bytes": 8 * GIB, "weights_bytes": 1 * GIB,
        "optimizer_state_bytes": 5 * GIB, "activations_bytes": 2 * GIB}
    # readable labels, the parts under the total they make up
    assert ("  Peak memory: 8.0 GiB (the step that held the most)\n"
            "    Weights: 1.0 GiB\n"
            "    Optimizer state: 5.0 GiB\n"
            "    Activations: 2.0 GiB\n") in table
    assert "_bytes" not in table

    cli, api, table = details(runs_dir, db_url, engine, "resumed")
    assert cli["cost"]["peak_memory_bytes"] == api["cost"]["peak_memory_bytes"] == {
        "total_bytes": 10 * GIB, "weights_bytes": 2 * GIB, "activations_bytes": 8 * GIB,
        "process_peak_rss_bytes": 4 * GIB}
    assert "  Process peak RSS (host memory): 4.0 GiB" in table


def test_a_run_without_a_total_shows_each_parts_peak(runs_dir: Path, db_url: str,
                                                    engine: Engine) -> None:
    """Nothing says which parts were held together: each is its own peak, named so."""
    write_runs(runs_dir, {"parts": [
        {"step": 1, "memory/activations_bytes": 3 * GIB},
        {"step": 2, "memory/activations_bytes": GIB, "memory/weights_bytes": GIB}]})
    cli_here("index", str(runs_dir), "--db", db_url)
    cli, api, table = details(runs_dir, db_url, engine, "parts")
    assert cli["cost"]["peak_memory_bytes"] == api["cost"]["peak_memory_bytes"] == {
        "weights_bytes": GIB, "activations_bytes": 3 * GIB}
    assert "  Peak memory (weights): 1.0 GiB\n  Peak memory (activations): 3.0 GiB" in table


FIT = [{"step": 0, "loss": 2.0, "padding_fraction": 0.2, "data_fit/rows_dropped_empty": 1,
        "data_fit/rows_lost_target_end": 3, "data_fit/rows_at_max_length": 7,
        "data_fit/rows": 100},
       {"step": 1, "loss": 1.9, "padding_fraction": 0.4},
       {"step": 2, "loss": 1.8, "padding_fraction": 0.9}]


def test_data_fit_has_the_padding_share_and_a_table(runs_dir: Path, db_url: str,
                                                    engine: Engine) -> None:
    write_runs(runs_dir, {"fit": FIT})
    cli_here("index", str(runs_dir), "--db", db_url)
    cli, api, _ = details(runs_dir, db_url, engine, "fit")
    for fit in (cli["cost"]["data_fit"], api["cost"]["data_fit"]):
        assert list(fit) == ["rows", "rows_at_max_length", "rows_lost_target_end",
                             "rows_dropped_empty", "padding_fraction"]
        assert fit["padding_fraction"] == pytest.approx(0.5)
        assert (fit["rows"], fit["rows_at_max_length"]) == (100, 7)
    table = run_cli("runs", "get", "fit", "--dir", str(runs_dir), "--db", db_url).stdout
    assert ("Data fit\n"
            "  Rows drawn: 100\n"
            "  Rows at max_seq_length: 7\n"
            "  Rows that lost their target's end: 3\n"
            "  Rows dropped (nothing to train on): 1\n"
            "  Padding: 50.0% of the batches' tokens\n") in table


def test_training_time_counts_every_attempt(runs_dir: Path, db_url: str,
                                            engine: Engine) -> None:
    """Cancelled after 10 s running and 1 s stopping, resumed for 18 s: trained 29 s, as
    the Phases line and the web app's Cost card (RUNNING and CANCEL_REQUESTED) say."""
    run = write_run(runs_dir, "retried", [{"step": 1, "ts": T0 + 3, "seq": 0, "loss": 1.0}])
    write_events(run, [
        {"ts": T0, "phase": "QUEUED", "attempt": 1},
        {"ts": T0 + 1, "phase": "PREPARING", "attempt": 1, "hourly_rate": 0.05},
        {"ts": T0 + 2, "phase": "RUNNING"},
        {"ts": T0 + 12, "phase": "CANCEL_REQUESTED"},
        {"ts": T0 + 13, "phase": "CANCELLED", "reason": "stopped", "code": "cancelled"},
        {"ts": T0 + 20, "phase": "QUEUED", "attempt": 2},
        {"ts": T0 + 21, "phase": "PREPARING", "attempt": 2, "hourly_rate": 0.05},
        {"ts": T0 + 22, "phase": "RUNNING"},
        {"ts": T0 + 40, "phase": "SUCCEEDED"}])
    cli_here("index", str(runs_dir), "--db", db_url)
    cli, api, table = details(runs_dir, db_url, engine, "retried")
    assert training_s(cli["timing"]["phaseMillis"]) == 29.0
    assert training_s(api["timing"]["phaseMillis"]) == 29.0
    assert "  Training time: 29s\n" in table
    assert "running 28s, cancel_requested 1s" in table


def test_a_job_that_never_started_spent_nothing(runs_dir: Path, db_url: str,
                                                engine: Engine) -> None:
    """Its worker held the device 4 ms before the process could not start: "0.0s" of
    device time and a spend of 0, not "< 0.0001"; a tenth of a second shows its spend."""
    for name, held in (("never", 0.004), ("brief", 0.1)):
        run = write_run(runs_dir, name)
        write_events(run, [
            {"ts": T0, "phase": "QUEUED", "attempt": 1},
            {"ts": T0 + 5, "phase": "PREPARING", "attempt": 1, "hourly_rate": 0.05},
            {"ts": T0 + 5 + held, "phase": "FAILED", "reason": "could not be started",
             "code": "could_not_start"}])
    cli_here("index", str(runs_dir), "--db", db_url)
    _, _, table = details(runs_dir, db_url, engine, "never")
    assert "  Device time: 0.0s on 1 × " in table
    assert "  Spend: 0 at 0.05 per device-hour\n" in table
    _, _, table = details(runs_dir, db_url, engine, "brief")
    assert "  Device time: 0.1s on 1 × " in table
    assert "  Spend: < 0.0001 at 0.05 per device-hour\n" in table


def test_training_time_is_unknown_for_a_run_that_never_trained() -> None:
    assert training_s({"QUEUED": 24031, "PREPARING": 4}) is None
    assert training_s({"RUNNING": 1500, "CANCEL_REQUESTED": 500}) == 2.0


def test_a_stage_with_a_total_and_no_count_yet_has_done_none(runs_dir: Path) -> None:
    """An events line of another writer that names a stage's total and not its count read
    "tokenizing (None/100)" in runs get; the detail counts it as none done, for every
    surface (the web app and the wait read the same)."""
    run = runwatch.init(name="counting", dir=runs_dir)
    try:
        with open(runs_dir / "counting" / fmt.EVENTS, "ab") as fh:
            fh.write(dumps_line({"ts": time.time(), "seq": 99, "phase": "PREPARING",
                                 "stage": "tokenizing", "total": 100}))
        shown = json.loads(cli_here("runs", "get", "counting", "--dir", str(runs_dir),
                                    "-o", "json").stdout)
        assert shown["state"]["progress"] == {"done": 0, "total": 100}
        table = cli_here("runs", "get", "counting", "--dir", str(runs_dir)).stdout
        assert "Stage: tokenizing (0/100)" in table
    finally:
        run.finish()


def test_a_pipeline_reports_each_train_stages_cost_and_the_total(runs_dir: Path) -> None:
    """The spec: a pipeline's detail reports the cost of each train stage and the total. A
    run started from another's checkpoint (`init_from`), itself started from a third's,
    reported only its own cost."""
    base = "tiny-gpt"
    for name in ("sft", "dpo", "grpo"):
        with runwatch.init(name=name, dir=runs_dir, base_model=base) as run:
            run.log({"loss": 1.0}, step=1)
            time.sleep(0.05)  # some device time for each stage
        base = f"init_from:{runs_dir / name}"
    shown = json.loads(cli_here("runs", "get", "grpo", "--dir", str(runs_dir), "-o",
                                "json").stdout)
    pipeline = shown["cost"]["pipeline"]
    assert [st["name"] for st in pipeline["stages"]] == ["sft", "dpo", "grpo"]
    own = {name: json.loads(cli_here("runs", "get", name, "--dir", str(runs_dir), "-o",
                                     "json").stdout)["cost"] for name in ("sft", "dpo")}
    own["grpo"] = shown["cost"]
    for st in pipeline["stages"]:
        assert (st["device_seconds"], st["spend"], st["estimate"]) == (
            own[st["name"]]["device_seconds"], own[st["name"]]["spend"], False)
    assert pipeline["device_seconds"] == pytest.approx(
        sum(c["device_seconds"] for c in own.values()))
    assert pipeline["spend"] == pytest.approx(sum(c["spend"] for c in own.values()))
    assert pipeline["estimate"] is False
    table = " ".join(cli_here("runs", "get", "grpo", "--dir", str(runs_dir)).stdout.split())
    assert "Pipeline: sft " in table and " → dpo " in table and " → grpo " in table
    assert "; total " in table
    # a run that started from no indexed run is no pipeline
    assert own["sft"]["pipeline"] is None
