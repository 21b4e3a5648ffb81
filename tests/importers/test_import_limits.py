"""`runwatch import` at the edges of the run format: steps too large for a clock or below 0,
rows wider than a record may be, columns that would be lost (named twice, unnamed, numbers
with a decimal comma) and steps logged twice, in each format, imported into a real index and
read back, or refused with what to do."""

from __future__ import annotations

import itertools
import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from runwatch.ingest.importers import SourceError, read_source
from runwatch.ingest.points import MAX_KEYS_PER_RECORD, MAX_KEYS_PER_RUN
from runwatch.rundir.jsonl import loads_line
from tests.support import cli_here, run_cli

from .test_csv_wandb import read_back
from .tfevents import event, write_events


def metrics_lines(run_dir: Path) -> list[dict[str, Any]]:
    return [loads_line(x) for x in (run_dir / "metrics.jsonl").read_bytes().splitlines()]


def imported(src: Path, runs: Path, *args: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(
        cli_here("import", str(src), "--dir", str(runs), "-o", "json", *args).stdout)
    return out


def refused(src: Path, runs: Path) -> str:
    res = cli_here("import", str(src), "--dir", str(runs), check=False)
    assert res.returncode == 2, res.stdout
    assert not [p for p in runs.glob("*") if p.name != ".runwatch"]  # no run written
    return " ".join(res.stderr.split())  # the message as one line, whatever the width


def test_huge_steps_get_times_of_today_and_the_run_list_reads(tmp_path: Path) -> None:
    """Steps numbered by tokens: one second per step put the first row of steps of 1e10 in
    1653, and of 1e11 before year 1, where `runs list` of the whole folder failed on it
    (tests/server/test_undated_times.py: the readers). 1e10 here: the health engine is
    slow on 1e11 (its own issue)."""
    src = tmp_path / "h.csv"
    src.write_text("step,loss\n0,2.0\n10000000000,1.9\n", encoding="utf-8")
    runs = tmp_path / "runs"
    before = time.time()
    run_cli("import", str(src), "--dir", str(runs), "--name", "tokens")
    (run,) = json.loads(run_cli("runs", "list", "--dir", str(runs), "-o", "json").stdout)
    created = datetime.fromisoformat(run["created_at"].replace("Z", "+00:00")).timestamp()
    assert run["name"] == "tokens" and before - 2 <= created <= time.time()
    assert run["duration_s"] == 1.0
    lines = metrics_lines(runs / "tokens")
    # no clock in the log: one second per logged step, the last at the import
    assert [x["ts"] - lines[0]["ts"] for x in lines] == [0.0, 1.0]
    assert before <= lines[-1]["ts"] <= time.time()
    assert [r.step for r in read_back(runs, "tokens")] == [0, 10_000_000_000]


def test_a_log_without_a_clock_is_spaced_by_logged_step(tmp_path: Path) -> None:
    """A jump in the steps is not a wait of that many seconds: the log never said so."""
    src = tmp_path / "metrics.jsonl"
    src.write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n"
                           for s in (0, 10, 5000, 5010)), encoding="utf-8")
    out = imported(src, tmp_path / "runs", "--name", "gap")
    assert out["steps"] == 4
    ts = [x["ts"] for x in metrics_lines(tmp_path / "runs" / "gap")]
    assert [b - a for a, b in itertools.pairwise(ts)] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_row_wider_than_a_record_keeps_every_metric(tmp_path: Path, fmt: str) -> None:
    """3,000 metrics a row: the import said "20 steps" and the indexer skipped every row."""
    width, rows = MAX_KEYS_PER_RECORD + 1000, 20
    src = tmp_path / f"wide.{fmt}"
    if fmt == "csv":
        src.write_text("step," + ",".join(f"m{i}" for i in range(width)) + "\n"
                       + "".join(f"{s}," + ",".join(f"{s + i / 1e4}" for i in range(width))
                                 + "\n" for s in range(rows)), encoding="utf-8")
    else:
        src.write_text("".join(json.dumps({"step": s, **{f"m{i}": s + i / 1e4
                                                          for i in range(width)}}) + "\n"
                               for s in range(rows)), encoding="utf-8")
    runs = tmp_path / "runs"
    assert imported(src, runs, "--name", "wide")["steps"] == rows
    lines = metrics_lines(runs / "wide")
    assert max(len(x) - 3 for x in lines) <= MAX_KEYS_PER_RECORD  # step, ts, seq
    back = read_back(runs, "wide")
    assert [r.step for r in back] == list(range(rows))  # two records a row, one step
    assert all(len(r.values) == width for r in back)
    assert back[7].values[f"m{width - 1}"] == pytest.approx(7 + (width - 1) / 1e4)


