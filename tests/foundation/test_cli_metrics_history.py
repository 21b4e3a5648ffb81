"""`runwatch runs metrics` reads a run's history a part at a time (store.queries.History):
a table from the last steps alone, -o csv and -o json every step a block at a time.

Each output is checked against the records themselves: the newest record of a step wins,
a step's time is the earliest of the values shown, keys in name order. The runs take each
way a key is read: in seq order (its step summaries prove that no step was logged again),
sorted by step by the database (a step logged again, a step logged in two records), and
blocks merged across keys of different cadence, several blocks a run."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from runwatch.ingest.indexer import Indexer
from runwatch.store import queries
from runwatch.store import schema as s
from runwatch.store.db import open_engine
from tests.support import cli_here, run_cli
from tests.support.rundirs import write_run

T0 = 1.7e9
Record = dict[str, Any]


def dense() -> list[Record]:
    out: list[Record] = []
    for i in range(400):
        rec: Record = {"step": i, "ts": T0 + i / 8, "loss": 2.0 / (i + 1),
                       "learning_rate": 1e-3 * (1 - i / 400), "grad_norm": 1.5 + i % 7 / 3}
        if i % 25 == 0:
            rec["eval/loss"] = 3.0 / (i + 1)
        if i % 97 == 0:
            rec["loss"] = math.nan
        if i % 131 == 0:
            rec["grad_norm"] = math.inf if i % 2 else -math.inf
        out.append(rec)
    return out


def resumed() -> list[Record]:
    """Steps 0-299, then again from 150 to 399 (a run restored from a checkpoint)."""
    first = [{"step": i, "ts": T0 + i, "loss": 1.0 / (i + 1), "reward": i * 0.5,
              **({"eval/acc": i / 300} if i % 50 == 0 else {})} for i in range(300)]
    return first + [{"step": i, "ts": T0 + 1000 + i, "loss": 0.5 / (i + 1), "reward": -i * 0.25}
                    for i in range(150, 400)]


def twice() -> list[Record]:
    """A key logged in two records of some steps (the second wins), and one logged apart."""
    out: list[Record] = []
    for i in range(300):
        out.append({"step": i, "ts": T0 + i, "loss": i * 0.1})
        out.append({"step": i, "ts": T0 + i + 0.5, "reward": i * 0.2})
        if i % 3 == 0:
            out.append({"step": i, "ts": T0 + i + 0.7, "loss": i * 0.3})
    return out


def sparse() -> list[Record]:
    return [{"step": i, "ts": T0 + i, "loss": 1.0 / (i + 1), "kl": i * 1e-7}
            for i in range(0, 4000, 10)]


def gaps() -> list[Record]:
    """Keys over overlapping spans of steps, a short key past them, one now and then."""
    out: list[Record] = []
    for i in range(500):
        rec: Record = {"step": i, "ts": T0 + i}
        if i < 200:
            rec["a"] = i * 1.0
        if 100 <= i < 300:
            rec["b"] = -i * 1.0
        if i >= 350 and i % 7 == 0:
            rec["c"] = i / 7
        if i % 100 == 0:
            rec["d"] = 0.125
        if len(rec) > 2:
            out.append(rec)
    return out


def numbered(records: list[Record], first: int = 0) -> list[Record]:
    """The records with their seq, as the SDK writes them."""
    return [{**r, "seq": first + i} for i, r in enumerate(records)]


RUNS = {"dense": dense(), "resumed": resumed(), "twice": twice(), "sparse": sparse(),
        "gaps": gaps()}
RANGES: list[tuple[int | None, int | None]] = [(None, None), (140, 160), (5, None),
                                              (None, 10), (395, None), (10**9, None)]


def history(records: list[Record], keys: list[str] | None = None, lo: int | None = None,
            hi: int | None = None) -> list[tuple[int, float, dict[str, float]]]:
    """(step, ts, values by key) of each step in [lo, hi], from the records."""
    names = list(dict.fromkeys(keys)) if keys else sorted(
        {k for r in records for k in r} - {"step", "ts", "seq"})
    by_step: dict[int, dict[str, tuple[float, float]]] = {}
    for name in names:
        for r in records:
            if name in r and (lo is None or r["step"] >= lo) and (hi is None or r["step"] <= hi):
                by_step.setdefault(r["step"], {})[name] = (r["ts"], r[name])
    return [(step, min(ts for ts, _ in shown.values()),
             {name: value for name, (_, value) in shown.items()})
            for step, shown in sorted(by_step.items())]


def csv_text(steps: list[tuple[int, float, dict[str, float]]], names: list[str]) -> str:
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(["step", "ts", *names])
    for step, ts, values in steps:
        out.writerow([step, repr(ts), *["" if k not in values else repr(values[k])
                                        for k in names]])
    return buf.getvalue()


def json_text(name: str, steps: list[tuple[int, float, dict[str, float]]]) -> str:
    return json.dumps({"run_id": f"id-{name}", "name": name, "steps": [
        {"step": step, "ts": ts, "measured": values} for step, ts, values in steps]},
        ensure_ascii=False) + "\n"


def steps_arg(lo: int | None, hi: int | None) -> list[str]:
    if lo is None and hi is None:
        return []
    return ["--steps", f"{'' if lo is None else lo}:{'' if hi is None else hi}"]


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys of these runs long enough to be proved in order, and blocks of a few steps."""
    monkeypatch.setattr(queries, "PROVE_ORDER_POINTS", 100)
    monkeypatch.setattr(queries, "HISTORY_CHUNK_POINTS", 40)
    monkeypatch.setattr(queries, "MIN_KEY_CHUNK", 7)


