"""The SDK writes a complete, valid run directory and survives misuse and I/O failure."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from sqlalchemy import Engine

import runwatch
from runwatch.ingest import Indexer
from runwatch.jobs.failures import CATALOGUE
from runwatch.rundir import format as fmt
from runwatch.store import queries as q
from tests.support import wait_for

FAILED_SENTENCE = CATALOGUE["failed"].sentence


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@dataclasses.dataclass
class DemoConfig:
    lr: float = 1e-3
    steps: int = 10
    name: str = "x"

    def to_yaml(self) -> str:
        return yaml.safe_dump(dataclasses.asdict(self))

    @classmethod
    def from_yaml(cls, text: str) -> DemoConfig:
        return cls(**yaml.safe_load(text))


def test_init_writes_manifest_and_round_trippable_config(runs_dir: Path) -> None:
    cfg = DemoConfig(lr=3e-4, steps=7, name="abc")
    run = runwatch.init(project="p", name="r1", config=cfg, method="sft", base_model="tiny",
                        dataset="addition", trainer="t", backend="cpu", group="g", tags=["a"],
                        dir=runs_dir)
    run.finish()
    manifest = json.loads((runs_dir / "r1" / "manifest.json").read_text())
    assert manifest["schema_version"] == fmt.SCHEMA_VERSION
    assert len(manifest["run_id"]) == 32
    for field in ("host", "python", "packages", "git", "created_at", "pid"):
        assert field in manifest
    assert manifest["packages"]["runwatch"]
    assert (manifest["method"], manifest["base_model"], manifest["tags"]) == ("sft", "tiny", ["a"])
    text = (runs_dir / "r1" / "config.yaml").read_text()
    assert DemoConfig.from_yaml(text) == cfg


def test_plain_dataclass_and_dict_configs_are_yaml(runs_dir: Path) -> None:
    @dataclasses.dataclass
    class Plain:
        a: int = 1
        b: tuple[int, ...] = (1, 2)

    runwatch.init(name="d1", config=Plain(), dir=runs_dir).finish()
    runwatch.init(name="d2", config={"x": [1, 2]}, dir=runs_dir).finish()
    assert yaml.safe_load((runs_dir / "d1" / "config.yaml").read_text()) == {"a": 1, "b": [1, 2]}
    assert yaml.safe_load((runs_dir / "d2" / "config.yaml").read_text()) == {"x": [1, 2]}


def test_log_records_every_value_with_increasing_seq(runs_dir: Path) -> None:
    with runwatch.init(name="m", dir=runs_dir) as run:
        for step in range(50):
            run.log({"loss": 1.0 / (step + 1), "ok": True, "n": step}, step=step)
        run.log({"nan": math.nan, "inf": math.inf, "ninf": -math.inf})
    recs = lines(runs_dir / "m" / "metrics.jsonl")
    assert [r["seq"] for r in recs] == list(range(51))
    assert [r["step"] for r in recs] == [*range(50), 50]
    assert recs[3]["loss"] == pytest.approx(0.25) and recs[3]["ok"] == 1
    last = recs[-1]
    assert math.isnan(last["nan"]) and last["inf"] == math.inf and last["ninf"] == -math.inf
    events = lines(runs_dir / "m" / "events.jsonl")
    assert [e["phase"] for e in events] == ["RUNNING", "SUCCEEDED"]


def test_misuse_is_reported(runs_dir: Path) -> None:
    run = runwatch.init(name="mis", dir=runs_dir)
    run.log({"a": 1.0}, step=5)
    with pytest.raises(ValueError, match="backwards"):
        run.log({"a": 1.0}, step=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run.log({"a": 2.0, "bad": "text", "worse": [1]}, step=6)
        run.log({"bad": "again"}, step=7)
        run.finish()
    assert run.dropped_values == 3
    messages = [str(w.message) for w in caught]
    assert sum("'bad'" in m for m in messages) == 1, "one warning per key"
    with pytest.raises(runwatch.RunFinishedError):
        run.log({"a": 1.0})
    recs = lines(runs_dir / "mis" / "metrics.jsonl")
    assert recs[1] == {"step": 6, "ts": recs[1]["ts"], "a": 2.0, "seq": 1}


def test_a_step_that_is_not_a_whole_number_from_0_is_refused_and_the_run_goes_on(
        runs_dir: Path, engine: Engine) -> None:
    run = runwatch.init(name="steps", dir=runs_dir)
    for bad, said in [(-1, "step -1 is negative; steps are whole numbers >= 0"),
                      (1.5, r"step 1\.5 is a float; steps are whole numbers"),
                      (True, "step True is a bool"),
                      (np.float64(2.0), "is a float64"),
                      (fmt.MAX_STEP + 1, r"past 2\*\*63-1")]:
        with pytest.raises(ValueError, match=said):
            run.log({"loss": 9.0}, step=bad)  # type: ignore[arg-type]
    # samples and checkpoints take a step by the same rule (1.5 was cut to 1 in silence)
    with pytest.raises(ValueError, match=r"log_samples\(\): step 1\.5 is a float"):
        run.log_samples(1.5, [{"prompt": "p"}])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"log_checkpoint\(\): step -2 is negative"):
        run.log_checkpoint(-2, "training", "c")
    run.log_samples(np.int64(2), [{"prompt": "p"}])  # type: ignore[arg-type]
    run.log({"loss": 1.0}, step=np.int64(2))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"step 2\.7 is a float"):
        run.log({"loss": 9.0}, step=2.7)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="step 1 is before the last logged step 2"):
        run.log({"loss": 9.0}, step=1)
    run.log({"loss": 0.5})
    run.log({"loss": 0.25}, step=fmt.MAX_STEP)
    run.finish()
    recs = lines(runs_dir / "steps" / "metrics.jsonl")
    assert [(r["step"], r["loss"], r["seq"]) for r in recs] == [
        (2, 1.0, 0), (3, 0.5, 1), (fmt.MAX_STEP, 0.25, 2)], "a refused call records nothing"
    assert (runs_dir / "steps" / fmt.sample_file_name(2, "train", "completions")).is_file()
    assert not (runs_dir / "steps" / fmt.CHECKPOINTS).exists()  # the refused one: nothing
    report = Indexer(engine, runs_dir).index_once()
    assert report.problems == [], "the indexer takes every record the SDK wrote"
    with engine.connect() as conn:
        last = q.last_values(conn, q.resolve_run(conn, "steps").pk)
    assert last["loss"] == {"step": fmt.MAX_STEP, "value": 0.25, "points": 3}


def test_existing_run_needs_resume_and_resume_continues_seq(runs_dir: Path) -> None:
    with runwatch.init(name="again", dir=runs_dir) as run:
        run.log({"a": 1.0}, step=0)
    with pytest.raises(fmt.RunDirError, match="resume=True"):
        runwatch.init(name="again", dir=runs_dir)
    with runwatch.init(name="again", dir=runs_dir, resume=True) as run:
        run.log({"a": 2.0}, step=0)
    recs = lines(runs_dir / "again" / "metrics.jsonl")
    assert [r["seq"] for r in recs] == [0, 1]
    assert [e["seq"] for e in lines(runs_dir / "again" / "events.jsonl")] == [0, 1, 2, 3]


def test_a_run_starts_only_in_a_starting_phase(runs_dir: Path) -> None:
    for phase in fmt.START_PHASES:
        runwatch.init(name=f"starts-{phase.lower()}", dir=runs_dir, phase=phase).finish()
    with pytest.raises(ValueError, match="QUEUED, PREPARING, RUNNING, not 'SUCCEEDED'"):
        runwatch.init(name="finished", dir=runs_dir, phase="SUCCEEDED")
    assert not (runs_dir / "finished").exists()


def test_unsafe_names_are_refused(runs_dir: Path) -> None:
    for bad in ("../x", "a/b", "..", "", "a b"):
        with pytest.raises(fmt.RunDirError):
            runwatch.init(name=bad, dir=runs_dir)


def test_exception_in_with_block_fails_the_run_and_logs_the_exception(runs_dir: Path) -> None:
    with pytest.raises(ZeroDivisionError), runwatch.init(name="boom", dir=runs_dir):
        1 / 0  # noqa: B018
    last = lines(runs_dir / "boom" / "events.jsonl")[-1]
    assert last == {**last, "phase": "FAILED", "reason": FAILED_SENTENCE, "code": "failed"}
    error = lines(runs_dir / "boom" / "logs.jsonl")[-1]
    assert error["level"] == "error"
    assert error["message"] == "the training loop raised ZeroDivisionError: division by zero"
    assert error["data"]["exception"] == "ZeroDivisionError"
    assert error["data"]["message"] == "division by zero"
    assert error["data"]["traceback"].startswith("Traceback (most recent call last)")
    assert "1 / 0" in error["data"]["traceback"]


class OutOfMemoryError(RuntimeError):
    """Named as the frameworks name their device out-of-memory error."""


@pytest.mark.parametrize(("exc", "phase", "code", "reason"), [
    (OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB at /srv/x.py"), "FAILED",
     "device_oom", CATALOGUE["device_oom"].sentence),
    (MemoryError(), "FAILED", "host_oom", CATALOGUE["host_oom"].sentence),
    (runwatch.sdk.RefusedInput("row 3 ends\nwith a user message"), "FAILED", "refused",
     "row 3 ends with a user message"),
    (KeyboardInterrupt(), "CANCELLED", "cancelled", "the training job was stopped"),
    (SystemExit(0), "SUCCEEDED", None, None),
    (SystemExit(2), "FAILED", "failed", FAILED_SENTENCE),
], ids=["device-oom", "host-oom", "refusal", "ctrl-c", "exit-0", "exit-2"])
def test_what_ends_the_loop_decides_the_code_and_reason(
        runs_dir: Path, exc: BaseException, phase: str, code: str, reason: str) -> None:
    with pytest.raises(type(exc)), runwatch.init(name="ends", dir=runs_dir):
        raise exc
    last = lines(runs_dir / "ends" / "events.jsonl")[-1]
    assert (last["phase"], last.get("code"), last.get("reason")) == (phase, code, reason)
    if phase == "SUCCEEDED":
        assert not (runs_dir / "ends" / "logs.jsonl").exists(), "sys.exit(0) is no error"
        return
    logs = lines(runs_dir / "ends" / "logs.jsonl")
    if code == "cancelled":
        assert [e["level"] for e in logs] == ["warning"], "Ctrl-C is no error"
        assert "Ctrl-C" in logs[0]["message"]
        assert [e["phase"] for e in lines(runs_dir / "ends" / "events.jsonl")] == [
            "RUNNING", "CANCEL_REQUESTED", "CANCELLED"]
        return
    [error] = logs
    assert error["level"] == "error" and not error["message"].endswith(": ")
    assert error["data"]["exception"] == (f"{type(exc).__module__}.{type(exc).__qualname__}"
                                          .removeprefix("builtins."))


def test_finish_records_a_code_and_refuses_one_the_catalogue_lacks(runs_dir: Path) -> None:
    run = runwatch.init(name="coded", dir=runs_dir)
    with pytest.raises(ValueError, match="not a failure-catalogue id for FAILED"):
        run.finish("FAILED", code="cancelled")
    with pytest.raises(ValueError, match="not a failure-catalogue id"):
        run.finish("FAILED", code="martian")
    with pytest.raises(ValueError, match="refusal's reason is its own text"):
        run.finish("FAILED", code="refused")
    run.finish("FAILED", code="device_oom")
    last = lines(runs_dir / "coded" / "events.jsonl")[-1]
    assert (last["code"], last["reason"]) == ("device_oom", CATALOGUE["device_oom"].sentence)
    with runwatch.init(name="plain", dir=runs_dir) as run:
        run.fail("bad shard in /data/x")
    last = lines(runs_dir / "plain" / "events.jsonl")[-1]
    assert last["reason"] == "bad shard in /data/x" and "code" not in last


def _child(code: str, runs_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code).format(dir=str(runs_dir))],
                          capture_output=True, text=True, timeout=120)


def test_exit_without_finish_marks_failed(runs_dir: Path) -> None:
    proc = _child("""
        import runwatch
        run = runwatch.init(name="nofinish", dir={dir!r})
        run.log({{"a": 1.0}})
    """, runs_dir)
    assert proc.returncode == 0, proc.stderr
    last = lines(runs_dir / "nofinish" / "events.jsonl")[-1]
    assert last == {**last, "phase": "FAILED", "code": "stopped_early",
                    "reason": "the training job stopped before it finished"}
    assert lines(runs_dir / "nofinish" / "metrics.jsonl")[0]["a"] == 1.0
    error = lines(runs_dir / "nofinish" / "logs.jsonl")[-1]
    assert error["level"] == "error" and "finish()" in error["message"]


def test_uncaught_exception_marks_failed_and_logs_what_it_said(runs_dir: Path) -> None:
    proc = _child("""
        import runwatch
        run = runwatch.init(name="crash", dir={dir!r})
        run.log({{"a": 1.0}})
        raise RuntimeError("out of\\nbananas")
    """, runs_dir)
    assert proc.returncode == 1
    last = lines(runs_dir / "crash" / "events.jsonl")[-1]
    assert last == {**last, "phase": "FAILED", "reason": FAILED_SENTENCE, "code": "failed"}
    error = lines(runs_dir / "crash" / "logs.jsonl")[-1]
    assert error["message"] == "the training loop raised RuntimeError: out of bananas"
    assert error["data"]["message"] == "out of\nbananas"
    assert error["data"]["traceback"].endswith("RuntimeError: out of\nbananas\n")


def test_disabled_mode_and_secondary_ranks_record_nothing(runs_dir: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    run = runwatch.init(name="off", dir=runs_dir, mode="disabled")
    assert isinstance(run, runwatch.NullRun)
    monkeypatch.setenv("RANK", "1")
    ranked = runwatch.init(name="rank1", dir=runs_dir)
    assert isinstance(ranked, runwatch.NullRun)
    for r in (run, ranked):
        with r:
            r.log({"a": 1.0}, step=0)
            r.log_samples(0, [{"prompt": "p"}])
            r.log_checkpoint(0, "training", "c0")
            r.set_phase("RUNNING")
            r.log_text("hi")
            logging.getLogger("x").addHandler(r.logging_handler())
            r.log_engine_config({}, {})
            r.set_manifest_fields(wandb_url="u")
    assert list(runs_dir.iterdir()) == []
    for exc, status in ((KeyboardInterrupt(), "CANCELLED"), (KeyError("k"), "FAILED")):
        stopped = runwatch.NullRun()
        stopped.fail_from(exc)
        assert stopped.status == status


def test_logging_handler_samples_checkpoints_and_engine_config(runs_dir: Path) -> None:
    log = logging.getLogger("runwatch-test")
    log.setLevel(logging.DEBUG)
    with runwatch.init(name="all", dir=runs_dir, phase="PREPARING") as run:
        handler = run.logging_handler()
        log.addHandler(handler)
        try:
            log.warning("disk %s", "slow")
        finally:
            log.removeHandler(handler)
        run.log_text("plain", level="error", data={"k": 1})
        run.set_phase("PREPARING", stage="tokenizing", done=5, total=10)
        run.set_phase("RUNNING")
        run.log_samples(3, [{"prompt": "p", "completion": "<b>c</b>", "reward": 1.0}])
        run.log_samples(3, [{"prompt": "q", "completion": "d", "reward": 0.0}])
        run.log_samples(4, [{"prompt": "v"}], split="val")
        run.log_checkpoint(3, "training", "ckpt-3", path="/x", loss=0.5)
        run.log_engine_config({"lr": 1}, {"lr": 1, "beta1": 0.9})
        run.set_manifest_fields(wandb_url="https://example.invalid/run")
        log.addHandler(handler)
        try:
            dict[str, int]()["answer"]
        except KeyError:
            log.exception("lookup failed")
        finally:
            log.removeHandler(handler)
    d = runs_dir / "all"
    logs = lines(d / "logs.jsonl")
    assert logs[-1]["message"] == "lookup failed"
    assert logs[-1]["data"] == {**logs[-1]["data"], "logger": "runwatch-test",
                                "exception": "KeyError", "message": "'answer'"}
    assert logs[-1]["data"]["traceback"].startswith("Traceback")
    assert logs[0]["level"] == "warning" and logs[0]["message"] == "disk slow"
    assert logs[1]["data"] == {"k": 1}
    ev = lines(d / "events.jsonl")
    assert ev[1] == {**ev[1], "phase": "PREPARING", "stage": "tokenizing", "done": 5, "total": 10}
    samples = json.loads((d / "step_0003_completions.json").read_text())
    assert [s["prompt"] for s in samples["samples"]] == ["p", "q"]
    assert (d / "val_0004_completions.json").exists()
    assert lines(d / "checkpoints.jsonl")[0]["loss"] == 0.5
    assert json.loads((d / "engine_config.json").read_text())["resolved"]["beta1"] == 0.9
    assert json.loads((d / "manifest.json").read_text())["wandb_url"].endswith("/run")


def test_backlog_is_bounded_when_the_loop_outruns_the_writer(runs_dir: Path) -> None:
    run = runwatch.init(name="fast", dir=runs_dir)
    assert isinstance(run, runwatch.Run)
    run._writer.max_backlog = 500
    peak_queue = 0
    metrics = {f"m{i}": float(i) for i in range(20)}
    for step in range(60_000):
        run.log(metrics, step=step)
        peak_queue = max(peak_queue, len(run._writer.queue))
    run.finish()
    assert peak_queue <= 500
    assert run.dropped_lines == 0
    assert len(lines(runs_dir / "fast" / "metrics.jsonl")) == 60_000


def test_the_writer_writes_each_batch_before_encoding_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A producer that keeps refilling the queue must not make encoded lines pile up in
    # memory: the writer writes at most max_backlog records' lines at a time.
    from runwatch.sdk import sinks, writer

    pending_at_flush: list[int] = []
    real_flush = sinks.LineSink.flush

    def observed_flush(self: sinks.LineSink) -> bool:
        pending_at_flush.append(len(self.pending))
        return real_flush(self)

    monkeypatch.setattr(sinks.LineSink, "flush", observed_flush)
    w = writer.BackgroundWriter(tmp_path, max_backlog=100)
    for step in range(1000):
        w.queue.append(("metrics.jsonl", {"step": step, "ts": 0.0, "a": 1.0}))
    w._drain()
    w.close()
    assert max(pending_at_flush) <= 100
    assert len(lines(tmp_path / "metrics.jsonl")) == 1000


def test_io_failure_warns_once_and_logging_resumes(runs_dir: Path) -> None:
    run = runwatch.init(name="io", dir=runs_dir, flush_interval=0.05)
    assert isinstance(run, runwatch.Run)
    d = runs_dir / "io"
    run.log({"a": 0.0}, step=0)
    run._writer.flush_now()
    wait_for(lambda: (d / "metrics.jsonl").exists(), what="the first flush of metrics.jsonl")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shutil.rmtree(d)
        d.write_text("a file where the run folder was: every write fails")
        for step in range(1, 30):
            run.log({"a": float(step)}, step=step)
        wait_for(lambda: run._writer.io_warnings >= 1, what="the writer to meet the failure")
        run.log({"a": 30.0}, step=30)
        d.unlink()
        for step in range(31, 40):
            run.log({"a": float(step)}, step=step)
        wait_for(lambda: (d / "manifest.json").exists(), what="the run folder made anew")
        with pytest.raises(fmt.RunDirError, match=r"this process records .* already"):
            runwatch.init(name="io", dir=runs_dir, resume=True)
        run.finish()
    assert sum("could not write" in str(w.message) for w in caught) == 1
    steps = [r["step"] for r in lines(d / "metrics.jsonl")]
    assert steps == list(range(1, 40)), "nothing logged during the failure is lost"
    assert json.loads((d / "manifest.json").read_text())["name"] == "io"



def test_a_folder_removed_while_recording_is_made_again_and_said_once(runs_dir: Path) -> None:
    # Before, it was made again with no word: the steps it held were gone, and nothing
    # told the user (docs/sdk.md's failure table promises one warning).
    run = runwatch.init(name="gone", dir=runs_dir, flush_interval=0.05)
    assert isinstance(run, runwatch.Run)
    d = runs_dir / "gone"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(5):
            run.log({"a": float(step)}, step=step)
        run._writer.flush_now()
        wait_for(lambda: (d / "metrics.jsonl").exists() and len(lines(d / "metrics.jsonl")) == 5,
                 what="the first five steps")
        shutil.rmtree(d)
        for step in range(5, 8):
            run.log({"a": float(step)}, step=step)
        wait_for(lambda: (d / "manifest.json").exists(), what="the run folder made anew")
        run.log_text("after")
        run.finish()
    said = [str(w.message) for w in caught if "was removed or replaced" in str(w.message)]
    assert len(said) == 1 and str(d) in said[0]
    assert [r["step"] for r in lines(d / "metrics.jsonl")] == [5, 6, 7]
