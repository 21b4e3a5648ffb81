"""`runwatch runs metrics` of a reinforcement run: each step's reward terms (the mean of
each over the step's rollouts, per split) under `rewardTerms` in JSON and as `term/…`
columns in the table; and `runs get`'s Base model of a run started from another run's
checkpoint, named as the detail's `model` names it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from runwatch import init
from runwatch.server.runner import Runner
from tests.support import cli_here, run_cli, sdk_run
from tests.support.wait import wait_for

# step -> split -> the rollouts' reward terms (a later `terms`, a boolean and text are no
# numeric reward term; a rollout without terms counts for none)
ROLLOUTS: dict[int, dict[str, list[dict[str, object]]]] = {
    0: {"train": [{"reward_terms": {"raw": 1.0, "penalty": -0.5}},
                  {"reward_terms": {"raw": 0.0, "penalty": 0.0}}, {}],
        "val": [{"reward_terms": {"raw": 1.0}}]},
    1: {"train": [{"terms": {"raw": 0.25}},
                  {"reward_terms": {"raw": 0.75, "passed": True, "note": "ok"}}]},
}
EXPECTED = {0: {"train": {"penalty": -0.25, "raw": 0.5}, "val": {"raw": 1.0}},
            1: {"train": {"raw": 0.5}}}


def rl_run(runs_dir: Path, name: str = "rl") -> None:
    """Three steps of metrics, the first two with rollouts, the last with none."""
    run = init(name=name, dir=runs_dir, method="grpo", base_model="tiny-gpt",
               dataset="arith", trainer="runwatch-grpo", backend="local")
    for step in range(3):
        run.log({"reward_mean": 0.1 * step, "grad_norm": 1.0}, step=step)
        for split, samples in ROLLOUTS.get(step, {}).items():
            run.log_samples(step, [{"prompt": f"p{i}", "completion": "c", "reward": 0.5, **s}
                                   for i, s in enumerate(samples)], split=split)
    run.finish("SUCCEEDED")


def test_json_reports_each_steps_reward_terms(runs_dir: Path) -> None:
    rl_run(runs_dir)
    out = json.loads(run_cli("runs", "metrics", "rl", "--dir", str(runs_dir),
                             "-o", "json").stdout)
    steps = {s["step"]: s for s in out["steps"]}
    assert sorted(steps) == [0, 1, 2]
    assert {k: v["rewardTerms"] for k, v in steps.items() if "rewardTerms" in v} == EXPECTED
    assert steps[1]["measured"] == {"grad_norm": 1.0, "reward_mean": 0.1}
    # the same through --jq, which reads the whole document
    jq = cli_here("runs", "metrics", "rl", "--dir", str(runs_dir), "--jq",
                  "[.steps[] | .rewardTerms]").stdout
    assert json.loads(jq) == [EXPECTED[0], EXPECTED[1], None]
    # a step range reads the terms of its steps alone
    one = json.loads(cli_here("runs", "metrics", "rl", "--dir", str(runs_dir), "--steps",
                              "1:2", "-o", "json").stdout)
    assert [s.get("rewardTerms") for s in one["steps"]] == [EXPECTED[1], None]


def test_table_shows_the_terms_as_columns(runs_dir: Path) -> None:
    rl_run(runs_dir)
    table = cli_here("runs", "metrics", "rl", "--dir", str(runs_dir), "-o", "wide",
                     env={"COLUMNS": "200"}).stdout
    head = table.splitlines()[0]
    cells = [c.strip() for c in head.split("┃")]
    assert cells[-3:] == ["term/penalty", "term/raw", "val/term/raw"]
    rows = {line.split("│")[0].strip(): [c.strip() for c in line.split("│")]
            for line in table.splitlines()[2:] if "│" in line}
    assert rows["0"][-3:] == ["-0.25", "0.5", "1"]
    assert rows["1"][-3:] == ["-", "0.5", "-"]
    assert rows["2"][-3:] == ["-", "-", "-"]


def test_a_run_without_rollouts_has_no_terms(runs_dir: Path) -> None:
    sdk_run(runs_dir, "sft", steps=3)
    out = json.loads(cli_here("runs", "metrics", "sft", "--dir", str(runs_dir),
                              "-o", "json").stdout)
    assert all("rewardTerms" not in s for s in out["steps"])
    assert "term/" not in cli_here("runs", "metrics", "sft", "--dir", str(runs_dir)).stdout


@pytest.mark.parametrize("parent_indexed", [True, False])
def test_base_model_of_a_run_from_a_checkpoint(runs_dir: Path, parent_indexed: bool) -> None:
    parent = runs_dir / "sft-base" if parent_indexed else runs_dir.parent / "elsewhere"
    if parent_indexed:
        sdk_run(runs_dir, "sft-base", steps=2, base_model="tiny-gpt-4x128")
    sdk_run(runs_dir, "grpo-child", steps=2, method="grpo", base_model=f"init_from:{parent}")
    where = ["--dir", str(runs_dir)]
    detail = json.loads(cli_here("runs", "get", "grpo-child", *where, "-o", "json").stdout)
    state = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip()
             for line in cli_here("runs", "get", "grpo-child", *where,
                                  env={"COLUMNS": "400"}).stdout.splitlines()
             if line.startswith("  ") and ":" in line}
    if parent_indexed:
        assert detail["model"]["base_model"] == "tiny-gpt-4x128"
        assert state["Base model"] == "tiny-gpt-4x128 (from run sft-base)"
    else:
        assert detail["model"]["parent"] is None
        assert state["Base model"] == (f"unknown base model (from {parent}: no run in the "
                                       "index holds it)")
    assert "init_from:" not in state["Base model"]


def test_a_team_servers_run_reports_the_same_terms(server: Runner, runs_dir: Path) -> None:
    """`--server`: the history comes from the series route, the terms from the reward-terms
    route, a page at a time; the same JSON and columns as from the local index."""
    rl_run(runs_dir)

    def indexed() -> bool:
        run = httpx.get(f"{server.url}/api/runs/rl")
        return run.status_code == 200 and run.json()["run"]["status"] == "SUCCEEDED"

    wait_for(indexed, what="the server to index the run to its end")
    where = ["--server", server.url]
    out = json.loads(cli_here("runs", "metrics", "rl", *where, "-o", "json").stdout)
    assert {s["step"]: s["rewardTerms"] for s in out["steps"] if "rewardTerms" in s} == EXPECTED
    one = json.loads(cli_here("runs", "metrics", "rl", *where, "--steps", "1:2",
                              "-o", "json").stdout)
    assert [s.get("rewardTerms") for s in one["steps"]] == [EXPECTED[1], None]
    table = cli_here("runs", "metrics", "rl", *where, "-o", "wide",
                     env={"COLUMNS": "200"}).stdout
    assert [c.strip() for c in table.splitlines()[0].split("┃")][-3:] == [
        "term/penalty", "term/raw", "val/term/raw"]
    # the route's pages: one step each, the next page's first step, none after the last
    with httpx.Client(base_url=server.url) as http:
        first = http.get("/api/runs/rl/reward-terms", params={"limit": 1}).json()
        assert first == {"ok": True, "steps": [{"step": 0, "reward_terms": EXPECTED[0]}],
                         "next_lo": 1}
        last = http.get("/api/runs/rl/reward-terms", params={"lo": 1, "limit": 1}).json()
        assert last == {"ok": True, "steps": [{"step": 1, "reward_terms": EXPECTED[1]}],
                        "next_lo": None}
        bad = http.get("/api/runs/rl/reward-terms", params={"lo": "one"})
        assert bad.status_code == 400
        assert bad.json()["error"] == "lo must be a step number (a whole number), got 'one'"
