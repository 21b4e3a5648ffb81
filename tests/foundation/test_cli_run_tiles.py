"""`runwatch runs get` answers a run's tiles (counts, best values, peaks) from the index's
step summaries (store.series.IndexValues), reading a whole series only where they cannot
say: a running total's check, a sum of values that are not whole numbers, a zero. The
numbers are those of the series themselves (a step logged again drops what it replaces)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runwatch.store import series
from tests.support import cli_here, run_cli
from tests.support.rundirs import write_run

T0 = 1.7e9
Record = dict[str, Any]


def counted() -> list[Record]:
    """A running total of tokens, examples a step that are not whole, a peak of memory."""
    return [{"step": i, "ts": T0 + i, "num_tokens": 1000.0 * (i + 1),
             "num_examples": (i % 7 + 0.25) / 3 * 10.0 ** (i % 17),
             "loss": 2.0 / (i + 1) + (i % 5) * 1e-3, "reward_mean": math.sin(i / 9),
             "memory/weights_bytes": float(i * 7919 % 1001)} for i in range(300)]


def restored() -> list[Record]:
    """Steps 0-299, then again from 200: the best loss and reward of the first steps past
    200 are no longer the run's; tokens the same count every step."""
    first = [{"step": i, "ts": T0 + i, "tokens": 512.0, "loss": 0.001 if i == 250 else 1.0 + i,
              "reward_mean": 99.0 if i == 260 else i / 300, "memory/act_bytes": 5.0e9 + i}
             for i in range(300)]
    again = [{"step": i, "ts": T0 + 1000 + i, "tokens": 512.0, "loss": 2.0 + i,
              "reward_mean": i / 600, "memory/act_bytes": 4.0e9 + i} for i in range(200, 400)]
    return first + again


def zeros() -> list[Record]:
    return [{"step": i, "ts": T0 + i, "samples": 0.0, "loss": 0.0 if i == 100 else 1.0,
             "reward_mean": math.nan if i % 3 else -1.0} for i in range(200)]


RUNS = {"counted": counted(), "restored": restored(), "zeros": zeros()}


def kept(records: list[Record], key: str) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The key's values in step order, a point dropped when a later one has its step or an
    earlier one (as store.series.keep_mask)."""
    points = [(r["step"], r[key]) for r in records if key in r]
    out = [v for i, (step, v) in enumerate(points)
           if all(step < later for later, _ in points[i + 1:])]
    return np.array(out, dtype=np.float64)


def finite(values: np.ndarray[Any, np.dtype[np.float64]]) -> np.ndarray[Any, np.dtype[np.float64]]:
    return values[np.isfinite(values)]


@pytest.fixture
def indexed(runs_dir: Path, db_url: str) -> list[str]:
    """The runs indexed at `db_url` (on SQLite and on PostgreSQL): the options that name
    them."""
    for name, records in RUNS.items():
        write_run(runs_dir, name, [{**r, "seq": i} for i, r in enumerate(records)])
    cli_here("index", str(runs_dir), "--db", db_url)  # a subprocess in test_cli.py
    return ["--dir", str(runs_dir), "--db", db_url]


def test_tiles_are_the_series_own(indexed: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[int] = []
    whole = series.read_series

    def counting(conn: Any, key_id: int) -> series.Series:
        reads.append(key_id)
        return whole(conn, key_id)

    monkeypatch.setattr(series, "read_series", counting)
    got = {}
    for name in RUNS:
        reads.clear()
        got[name] = json.loads(cli_here("runs", "get", name, *indexed, "-o", "json").stdout)
        got[name]["reads"] = len(reads)

    c, r, z = RUNS["counted"], RUNS["restored"], RUNS["zeros"]
    tiles = got["counted"]["scalars"]
    assert tiles["tokens"] == 300_000.0  # a running total: its last value
    assert tiles["examples"] == float(finite(kept(c, "num_examples")).sum())
    assert tiles["best_train_loss"] == float(kept(c, "loss").min())
    assert tiles["best_mean_reward"] == float(kept(c, "reward_mean").max())
    assert got["counted"]["cost"]["peak_memory_bytes"] == {
        "weights_bytes": float(kept(c, "memory/weights_bytes").max())}
    # read whole: the running total's check, and the sum of examples not whole
    assert got["counted"]["reads"] == 2

    tiles = got["restored"]["scalars"]
    assert tiles["tokens"] == 512.0 * 400
    assert tiles["best_train_loss"] == 1.0 and float(kept(r, "loss").min()) == 1.0
    assert tiles["best_mean_reward"] == float(kept(r, "reward_mean").max()) == 399 / 600
    assert got["restored"]["cost"]["peak_memory_bytes"] == {"act_bytes": 5.0e9 + 199}
    assert got["restored"]["results"]["best_train_loss"] == 1.0
    assert got["restored"]["reads"] == 0, "every tile came from the step summaries"

    tiles = got["zeros"]["scalars"]
    assert tiles["examples"] == 0.0 and tiles["best_train_loss"] == 0.0
    assert tiles["best_mean_reward"] == -1.0 == float(finite(kept(z, "reward_mean")).max())


def test_the_table_shows_the_same_tiles(indexed: list[str]) -> None:
    out = run_cli("runs", "get", "restored", *indexed).stdout
    assert "Best train loss: 1" in out
    assert "Peak memory (act): 4.7 GiB" in out