def test_more_metric_names_than_a_run_holds_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "too_wide.csv"
    names = [f"m{i}" for i in range(MAX_KEYS_PER_RUN + 1)]
    src.write_text("step," + ",".join(names) + "\n0," + ",".join("1" for _ in names) + "\n",
                   encoding="utf-8")
    message = refused(src, tmp_path / "runs")
    assert f"{MAX_KEYS_PER_RUN + 1} metrics" in message and f"at most {MAX_KEYS_PER_RUN}" in message


def test_a_negative_step_is_refused_naming_the_row(tmp_path: Path) -> None:
    src = tmp_path / "neg.csv"
    src.write_text("step,loss\n0,2.0\n-1,1.9\n2,1.8\n", encoding="utf-8")
    res = run_cli("import", str(src), "--dir", str(tmp_path / "runs"), check=False)
    assert res.returncode == 2, res.stdout
    message = " ".join(res.stderr.split())
    assert "neg.csv: line 3: step -1 is negative" in message and "fix or delete that row" in message
    assert not (tmp_path / "runs" / "imported-neg").exists()


def test_steps_the_format_does_not_take_are_refused_in_every_format(tmp_path: Path) -> None:
    big = 2**63  # one past the largest step
    csv = tmp_path / "big.csv"
    csv.write_text(f"step,loss\n0,2.0\n{big},1.9\n", encoding="utf-8")
    with pytest.raises(SourceError, match=r"big.csv: line 3: step \d+ is past 2\*\*63-1"):
        read_source(csv)
    lines = tmp_path / "metrics.jsonl"
    for bad, what in ((-3, "is negative"), (1.5, "is a float"), ("7", "is a str"),
                      (big, "past 2\\*\\*63-1")):
        lines.write_text(json.dumps({"step": 0, "loss": 1.0}) + "\n"
                         + json.dumps({"step": bad, "loss": 1.0}) + "\n", encoding="utf-8")
        with pytest.raises(SourceError, match=f"metrics.jsonl: line 2: step .* {what}"):
            read_source(lines)
    lines.write_text(json.dumps({"step": 3.0, "loss": 1.0}) + "\n", encoding="utf-8")
    assert read_source(lines).records[0]["step"] == 3  # a whole float is its step
    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"log_history": [{"step": 1, "loss": 1.0},
                                                 {"step": -2, "loss": 0.9}]}), encoding="utf-8")
    with pytest.raises(SourceError, match=r"log_history\[1\]: step -2 is negative"):
        read_source(state)
    tb = write_events(tmp_path / "tb" / "events.out.tfevents.1.host",
                      [event(1, 1e9, {"loss": 1.0}), event(-5, 1e9 + 1, {"loss": 0.9})])
    with pytest.raises(SourceError, match=r"tfevents.1.host: event 1: step -5 is negative"):
        read_source(tb.parent)


