"""Record routes: rollouts by step and split with best/worst N, checkpoints, logs, health."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from runwatch.sdk import init

from .apiclient import Api, assert_error


def _grpo_run(runs_dir: Path) -> None:
    run = init(name="grpo", dir=runs_dir, method="grpo", base_model="tiny", dataset="arith")
    for step in (0, 1):
        run.log({"reward_mean": 0.5}, step=step)
        run.log_samples(step, [{"prompt": f"q{i}", "completion": f"a{i}", "reward": float(i),
                                "reward_terms": {"correct": float(i)}} for i in range(6)],
                        split="train")
    run.log_samples(1, [{"prompt": "v", "completion": "w", "reward": 1.0}], split="val")
    for i in range(30):
        run.log_text(f"message {i}", level="warning" if i % 10 == 0 else "info",
                     data={"i": i} if i == 3 else None)
    run.log_checkpoint(step=1, kind="training", id="ckpt-1", path="/tmp/ckpt-1")
    run.finish("SUCCEEDED")


def test_rollouts_best_worst_and_step_picker(api: Api, runs_dir: Path,
                                             index: Callable[[], None]) -> None:
    _grpo_run(runs_dir)
    index()
    latest = api.ok("/api/runs/grpo/samples")
    assert latest["step"] == 1 and latest["split"] == "train" and latest["total"] == 6
    assert {(a["step"], a["split"]) for a in latest["available"]} == {
        (0, "train"), (1, "train"), (1, "val")}
    best = api.ok("/api/runs/grpo/samples", params={"step": 0, "best": 2})["samples"]
    assert [s["reward"] for s in best] == [5.0, 4.0]
    assert best[0]["completion"] == "a5" and best[0]["reward_terms"] == {"correct": 5.0}
    worst = api.ok("/api/runs/grpo/samples", params={"step": 0, "worst": 2})["samples"]
    assert [s["reward"] for s in worst] == [0.0, 1.0]
    val = api.ok("/api/runs/grpo/samples", params={"step": 1, "split": "val"})
    assert val["split"] == "val" and val["samples"][0]["prompt"] == "v"
    assert_error(api.get("/api/runs/grpo/samples", params={"step": 7}), 404)
    assert_error(api.get("/api/runs/grpo/samples", params={"best": 1, "worst": 1}), 400)


def test_logs_page_newest_first_with_level_filter(api: Api, runs_dir: Path,
                                                  index: Callable[[], None]) -> None:
    _grpo_run(runs_dir)
    index()
    first = api.ok("/api/runs/grpo/logs", params={"limit": 20})
    assert first["logs"][0]["message"] == "message 29" and first["next_cursor"]
    rest = api.ok("/api/runs/grpo/logs", params={"limit": 20, "cursor": first["next_cursor"]})
    assert len(rest["logs"]) == 10 and rest["next_cursor"] is None
    assert rest["logs"][-4]["data"] == {"i": 3}
    warnings = api.ok("/api/runs/grpo/logs", params={"level": "warning"})["logs"]
    assert [w["message"] for w in warnings] == ["message 20", "message 10", "message 0"]
    assert_error(api.get("/api/runs/grpo/logs", params={"level": "loud"}), 400)
    assert_error(api.get("/api/runs/grpo/logs", params={"cursor": "x"}), 400)


def test_checkpoints_and_health(api: Api, runs_dir: Path, index: Callable[[], None]) -> None:
    _grpo_run(runs_dir)
    index()
    (ck,) = api.ok("/api/runs/grpo/checkpoints")["checkpoints"]
    assert ck["id"] == "ckpt-1" and ck["step"] == 1 and ck["kind"] == "training"
    health = api.ok("/api/runs/grpo/health")
    assert health["available"] is True and isinstance(health["findings"], list)
