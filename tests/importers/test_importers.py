"""Importers on real logs and on files the tests write: run directories that index, and
health findings on other frameworks' metric names."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from runwatch.cli.health import health_command, thresholds_command
from runwatch.cli.import_cmd import import_command
from runwatch.health import store as health_store
from runwatch.ingest.importers import SourceError, read_source, write_run_dir
from runwatch.ingest.importers.tensorboard import EventFileError, crc32c
from runwatch.ingest.importers.tensorboard import read as read_tb
from runwatch.ingest.indexer import Indexer
from runwatch.rundir.jsonl import loads_line
from runwatch.store import open_engine
from runwatch.store import queries as q

from .tfevents import event, file_version, frame, write_events

# The labelled corpus in the repository holds these logs as found (the copies beside the
# repository, in shared/data/real-logs, are the same files): the tests run in any clone.
CORPUS = Path(__file__).resolve().parents[1] / "data" / "real"
REAL_LOGS = {
    "dpo_soup_takehome_trainer_state.json": CORPUS / "dpo_soup_takehome" / "trainer_state.json",
    "grpo_stats_safety_unsloth_trainer_state.json":
        CORPUS / "grpo_stats_safety_unsloth" / "trainer_state.json",
    "sft_qwen05_verifier_trainer_state.json":
        CORPUS / "sft_qwen05_verifier" / "trainer_state.json",
    "tinker_rubric_rl_metrics.jsonl": CORPUS / "tinker_rubric_rl" / "metrics.jsonl",
}


def index_and_health(runs: Path, name: str) -> list[dict]:
    engine = open_engine(runs / ".runwatch" / "index.db")
    Indexer(engine, runs, hooks=[health_store.on_metrics]).index_once()
    with engine.begin() as conn:
        row = q.resolve_run(conn, name)
        found = health_store.health_for_run(conn, row.pk)
    engine.dispose()
    return found


def test_trl_dpo_state_imports_and_flags_nan(tmp_path: Path) -> None:
    imported = read_source(REAL_LOGS["dpo_soup_takehome_trainer_state.json"])
    assert imported.trainer == "trl" and imported.method == "dpo"
    assert len(imported.records) == 75
    run_dir = write_run_dir(imported, tmp_path, "dpo-real")
    lines = [loads_line(x) for x in (run_dir / "metrics.jsonl").read_bytes().splitlines()]
    assert [x["seq"] for x in lines] == list(range(75))
    assert math.isnan(lines[0]["grad_norm"])  # NaN survives as a JSON token
    found = index_and_health(tmp_path, "dpo-real")
    nan = [f for f in found if f["rule_id"] == "metric.non_finite"]
    assert nan and nan[0]["metric"] == "grad_norm" and nan[0]["first_step"] == 1
    assert not [f for f in found if f["rule_id"] == "dpo.loss_not_falling"]


@pytest.mark.parametrize("name, method, steps", [
    ("grpo_stats_safety_unsloth_trainer_state.json", "grpo", 158),
    ("sft_qwen05_verifier_trainer_state.json", "sft", 24),  # 6 evals join their step
])
def test_trl_states(tmp_path: Path, name: str, method: str, steps: int) -> None:
    imported = read_source(REAL_LOGS[name])
    assert imported.method == method and len(imported.records) == steps
    if method == "sft":  # eval entries join the training entry of their step
        assert any("eval_loss" in r and "loss" in r for r in imported.records)
    write_run_dir(imported, tmp_path, "r")
    index_and_health(tmp_path, "r")


def test_tinker_cookbook_jsonl(tmp_path: Path) -> None:
    imported = read_source(REAL_LOGS["tinker_rubric_rl_metrics.jsonl"])
    assert imported.trainer == "tinker-cookbook" and imported.method == "grpo"
    ts = [r["ts"] for r in imported.records]
    assert ts == sorted(ts) and ts[1] - ts[0] == pytest.approx(3816.386, rel=1e-3)
    write_run_dir(imported, tmp_path, "tinker")
    index_and_health(tmp_path, "tinker")


def test_verl_jsonl_names_reach_the_rules(tmp_path: Path) -> None:
    src = tmp_path / "verl" / "metrics.jsonl"
    src.parent.mkdir()
    lines = [{"step": s, "data": {"actor/pg_clipfrac": 0.25, "actor/grad_norm": 1.0,
                                  "critic/score/mean": 0.5}} for s in range(1, 31)]
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    imported = read_source(src)
    assert imported.trainer == "verl" and imported.method == "grpo"
    runs = tmp_path / "runs"
    write_run_dir(imported, runs, "verl-run")
    found = index_and_health(runs, "verl-run")
    (clip,) = [f for f in found if f["rule_id"] == "grpo.clip_high"]
    assert clip["metric"] == "fb/loss/clip/high_fraction" and clip["status"] == "open"


def test_rows_a_log_tags_as_held_out_keep_their_metrics_apart(tmp_path: Path) -> None:
    """A loop that writes training and validation rows into one file under the same names,
    told apart by a `split`/`mode` field (CS336's GRPO metrics.jsonl), imports its held-out
    rows under val/ names: they never read as the training metric."""
    src = tmp_path / "metrics.jsonl"
    rows = [{"step": 0, "split": "val", "accuracy": 0.1, "total_reward": 0.1}]
    rows += [{"step": s, "split": "train", "mean_reward": s / 10, "loss": 1.0}
             for s in range(1, 11)]
    rows += [{"step": 10, "split": "Validation", "accuracy": 0.3, "eval_loss": 0.9}]
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    records = read_source(src).records
    assert records[0] == {"step": 0, "val/accuracy": 0.1, "val/total_reward": 0.1}
    assert records[1] == {"step": 1, "mean_reward": 0.1, "loss": 1.0}
    assert records[-1] == {"step": 10, "val/accuracy": 0.3, "eval_loss": 0.9}
    assert not any("accuracy" in r or "total_reward" in r for r in records)

    table = tmp_path / "log.csv"
    table.write_text("step,mode,loss\n1,train,2.0\n1,eval,2.5\n2,train,1.8\n2,test,2.4\n",
                     encoding="utf-8")
    imported = read_source(table)
    assert imported.records == [{"step": 1, "loss": 2.0, "val/loss": 2.5},
                                {"step": 2, "loss": 1.8, "val/loss": 2.4}]


def test_llama_factory_trainer_log_keeps_its_own_steps(tmp_path: Path) -> None:
    # LLaMA-Factory logs every 10 steps, counting them in current_steps; its progress
    # fields are not metrics
    src = tmp_path / "trainer_log.jsonl"
    lines = [{"current_steps": s, "total_steps": 50, "loss": 2.0 / s, "lr": 1e-4,
              "epoch": s / 50, "percentage": 2.0 * s, "elapsed_time": "0:00:39",
              "remaining_time": "0:05:17"} for s in (10, 20, 30, 40, 50)]
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    imported = read_source(src)
    assert imported.trainer == "llama-factory" and imported.method == "sft"
    assert [r["step"] for r in imported.records] == [10, 20, 30, 40, 50]
    assert not {"current_steps", "total_steps", "percentage"} & {k for r in imported.records
                                                                for k in r}
    assert imported.records[1]["loss"] == pytest.approx(0.1)
    # the same log of a DPO stage (accuracy) and a PPO stage (reward)
    for extra, method in (("accuracy", "dpo"), ("reward", "grpo")):
        staged = tmp_path / f"{method}.jsonl"
        staged.write_text("\n".join(json.dumps({**x, extra: 0.5}) for x in lines) + "\n",
                          encoding="utf-8")
        assert read_source(staged).method == method


def test_tensorboard_simple_and_tensor_scalars(tmp_path: Path) -> None:
    logdir = tmp_path / "tb"
    payloads = [file_version(1e9)]
    for step in range(1, 41):
        payloads.append(event(step, 1e9 + step, {"train/loss": 2.0, "train/grad_norm": 1.0}))
        payloads.append(event(step, 1e9 + step, {"train/learning_rate": 1e-4}, as_tensor=True))
    payloads.append(event(41, 1e9 + 41, {"train/grad_norm": float("inf")}))
    write_events(logdir / "run1" / "events.out.tfevents.1.host", payloads)
    imported = read_tb(logdir)
    assert len(imported.records) == 41
    first = imported.records[0]
    assert first["step"] == 1 and first["ts"] == 1e9 + 1
    assert first["train/loss"] == 2.0 and first["train/learning_rate"] == pytest.approx(1e-4)
    assert math.isinf(imported.records[-1]["train/grad_norm"])
    runs = tmp_path / "runs"
    write_run_dir(imported, runs, "tb-run", method="sft")
    rules = {f["rule_id"] for f in index_and_health(runs, "tb-run")}
    # HF Trainer's TensorBoard names (train/…) map to canonical ones.
    assert {"metric.non_finite", "sft.loss_not_falling"} <= rules


def test_tensorboard_torn_tail_and_bad_crc(tmp_path: Path) -> None:
    good = frame(event(1, 1e9, {"loss": 1.0}))
    path = tmp_path / "events.out.tfevents.2"
    path.write_bytes(good + good[:10])  # a crash mid-write leaves a torn record
    assert len(read_tb(path).records) == 1
    bad = bytearray(good)
    bad[-5] ^= 0xFF  # flip a payload byte: the data checksum no longer matches
    path.write_bytes(bytes(bad))
    with pytest.raises(EventFileError, match="bad data checksum"):
        read_tb(path)


def test_crc32c_known_vector() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert struct.pack("<I", crc32c(b"")) == b"\0\0\0\0"


def test_sources_that_cannot_be_imported(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        read_source(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{}", encoding="utf-8")
    with pytest.raises(SourceError, match="no log_history"):
        read_source(tmp_path / "x.json")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="no TensorBoard event files"):
        read_source(tmp_path / "empty")


def cli() -> typer.Typer:
    app = typer.Typer()
    app.command("import")(import_command)
    app.command("health")(health_command)
    app.command("thresholds")(thresholds_command)
    return app


def test_import_and_health_commands(tmp_path: Path) -> None:
    src = tmp_path / "state" / "trainer_state.json"
    src.parent.mkdir()
    history = [{"step": s, "loss": 2.0, "grad_norm": 1.0 if s != 35 else 50.0}
               for s in range(1, 41)]
    src.write_text(json.dumps({"log_history": history, "max_steps": 40}), encoding="utf-8")
    runs = tmp_path / "runs"
    runner = CliRunner()
    res = runner.invoke(cli(), ["import", str(src), "--dir", str(runs), "-o", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["name"] == "imported-state" and out["steps"] == 40 and out["method"] == "sft"
    res = runner.invoke(cli(), ["health", "imported-state", "--dir", str(runs), "-o", "json"])
    assert res.exit_code == 0, res.output
    rules = {f["rule_id"] for f in json.loads(res.stdout)["findings"]}
    assert {"sft.loss_not_falling", "optim.grad_norm_spike"} <= rules
    res = runner.invoke(cli(), ["health", "imported-state", "--dir", str(runs),
                                "--fail-on", "warning"])
    assert res.exit_code == 1
    assert "sft.loss_not_falling" in res.stdout
    res = runner.invoke(cli(), ["health", "imported-state", "--dir", str(runs),
                                "--fail-on", "critical"])
    assert res.exit_code == 0
    again = runner.invoke(cli(), ["import", str(src), "--dir", str(runs)])
    assert again.exit_code != 0 and "already exists" in again.output


def test_health_thresholds_file_is_a_what_if(tmp_path: Path) -> None:
    src = tmp_path / "s" / "trainer_state.json"
    src.parent.mkdir()
    # a loss that wobbles about 2.0 and does not fall (an exactly constant one is also
    # loss.stuck's: a logger repeating one value)
    src.write_text(json.dumps({"log_history": [{"step": s, "loss": 2.0 + 0.05 * math.sin(1.3 * s)}
                                               for s in range(40)]}), encoding="utf-8")
    runs = tmp_path / "runs"
    runner = CliRunner()
    assert runner.invoke(cli(), ["import", str(src), "--dir", str(runs)]).exit_code == 0
    cfg = tmp_path / "health.yaml"
    cfg.write_text("rules:\n  sft.loss_not_falling: {enabled: false}\n", encoding="utf-8")
    res = runner.invoke(cli(), ["health", "imported-s", "--dir", str(runs), "--thresholds",
                                str(cfg), "--fail-on", "warning"])
    assert res.exit_code == 0, res.output
    cfg.write_text("rules:\n  sft.loss_not_falling: {enabeld: false}\n", encoding="utf-8")
    res = runner.invoke(cli(), ["health", "imported-s", "--dir", str(runs), "--thresholds",
                                str(cfg)])
    assert res.exit_code == 2 and "has no parameter 'enabeld'" in res.output


def test_project_thresholds_command(tmp_path: Path) -> None:
    src = tmp_path / "s" / "trainer_state.json"
    src.parent.mkdir()
    # a loss that wobbles about 2.0 and does not fall (an exactly constant one is also
    # loss.stuck's: a logger repeating one value)
    src.write_text(json.dumps({"log_history": [{"step": s, "loss": 2.0 + 0.05 * math.sin(1.3 * s)}
                                               for s in range(40)]}), encoding="utf-8")
    runs = tmp_path / "runs"
    runner = CliRunner()
    assert runner.invoke(cli(), ["import", str(src), "--dir", str(runs), "--project", "team"]
                         ).exit_code == 0
    health = ["health", "imported-s", "--dir", str(runs), "--fail-on", "warning"]
    assert runner.invoke(cli(), health).exit_code == 1
    cfg = tmp_path / "health.yaml"
    cfg.write_text("rules:\n  sft.loss_not_falling: {severity: info}\n", encoding="utf-8")
    res = runner.invoke(cli(), ["thresholds", "team", str(cfg), "--dir", str(runs)])
    assert res.exit_code == 0 and "re-evaluated 1 runs" in res.output, res.output
    assert runner.invoke(cli(), health).exit_code == 0
    shown = runner.invoke(cli(), ["thresholds", "team", "--dir", str(runs)])
    assert "sft.loss_not_falling" in shown.output
    assert runner.invoke(cli(), ["thresholds", "team", "--clear", "--dir", str(runs)]
                         ).exit_code == 0
    assert runner.invoke(cli(), health).exit_code == 1
