"""Whatever values a training loop passes, the SDK's writer keeps writing: common types
are encoded, what cannot be is dropped and counted one value at a time, keys that are
not strings are refused at the call, and the writer thread outlives every record."""

from __future__ import annotations

import datetime as dt
import enum
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine

import runwatch
from runwatch.ingest import Indexer
from runwatch.rundir import format as fmt
from runwatch.store import queries as q
from tests.support import wait_for


class Split(enum.Enum):
    TRAIN = "train"


class Opaque:
    """An object with no JSON form."""


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def open_run(runs_dir: Path, name: str) -> runwatch.Run:
    run = runwatch.init(name=name, dir=runs_dir, flush_interval=0.05)
    assert isinstance(run, runwatch.Run)
    return run


def test_common_types_are_encoded_and_the_rest_dropped_per_value(runs_dir: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with open_run(runs_dir, "types") as run:
            run.log_samples(1, [{"prompt": "p", "reward": np.float32(0.5),
                                 "tokens": np.arange(3), "path": Path("/data/x"),
                                 "when": dt.datetime(2026, 1, 2, 3, 4, 5),
                                 "split": Split.TRAIN, "tags": {"a"}, "pair": (1, 2),
                                 "huge": 2**70, "opaque": Opaque(), "raw": b"\xff"}])
            run.log({"np": np.float32(0.25), "huge": 2**70, "i64": np.int64(7)}, step=1)
            run.log_checkpoint(1, "training", "c1", path=Path("/ckpt/1"), dir=Path("/ckpt"),
                               scores=np.array([0.5, 1.0]))
            run.log_text("hello", data={"file": Path("/a"), 3: "int key", "o": Opaque()})
    d = runs_dir / "types"
    sample = json.loads((d / "step_0001_completions.json").read_text())["samples"][0]
    assert sample == {"prompt": "p", "reward": 0.5, "tokens": [0, 1, 2], "path": "/data/x",
                      "when": "2026-01-02T03:04:05", "split": "train", "tags": ["a"],
                      "pair": [1, 2], "huge": float(2**70)}
    metric = lines(d / "metrics.jsonl")[0]
    assert (metric["np"], metric["huge"], metric["i64"]) == (0.25, float(2**70), 7)
    ckpt = lines(d / "checkpoints.jsonl")[0]
    assert (ckpt["path"], ckpt["dir"], ckpt["scores"]) == ("/ckpt/1", "/ckpt", [0.5, 1.0])
    assert lines(d / "logs.jsonl")[0]["data"] == {"file": "/a", "3": "int key"}
    assert run.dropped_values == 3, "the opaque object, the bytes and the log's opaque object"
    assert [e["phase"] for e in lines(d / "events.jsonl")] == ["RUNNING", "SUCCEEDED"]
    assert any("could not be encoded" in str(w.message) for w in caught)


def test_a_key_that_is_not_a_string_is_refused_at_the_call(runs_dir: Path) -> None:
    with open_run(runs_dir, "keys") as run:
        with pytest.raises(TypeError, match="metric keys must be strings"):
            run.log({0: 1.0})  # type: ignore[dict-item]
        run.log({"a": 1.0}, step=0)
    assert [r["a"] for r in lines(runs_dir / "keys" / "metrics.jsonl")] == [1.0]


def test_an_empty_or_over_long_key_is_refused_at_the_call_and_the_run_goes_on(
        runs_dir: Path, engine: Engine) -> None:
    longest = "k" * fmt.MAX_KEY_LENGTH
    with open_run(runs_dir, "keylen") as run:
        run.log({"loss": 1.0}, step=0)
        with pytest.raises(ValueError, match="a metric key is empty; name a metric with 1 to "
                                             f"{fmt.MAX_KEY_LENGTH} characters"):
            run.log({"loss": 9.0, "": 9.0}, step=1)
        with pytest.raises(ValueError, match=f"longer than {fmt.MAX_KEY_LENGTH} characters"):
            run.log({"loss": 9.0, longest + "k": 9.0}, step=1)
        run.log({"loss": 2.0, longest: 3.0}, step=1)
        run.log({"loss": 4.0})
    recs = [{k: v for k, v in r.items() if k != "ts"}
            for r in lines(runs_dir / "keylen" / "metrics.jsonl")]
    assert recs == [{"step": 0, "seq": 0, "loss": 1.0},
                    {"step": 1, "seq": 1, "loss": 2.0, longest: 3.0},
                    {"step": 2, "seq": 2, "loss": 4.0}], "a refused call records nothing"
    report = Indexer(engine, runs_dir).index_once()
    assert report.problems == [], "the indexer takes every key the SDK wrote"
    with engine.connect() as conn:
        last = q.last_values(conn, q.resolve_run(conn, "keylen").pk)
    assert {key: v["points"] for key, v in last.items()} == {"loss": 3, longest: 1}


def test_the_writer_keeps_writing_and_pushing_back_after_a_poison_value(
        runs_dir: Path) -> None:
    run = open_run(runs_dir, "poison")
    run._writer.max_backlog = 200
    metrics = runs_dir / "poison" / "metrics.jsonl"
    peak_queue = 0
    with warnings.catch_warnings():
        # A loop run under `-W error` turns the writer's own warnings into exceptions.
        warnings.simplefilter("error")
        run.log_samples(0, [{"reward": np.float32(0.5), "opaque": Opaque()}])
        run.log({"bad": "text", "huge": 2**70}, step=0)
        for step in range(1, 5000):
            run.log({"a": float(step)}, step=step)
            peak_queue = max(peak_queue, len(run._writer.queue))
        wait_for(lambda: metrics.exists() and len(lines(metrics)) == 5000,
                 what="every record on disk before finish()", deadline=10)
    run.finish()
    assert peak_queue <= 200, "log() waits for the writer when the backlog is full"
    assert lines(metrics)[0] == {"step": 0, "ts": lines(metrics)[0]["ts"], "seq": 0,
                                 "huge": float(2**70)}
    assert (runs_dir / "poison" / "step_0000_completions.json").exists()
    assert run.dropped_values == 2


def test_text_that_is_not_valid_unicode_is_kept_with_a_replacement(runs_dir: Path) -> None:
    with open_run(runs_dir, "text") as run:
        run.log_text("half \ud800 a pair")
        run.log_samples(0, [{"prompt": "p", "completion": "bad \udcff byte", "\ud800": 1}])
    d = runs_dir / "text"
    assert lines(d / "logs.jsonl")[0]["message"] == "half ? a pair"
    sample = json.loads((d / "step_0000_completions.json").read_text())["samples"][0]
    assert sample == {"prompt": "p", "completion": "bad ? byte", "?": 1}
    assert run.dropped_values == 0


def test_a_key_that_names_a_record_field_is_the_step_or_left_out(runs_dir: Path) -> None:
    """`log({"step": it, "loss": l})`, as loops written for other trackers do, records at
    step `it` (the key overwrote the record's step before, and a float one lost the whole
    record); a `ts` or `seq` key, or a `step` key beside step=, is no metric: left out, with
    one warning a key."""
    with open_run(runs_dir, "fields") as run, warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        run.log({"step": 5, "loss": 1.0})
        run.log({"step": np.int64(7), "loss": 0.5})
        with pytest.raises(ValueError, match=r"step 7\.5 is a float"):
            run.log({"step": 7.5, "loss": 9.0})
        run.log({"loss": 0.25, "ts": 3.0, "seq": 99})
        run.log({"loss": 0.2, "ts": 4.0, "step": 99}, step=10)
        run.log({"loss": 0.1, "ts": 5.0})
    recs = [{k: v for k, v in r.items() if k != "ts"}
            for r in lines(runs_dir / "fields" / "metrics.jsonl")]
    assert recs == [{"step": 5, "seq": 0, "loss": 1.0}, {"step": 7, "seq": 1, "loss": 0.5},
                    {"step": 8, "seq": 2, "loss": 0.25}, {"step": 10, "seq": 3, "loss": 0.2},
                    {"step": 11, "seq": 4, "loss": 0.1}]
    assert all(r["ts"] > 1e9 for r in lines(runs_dir / "fields" / "metrics.jsonl"))
    told = sorted(str(w.message).split("'")[1] for w in said
                  if "names a field every record has" in str(w.message))
    assert told == ["seq", "step", "ts"], told  # once a key


def test_a_bad_value_counts_right_after_its_log(runs_dir: Path) -> None:
    """The writer's thread finds a value that is not a number: `dropped_values` read 0
    right after the log() and 2 only after a flush (found in a trial). It now waits for
    what was logged before it is read."""
    run = runwatch.init(name="counted", dir=runs_dir, flush_interval=60.0)
    assert isinstance(run, runwatch.Run)
    run.log({"loss": 1.0, "note": "nan", "obj": object()}, step=0)
    assert run.dropped_values == 2
    assert run.dropped_lines == 0
    run.finish()
    assert run.dropped_values == 2