def test_columns_that_would_be_lost_are_refused(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    cases = {
        "twice.csv": ("step,loss,loss\n0,2.0,5\n1,1.9,6\n",
                      "the header names 'loss' more than once"),
        "unnamed.csv": ("step,,loss\n0,7,2.0\n1,8,1.9\n",
                        "column 2 has no name in the header but holds values (line 2: '7')"),
        "semicolon.csv": ("step;loss\n0;2,5\n1;2,4\n",
                          "column 'loss' holds a number written with a decimal comma "
                          "(line 2: '2,5')"),
        "comma_beside_points.csv": ("step;loss;lr\n0;2,5;0.1\n",
                                    "column 'loss' holds a number written with a decimal comma"),
        "long_name.csv": ("step," + "x" * 300 + "\n0,1.0\n",
                          "metric key 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'… is longer "
                          "than 256 characters"),
        "seq.csv": ("step,seq,loss\n0,5,2.0\n1,5,1.9\n",
                    "metric 'seq' has the name of a record's own field"),
        "held_out_twice.csv": ("step,split,loss,val/loss\n0,val,2.0,2.1\n",
                               "holds both 'loss' and 'val/loss'"),
    }
    for name, (text, expected) in cases.items():
        src = tmp_path / name
        src.write_text(text, encoding="utf-8")
        message = refused(src, runs)
        assert expected in message, message
    assert "'.' as the decimal separator" in refused(tmp_path / "semicolon.csv", runs)
    # what loses nothing still imports: an unnamed empty column, pandas's index
    src = tmp_path / "trailing.csv"
    src.write_text("step,loss,\n0,2.0,\n1,1.9,\n", encoding="utf-8")
    assert [r["step"] for r in read_source(src).records] == [0, 1]
    index = tmp_path / "frame.csv"  # pandas's to_csv(): a first column of row numbers
    index.write_text(",step,loss\n0,10,2.0\n1,20,1.9\n", encoding="utf-8")
    assert read_source(index).records == [{"step": 10, "loss": 2.0}, {"step": 20, "loss": 1.9}]
    # in a comma-separated file a quoted "0,1" is text (devices, a thousands separator):
    # its column is left out as text, the import goes on (it was refused as a decimal comma)
    listed = tmp_path / "devices.csv"
    listed.write_text('step,loss,devices,tokens\n0,2.0,"0,1","12,345"\n1,1.9,"0,1","23,456"\n',
                    encoding="utf-8")
    assert read_source(listed).records == [{"step": 0, "loss": 2.0}, {"step": 1, "loss": 1.9}]


def test_a_csv_step_is_read_as_written_however_large(tmp_path: Path) -> None:
    """A step column read through a float: 2**53 + 1 came back 2**53 (two steps one, said
    as a step logged twice) and 2**63 - 1 as 2**63, refused as past the largest step."""
    src = tmp_path / "tokens.csv"
    src.write_text(f"step,loss\n{2**53},2.0\n{2**53 + 1},1.9\n{2**63 - 1},1.8\n",
                   encoding="utf-8")
    got = read_source(src)
    assert [r["step"] for r in got.records] == [2**53, 2**53 + 1, 2**63 - 1]
    assert got.notes == []


def test_a_step_logged_twice_shows_its_last_value_and_says_so(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    csv = tmp_path / "resumed.csv"
    csv.write_text("step,loss\n0,2.0\n1,1.9\n0,1.5\n1,1.4\n2,1.3\n", encoding="utf-8")
    out = imported(csv, runs, "--name", "csv")
    assert out["steps"] == 3
    (note,) = out["notes"]
    assert "steps 0, 1 log a metric more than once" in note and "last row" in note
    assert [r.values["loss"] for r in read_back(runs, "csv")] == [1.5, 1.4, 1.3]
    assert [x["loss"] for x in metrics_lines(runs / "csv")] == [2.0, 1.5, 1.9, 1.4, 1.3]
    table = cli_here("import", str(csv), "--dir", str(runs), "--name", "csv-table").stdout
    assert "note: steps 0, 1 log a metric" in " ".join(table.split())
    # TensorBoard: a run restarted into its folder writes step 5 again, in a later file
    tb = tmp_path / "tb"
    write_events(tb / "events.out.tfevents.1.host",
                 [event(s, 1e9 + s, {"loss": 2.0 - s / 10}) for s in range(6)])
    write_events(tb / "events.out.tfevents.2.host",
                 [event(s, 2e9 + s, {"loss": 1.0 - s / 100}) for s in range(5, 8)])
    out = imported(tb, runs, "--name", "tb")
    assert out["steps"] == 8 and "step 5 logs a metric" in out["notes"][0]
    assert "last event" in out["notes"][0]
    assert read_back(runs, "tb")[5].values["loss"] == pytest.approx(0.95)
    # trainer_state.json and W&B history repeat steps likewise; the same value twice,
    # and train and eval entries of one step, hide nothing and say nothing
    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"log_history": [
        {"step": 1, "loss": 1.0, "epoch": 0.1}, {"step": 1, "eval_loss": 1.2, "epoch": 0.1},
        {"step": 2, "loss": 0.9}, {"step": 2, "loss": 0.9}, {"step": 3, "loss": 0.8},
        {"step": 3, "loss": 0.7}]}), encoding="utf-8")
    got = read_source(state)
    assert [n.split(":")[0] for n in got.notes] == ["step 3 logs a metric more than once with "
                                                    "different values"]
    wandb = tmp_path / "wandb-history.jsonl"
    wandb.write_text("".join(json.dumps({"_step": s, "_timestamp": 1.7e9 + i, "loss": 1.0 + i})
                             + "\n" for i, s in enumerate((0, 1, 1))), encoding="utf-8")
    assert "step 1 logs a metric" in read_source(wandb).notes[0]


