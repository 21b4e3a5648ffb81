"""Run routes: list newest first, search, pages of 100 with a cursor, detail, actions."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runwatch.sdk import init
from tests.killed import killed_run
from tests.support import cli_here, wait_for

from .apiclient import Api, MakeRun, assert_error, manifest


def _ingest_runs(api: Api, n: int) -> None:
    batches: list[dict[str, Any]] = [
        {"run_id": f"id{i:04d}", "file": "events.jsonl",
         "manifest": manifest(f"id{i:04d}", f"run-{i:04d}", created_at=1_700_000_000.0 + i,
                              base_model="model-a" if i % 2 else "model-b"),
         "records": [{"seq": 0, "ts": 1_700_000_000.0 + i, "phase": "RUNNING"}]}
        for i in range(n)
    ]
    for start in range(0, n, 100):
        resp = api.post("/api/ingest", json={"batches": batches[start:start + 100]})
        assert resp.status_code == 200, resp.text


def test_list_pages_of_100_newest_first(api: Api) -> None:
    _ingest_runs(api, 100 + 42)
    first = api.ok("/api/runs")
    assert len(first["runs"]) == 100 and first["next_cursor"]
    assert first["runs"][0]["name"] == "run-0141"
    second = api.ok("/api/runs", params={"cursor": first["next_cursor"]})
    assert len(second["runs"]) == 42 and second["next_cursor"] is None
    names = [r["name"] for r in first["runs"] + second["runs"]]
    assert names == sorted(names, reverse=True)


def test_group_keeps_the_runs_of_one_group_over_pages(api: Api) -> None:
    batches: list[dict[str, Any]] = [
        {"run_id": f"g{i:03d}", "file": "events.jsonl",
         "manifest": manifest(f"g{i:03d}", f"arm-{i:03d}", created_at=1_700_000_000.0 + i,
                              group="sweep-lr" if i % 3 == 0 else "other"),
         "records": [{"seq": 0, "ts": 1_700_000_000.0 + i, "phase": "RUNNING"}]}
        for i in range(30)
    ]
    assert api.post("/api/ingest", json={"batches": batches}).status_code == 200
    first = api.ok("/api/runs", params={"group": "sweep-lr", "limit": 6})
    second = api.ok("/api/runs", params={"group": "sweep-lr", "limit": 6,
                                         "cursor": first["next_cursor"]})
    names = [r["name"] for r in first["runs"] + second["runs"]]
    assert names == [f"arm-{i:03d}" for i in range(27, -1, -3)]
    assert second["next_cursor"] is None
    assert api.ok("/api/runs", params={"group": "no-such-group"})["runs"] == []


def test_search_covers_every_listed_column(api: Api, make_run: MakeRun,
                                           index: Callable[[], None]) -> None:
    make_run("alpha", steps=2, base_model="Qwen-0.5B", dataset="gsm8k", trainer="trl-grpo",
             backend="ray-cluster")
    run_id = make_run("beta", steps=2, status="FAILED")
    index()
    for q, expected in [("alpha", {"alpha"}), ("qwen", {"alpha"}), ("GSM8K", {"alpha"}),
                        ("trl-grpo", {"alpha"}), ("ray-cluster", {"alpha"}),
                        ("failed", {"beta"}), (run_id[:10], {"beta"}), ("nothing-x", set())]:
        names = {r["name"] for r in api.ok("/api/runs", params={"q": q})["runs"]}
        assert names == expected, q


def test_the_status_filter_takes_a_phase_in_any_case_and_names_the_phases(
        api: Api, make_run: MakeRun, index: Callable[[], None]) -> None:
    make_run("done", steps=2)
    make_run("broke", steps=2, status="FAILED")
    index()
    for status in ("FAILED", "failed", "Failed"):
        assert [r["name"] for r in api.ok("/api/runs", params={"status": status})["runs"]
                ] == ["broke"], status
    body = assert_error(api.get("/api/runs", params={"status": "bogus"}), 400)
    assert "'bogus' is not a phase: QUEUED, PREPARING, RUNNING" in body["error"]


def test_detail_has_state_results_cost_settings_manifest_summary(
        api: Api, make_run: MakeRun, index: Callable[[], None]) -> None:
    make_run("sft-1", steps=30, config={"gradient_accumulation_steps": 4},
             metrics=lambda i: {"loss": 3.0 - i * 0.05, "val/loss": 3.2 - i * 0.05,
                                "trained_tokens": 100.0, "samples": 8.0})
    index()
    d = api.ok("/api/runs/sft-1")
    for part in ("state", "results", "cost", "timing", "attempts", "settings", "manifest",
                 "summary", "scalars"):
        assert part in d
    assert d["summary"].startswith("Training tiny-gpt with runwatch-sft on arith")
    s = d["scalars"]
    assert s["steps"] == 29 and s["tokens"] == 3000 and s["examples"] == 240
    assert s["grad_accum"] == 4
    assert abs(s["best_train_loss"] - 1.55) < 1e-9 and abs(s["eval_loss"] - 1.75) < 1e-9
    # started by hand: no job to requeue, and no process left to stop
    assert d["actions"] == {"cancel": False, "retry": False}
    assert d["job"] is None and d["failure"] is None
    assert d["run"]["status"] == "SUCCEEDED" and d["run"]["attempt"] == 1


def test_a_run_started_by_hand_is_neither_cancelled_nor_retried_once_ended(
        api: Api, make_run: MakeRun, index: Callable[[], None]) -> None:
    make_run("done", steps=1)
    index()
    assert api.ok("/api/runs/done")["actions"] == {"cancel": False, "retry": False}
    for action in ("cancel", "retry"):
        body = assert_error(api.post(f"/api/runs/done/{action}", json={}), 409)
        # neither points at the other: retry needs a job, which a run started by hand lacks
        assert "started by hand" in body["error"] and "retry it" not in body["error"], body
    assert api.ok("/api/runs/done")["run"]["status"] == "SUCCEEDED"


def test_a_run_whose_process_died_says_so_in_its_summary(
        api: Api, runs_dir: Path, index: Callable[[], None]) -> None:
    killed_run(runs_dir, "killed")
    index()
    (listed,) = api.ok("/api/runs")["runs"]
    detail = api.ok("/api/runs/killed")
    assert listed["status"] == "RUNNING" and listed["process_gone"] is True
    assert detail["run"] == listed
    assert detail["state"]["process_gone"] is True
    # its duration stops at its last record, so two reads at different times agree
    assert listed["duration_s"] == detail["run"]["duration_s"] == detail["cost"]["duration_s"]
    assert detail["timing"]["phaseMillis"] == {"RUNNING": round(listed["duration_s"] * 1000)}
    # one device (of the built-in cpu profile) for the time it ran: fixed, not growing
    assert detail["cost"]["device_seconds"] == detail["timing"]["phaseMillis"]["RUNNING"] / 1000
    # it ended at its last record: final figures, and the reason it stopped
    assert detail["cost"]["device_seconds_estimate"] is False
    assert detail["cost"]["device_profile"] == "cpu" and detail["cost"]["devices"] == 1
    assert detail["failure"]["code"] == "stopped_early"
    # nothing is left to stop, and a run started by hand cannot be retried
    assert detail["actions"] == {"cancel": False, "retry": False}


def test_a_run_started_by_hand_that_runs_here_can_be_cancelled(
        api: Api, runs_dir: Path, index: Callable[[], None]) -> None:
    run = init(name="live", dir=runs_dir)  # this test's process records it, on this host
    try:
        run.log({"loss": 1.0}, step=0)

        def running() -> bool:  # the SDK writes from its own thread
            index()
            resp = api.get("/api/runs/live")
            return resp.status_code == 200 and resp.json()["run"]["status"] == "RUNNING"

        wait_for(running, what="the live run indexed as RUNNING")
        assert api.ok("/api/runs/live")["actions"] == {"cancel": True, "retry": False}
    finally:
        run.finish("SUCCEEDED")
    index()
    assert api.ok("/api/runs/live")["actions"] == {"cancel": False, "retry": False}


def test_a_run_that_logs_train_slash_loss_has_a_best_loss_in_api_and_cli(
        api: Api, make_run: MakeRun, index: Callable[[], None], runs_dir: Path) -> None:
    make_run("hf-style", steps=5, metrics=lambda i: {"train/loss": 3.0 - i, "eval_loss": 9.0})
    index()
    d = api.ok("/api/runs/hf-style")
    # the CLI's answer, in this process (what it answers is compared, not the process)
    cli = json.loads(cli_here("runs", "get", "hf-style", "--dir", str(runs_dir), "-o", "json"
                              ).stdout)
    for detail in (d, cli):
        assert detail["scalars"]["best_train_loss"] == -1.0
        assert detail["scalars"]["latest_train_loss"] == -1.0
        assert detail["results"]["best_train_loss"] == -1.0
        assert detail["results"]["train_loss"] == -1.0
        assert detail["results"]["val_loss"] == 9.0
    assert cli["scalars"] == d["scalars"] and cli["results"] == d["results"]


def test_projects_and_events(api: Api, make_run: MakeRun, index: Callable[[], None]) -> None:
    make_run("p-run", steps=1, project="vision")
    index()
    assert {"name": "vision", "runs": 1} in api.ok("/api/projects")["projects"]
    phases = [e["phase"] for e in api.ok("/api/runs/p-run/events")["events"]]
    assert phases[-1] == "SUCCEEDED"
    assert [r["name"] for r in api.ok("/api/runs", params={"project": "vision"})["runs"]] == [
        "p-run"]


def test_a_running_total_of_tokens_is_its_last_value_and_a_count_per_step_its_sum(
        api: Api, make_run: MakeRun, index: Callable[[], None], runs_dir: Path) -> None:
    """The Tokens tile summed every value of the series it read, so a running total
    (TRL's `num_tokens`, 2**40 per step here) showed 901,599,534,776,320 for a run that
    trained 43,980,465,111,040 tokens. 100 steps: past the point where a series is read
    from its step summaries."""
    make_run("total", steps=100, metrics=lambda i: {"num_tokens": float((i + 1) * 2**40),
                                                    "num_examples": float(8 * (i + 1))})
    # a count per step that ramps up and stays at its top: its last value is its greatest,
    # as a running total's is, but it does not rise at every step
    make_run("per-step", steps=100, metrics=lambda i: {"tokens": float(min(1024 * (i + 1),
                                                                          8192))})
    index()
    where = ["--dir", str(runs_dir), "-o", "json"]
    for name, tokens, examples in (("total", 100 * 2**40, 800.0),
                                   ("per-step", sum(min(1024 * (i + 1), 8192)
                                                    for i in range(100)), None)):
        cli = json.loads(cli_here("runs", "get", name, *where).stdout)["scalars"]
        api_tiles = api.ok(f"/api/runs/{name}")["scalars"]
        assert (api_tiles["tokens"], api_tiles["examples"]) == (tokens, examples)
        assert (cli["tokens"], cli["examples"]) == (tokens, examples)