@pytest.fixture
def indexed(runs_dir: Path, db_url: str) -> list[str]:
    """The runs indexed at `db_url` (on SQLite and on PostgreSQL): the options that name
    them. Indexed in this process: `runwatch index` runs as a subprocess in test_cli.py."""
    for name, records in RUNS.items():
        write_run(runs_dir, name, numbered(records))
    cli_here("index", str(runs_dir), "--db", db_url)
    return ["--dir", str(runs_dir), "--db", db_url]


def test_the_keys_take_each_way(indexed: list[str], db_url: str, small_parts: None) -> None:
    engine = open_engine(db_url)
    with engine.connect() as conn:
        pks = dict(conn.execute(select(s.runs.c.name, s.runs.c.pk)).all())
        proved = {name: {c.name for c in queries.History(conn, pk).columns
                         if c.first_step is not None} for name, pk in pks.items()}
        for name, records in RUNS.items():
            for lo, hi in RANGES:
                got = queries.History(conn, pks[name], None, lo, hi)
                assert got.count() == len(history(records, None, lo, hi)), (name, lo, hi)
    engine.dispose()
    assert proved == {"dense": {"grad_norm", "learning_rate", "loss"}, "resumed": set(),
                      "twice": {"reward"}, "sparse": {"kl", "loss"}, "gaps": {"a", "b"}}


def test_exports_hold_every_step_as_recorded(indexed: list[str], small_parts: None) -> None:
    for name, records in RUNS.items():
        for lo, hi in RANGES:
            args = ["runs", "metrics", name, *indexed, *steps_arg(lo, hi)]
            want = history(records, None, lo, hi)
            names = sorted({k for _, _, values in want for k in values})
            assert cli_here(*args, "-o", "csv").stdout == csv_text(want, names), (name, lo, hi)
            assert cli_here(*args, "-o", "json").stdout == json_text(name, want), (name, lo, hi)
            jq = cli_here(*args, "--jq", ".steps | length").stdout
            assert jq.strip() == str(len(want))
    keys = ["reward", "loss", "reward"]  # as asked, a column each time
    want = history(RUNS["resumed"], keys, 100, 250)
    got = cli_here("runs", "metrics", "resumed", *indexed, "--steps", "100:250",
                   *[a for k in keys for a in ("--key", k)], "-o", "csv").stdout
    assert got == csv_text(want, keys)


def test_a_real_process_exports_a_long_run(indexed: list[str]) -> None:
    want = history(RUNS["dense"])
    names = sorted({k for _, _, values in want for k in values})
    got = run_cli("runs", "metrics", "dense", *indexed, "-o", "csv").stdout
    assert got == csv_text(want, names)


def table_steps(text: str) -> list[int]:
    return [int(line.split()[0]) for line in text.splitlines() if line[:1].isdigit()]


def test_a_table_reads_the_last_steps_alone(indexed: list[str], small_parts: None,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    def whole(self: queries.History) -> None:
        raise AssertionError("the table read the whole history")

    monkeypatch.setattr(queries.History, "blocks", whole)
    for name, records in RUNS.items():
        for lo, hi in RANGES:
            want = history(records, None, lo, hi)
            for limit in (1, 5, 1000):
                out = cli_here("runs", "metrics", name, *indexed, "-o", "wide",
                               "--limit", str(limit), *steps_arg(lo, hi)).stdout
                assert table_steps(out) == [step for step, _, _ in want[-limit:]], \
                    (name, lo, hi, limit)
                shown = min(limit, len(want))
                said = f"showing the last {shown} of {len(want)} steps"
                assert (said in out) == (len(want) > limit), (name, lo, hi, limit)
                header = next((line for line in out.splitlines() if "STEP" in line), "")
                keys = sorted({k for _, _, values in want for k in values})
                assert [w for w in header.split() if w not in ("STEP", "┃")] == keys


def test_a_history_read_after_a_step_is_logged_again_reads_what_was_there(
        runs_dir: Path, engine: Engine, small_parts: None) -> None:
    records = dense()
    run = write_run(runs_dir, "live", numbered(records))
    Indexer(engine, runs_dir).index_once()
    with engine.connect() as conn:
        pk = conn.execute(select(s.runs.c.pk)).scalar_one()
        hist = queries.History(conn, pk)
        assert {c.name for c in hist.columns if c.first_step is not None} == {
            "grad_norm", "learning_rate", "loss"}
        restart = [{"step": i, "ts": T0 + 500 + i, "loss": 9.0, "grad_norm": 9.0,
                    "learning_rate": 9.0} for i in range(100, 120)]
        with (run / "metrics.jsonl").open("a", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in numbered(restart, len(records)))
        Indexer(engine, runs_dir).index_once()
        got = [(r.step, r.ts, r.values) for rows in hist.row_chunks() for r in rows]
        assert json.dumps(got) == json.dumps(history(records))
        assert json.dumps([(r.step, r.ts, r.values) for r in queries.history(conn, pk)]) \
            == json.dumps(history(records + restart))