def test_a_ts_column_gives_each_row_its_time_and_a_round_trip_keeps_it(tmp_path: Path) -> None:
    """`runs metrics -o csv` writes `step,ts,...`; imported back, its `ts` column was
    dropped without a word and the rows got made-up times one second apart."""
    runs = tmp_path / "runs"
    src = tmp_path / "first.csv"
    src.write_text("step,ts,loss\n0,1764580000.5,2.0\n10,1764580060.5,1.8\n"
                   "20,,1.7\n30,1764580300,1.6\n", encoding="utf-8")
    imported(src, runs, "--name", "first")
    assert [(r["step"], r["ts"]) for r in metrics_lines(runs / "first")] == [
        (0, 1764580000.5), (10, 1764580060.5), (20, 1764580060.5), (30, 1764580300.0)]
    # the round trip: export the imported run, import the export, same steps and times
    out = cli_here("runs", "metrics", "first", "--dir", str(runs), "-o", "csv").stdout
    again = tmp_path / "again.csv"
    again.write_text(out, encoding="utf-8")
    imported(again, runs, "--name", "again")
    assert [(r["step"], r["ts"], r["loss"]) for r in metrics_lines(runs / "again")] == [
        (r["step"], r["ts"], r["loss"]) for r in metrics_lines(runs / "first")]
    assert "ts" not in read_back(runs, "again")[0].values
    # an ISO 8601 time is read too (without a zone, as UTC)
    iso = tmp_path / "iso.csv"
    iso.write_text("step,ts,loss\n0,2025-12-01T09:46:40Z,2.0\n1,2025-12-01T09:46:41,1.9\n",
                   encoding="utf-8")
    imported(iso, runs, "--name", "iso")
    assert [r["ts"] for r in metrics_lines(runs / "iso")] == [1764582400.0, 1764582401.0]


@pytest.mark.parametrize("first,cell", [("1764580000", "12"), ("1764580000", "-5"),
                                        ("1764580000", "1764580000000"),
                                        ("2025-12-01", "yesterday")])
def test_a_ts_column_that_is_no_time_is_refused(tmp_path: Path, first: str, cell: str) -> None:
    # 12 seconds is 1970 (a timestep, not a time), 1764580000000 is milliseconds; a
    # column named ts that is no clock cannot become a metric either
    src = tmp_path / "t.csv"
    src.write_text(f"step,ts,loss\n0,{first},2.0\n1,{cell},1.9\n", encoding="utf-8")
    said = refused(src, tmp_path / "runs")
    assert f"line 3: column 'ts' holds '{cell}'" in said and "rename the column" in said


def test_tensorboard_tags_named_like_a_records_fields_are_left_out_and_said(
        tmp_path: Path) -> None:
    """A loop's add_scalar("step", ...) or ("ts", ...) overwrote the event's own step and
    wall time: the points landed at the tag's values, or at a time of 3 seconds."""
    tb = tmp_path / "tb"
    write_events(tb / "events.out.tfevents.1.host",
                 [event(s, 1.7e9 + s, {"loss": 2.0 - s / 10, "step": 100.0 + s, "ts": 3.0})
                  for s in range(5)])
    runs = tmp_path / "runs"
    out = imported(tb, runs, "--name", "tb")
    assert [(r["step"], r["ts"]) for r in metrics_lines(runs / "tb")] == [
        (s, 1.7e9 + s) for s in range(5)]
    assert [h.values for h in read_back(runs, "tb")] == [
        {"loss": pytest.approx(2.0 - s / 10)} for s in range(5)]
    assert sorted(out["notes"]) == [
        f"tag {tag!r} (5 points) is not imported: a record's own field has that name (each "
        "event's step and wall time are its record's)" for tag in ("step", "ts")]
