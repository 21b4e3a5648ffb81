"""`runwatch runs compare RUN BASELINE` and GET /api/compare, on runs the SDK writes: the
window means of the loss difference, the gradient-norm spikes, the first full window
over the margin (never a short last one), the refusal of runs whose plans differ, the
division of the same sequences per update, and the API's report being the CLI's."""

from __future__ import annotations

import inspect
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

import runwatch
from runwatch.analysis import compare as cmp
from runwatch.cli.compare_cmd import compare_cmd
from runwatch.cli.main import app
from runwatch.server.runner import Runner
from tests.foundation.test_cli_startup import imported_by
from tests.support import run_cli, sdk_run, wait_for

REPO = Path(__file__).resolve().parents[2]
PLAN = {"seed": 7, "batch_size": 64, "learning_rate": 1e-3, "runs_dir": "runs"}
STEPS = 125  # 12 full windows of 10 and a last one of 5


def base_loss(i: int) -> float:
    return 2.0 / (1 + i / 20)


def losses(offset: Callable[[int], float], spike_at: int | None = None
           ) -> Callable[[int], dict[str, float]]:
    return lambda i: {"loss": base_loss(i) + offset(i),
                      "grad_norm": 40.0 if i == spike_at else 1.0 + (i % 3) / 10}


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, ["runs", "compare", *args], env={"COLUMNS": "80"})


def report(runs: Path, *args: str) -> dict[str, Any]:
    res = cli(*args, "--dir", str(runs), "-o", "json")
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.stdout)
    return out


@pytest.fixture
def pair(runs_dir: Path) -> Path:
    """A baseline and a run of one plan whose loss is 0.05 higher from step 60 on, with a
    gradient spike at step 33 in the run."""
    sdk_run(runs_dir, "baseline", steps=STEPS, metrics=losses(lambda i: 0.0),
            config={**PLAN, "runs_dir": "elsewhere"})
    sdk_run(runs_dir, "candidate", steps=STEPS,
            metrics=losses(lambda i: 0.05 if i >= 60 else 0.001, spike_at=33), config=PLAN)
    return runs_dir


def test_windows_spikes_and_the_reported_window(pair: Path) -> None:
    r = report(pair, "candidate", "baseline")
    windows = r["windows"]
    assert isinstance(windows, list) and len(windows) == 13
    assert [w["steps"] for w in windows] == [10] * 12 + [5]
    assert [w["full"] for w in windows] == [True] * 12 + [False]
    assert windows[0]["mean_diff"] == pytest.approx(0.001)
    assert windows[6]["mean_diff"] == pytest.approx(0.05)
    assert windows[3]["spikes"] == 1 and sum(w["spikes"] for w in windows) == 1
    assert r["reported"] == {**windows[6], "index": 6, "direction": "higher"}
    assert r["spikes"] == [{"step": 33, "run": 40.0, "baseline": 1.0, "spiked": ["run"]}]
    assert r["compared_steps"] == STEPS and r["plan"] == {
        "same": True, "differences": [], "divided_differently": False}, "runs_dir is no plan"
    lower = report(pair, "baseline", "candidate", "--window", "20", "--margin", "0.04")
    assert lower["reported"]["first_step"] == 60 and lower["reported"]["direction"] == "lower"
    assert report(pair, "candidate", "baseline", "--spike-factor", "50")["spikes"] == []


def test_table_reads_at_80_columns(pair: Path) -> None:
    res = cli("candidate", "baseline", "--dir", str(pair))
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert max(len(line) for line in out.splitlines()) <= 80, out
    assert "same plan" in out and "60–69" in out and "← reported" in out
    assert "step 33: run 40, baseline 1 (no spike)" in out
    assert " ".join(out.split()).count("reported: steps 60–69") == 1


def test_a_short_last_window_is_shown_but_never_reported(runs_dir: Path) -> None:
    sdk_run(runs_dir, "baseline", steps=STEPS, metrics=losses(lambda i: 0.0), config=PLAN)
    sdk_run(runs_dir, "late", steps=STEPS, metrics=losses(lambda i: 0.5 if i >= 120 else 0.0),
            config=PLAN)
    r = report(runs_dir, "late", "baseline")
    assert r["windows"][-1]["mean_diff"] == pytest.approx(0.5)
    assert r["windows"][-1]["steps"] == 5 and r["reported"] is None
    out = cli("late", "baseline", "--dir", str(runs_dir)).stdout
    assert "the last window, 5 of 10 steps, is not full" in " ".join(out.split())


def test_runs_whose_plans_differ_are_refused_with_the_differences(runs_dir: Path) -> None:
    sdk_run(runs_dir, "baseline", steps=30, metrics=losses(lambda i: 0.0), config=PLAN)
    sdk_run(runs_dir, "other", steps=30, metrics=losses(lambda i: 0.0), dataset="other-data",
            config={**PLAN, "seed": 8, "batch_size": 32, "optimizer": {"name": "sgd"}})
    res = cli("other", "baseline", "--dir", str(runs_dir))
    assert res.exit_code == 2 and res.stdout == ""
    err = " ".join(res.stderr.split())
    for said in ("follow different plans", "dataset: other-data (run) vs arith (baseline)",
                 "seed: 8 (run) vs 7 (baseline)", "sequences_per_update: 32 (run) vs 64",
                 "config.optimizer.name: sgd (run) vs (not set) (baseline)",
                 "--across-plans compares them anyway"):
        assert said in err, res.stderr
    r = report(runs_dir, "other", "baseline", "--across-plans")
    fields = [d["field"] for d in r["plan"]["differences"]]
    assert fields == ["dataset", "seed", "sequences_per_update", "config.optimizer.name"]
    assert r["compared_steps"] == 30


def test_the_same_sequences_divided_differently_are_compared(runs_dir: Path) -> None:
    sdk_run(runs_dir, "baseline", steps=30, metrics=losses(lambda i: 0.0), config=PLAN)
    split = {k: v for k, v in PLAN.items() if k != "batch_size"} | {
        "devices": 2, "micro_batch_size": 8, "gradient_accumulation_steps": 4}
    sdk_run(runs_dir, "split", steps=30, metrics=losses(lambda i: 0.0), config=split)
    r = report(runs_dir, "split", "baseline")
    assert r["plan"]["same"] and r["plan"]["divided_differently"]
    assert r["run"]["division"] == {"devices": 2, "sequences_per_pass": 8, "accumulation": 4,
                                    "sequences_per_update": 64}
    assert r["baseline"]["division"] == {"devices": 1, "sequences_per_pass": 64,
                                         "accumulation": 1, "sequences_per_update": 64}
    out = " ".join(cli("split", "baseline", "--dir", str(runs_dir)).stdout.split())
    assert "the same sequences per update divided differently" in out
    assert ("run: 2 device(s) × 8 sequence(s) a pass × 4 pass(es) accumulated = 64 "
            "sequences per update") in out


def test_reinforcement_runs_are_refused(runs_dir: Path) -> None:
    sdk_run(runs_dir, "baseline", steps=10, metrics=losses(lambda i: 0.0), config=PLAN)
    sdk_run(runs_dir, "rl", steps=10, metrics=lambda i: {"reward_mean": 0.5}, method="grpo",
            config=PLAN)
    proc = run_cli("runs", "compare", "rl", "baseline", "--dir", str(runs_dir), check=False)
    assert proc.returncode == 2
    assert "run rl is a reinforcement run (grpo)" in proc.stderr
    assert "compare supervised runs" in proc.stderr


def test_the_api_serves_the_cli_report(pair: Path, runs_dir: Path, server: Runner) -> None:
    def indexed(run: str, steps: int) -> bool:
        got = httpx.get(f"{server.url}/api/runs/{run}/metrics/keys", timeout=30)
        return got.status_code == 200 and {"key": "loss", "count": steps}.items() <= next(
            (k for k in got.json()["keys"] if k["key"] == "loss"), {}).items()

    wait_for(lambda: indexed("candidate", STEPS) and indexed("baseline", STEPS),
             what="the server indexes both runs")
    cli_json = report(pair, "candidate", "baseline", "--window", "20")
    resp = httpx.get(f"{server.url}/api/compare", params={
        "run": "candidate", "baseline": "baseline", "window": 20}, timeout=30)
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"ok": True, **cli_json}
    sdk_run(runs_dir, "other", steps=10, metrics=losses(lambda i: 0.0),
            config={**PLAN, "seed": 1})
    wait_for(lambda: indexed("other", 10), what="the server indexes the third run")
    refused = httpx.get(f"{server.url}/api/compare",
                        params={"run": "other", "baseline": "baseline"}, timeout=30)
    assert refused.status_code == 409
    body = refused.json()
    assert body["ok"] is False and body["status"] == 409
    assert "across_plans=true compares them anyway" in body["error"]
    assert body["differences"] == [{"field": "seed", "run": 1, "baseline": 7}]
    across = httpx.get(f"{server.url}/api/compare", params={
        "run": "other", "baseline": "baseline", "across_plans": "true"}, timeout=30)
    assert across.status_code == 200 and across.json()["plan"]["same"] is False
    bad = httpx.get(f"{server.url}/api/compare", params={
        "run": "other", "baseline": "baseline", "window": 0}, timeout=30)
    assert bad.status_code == 400 and bad.json()["ok"] is False


def test_a_compare_reads_what_was_logged_since_the_last(pair: Path) -> None:
    """A compare skips the indexer only while the folder holds nothing new, and reads a
    saved series only while the index holds its points."""
    assert report(pair, "candidate", "baseline")["compared_steps"] == STEPS
    for name in ("candidate", "baseline"):
        lines = (pair / name / "metrics.jsonl").read_text().splitlines()
        last = json.loads(lines[-1])
        with open(pair / name / "metrics.jsonl", "a", encoding="utf-8") as f:
            f.writelines(json.dumps({**last, "seq": last["seq"] + 1 + i,
                                     "step": STEPS + i, "loss": 0.5}) + "\n"
                         for i in range(10))
    r = report(pair, "candidate", "baseline")
    assert r["compared_steps"] == STEPS + 10 and r["last_step"] == STEPS + 9


def test_a_compare_of_an_unchanged_folder_loads_no_sqlalchemy(pair: Path) -> None:
    """Nothing new in the folder: no indexer and no SQLAlchemy (0.45 s of the command's
    start); something new: the indexer runs first."""
    assert report(pair, "candidate", "baseline")["compared_steps"] == STEPS  # indexes
    args = ("runs", "compare", "candidate", "baseline", "--dir", str(pair), "-o", "json")
    assert "sqlalchemy" not in imported_by(*args)
    sdk_run(pair, "third", steps=3)
    assert "sqlalchemy" in imported_by(*args)
    assert "sqlalchemy" not in imported_by(*args)


def analysed(db_url: str, window: int = cmp.DEFAULT_WINDOW) -> dict[str, Any]:
    """The analysis (as JSON reads it back) of the candidate and baseline runs in the
    index at `db_url`, their series read by the SQLAlchemy readers."""
    from runwatch.store import queries as q
    from runwatch.store.db import open_engine
    from runwatch.store.jobs import job_row
    from runwatch.store.keys import run_keys
    from runwatch.store.series import read_series

    engine = open_engine(db_url)
    with engine.connect() as conn:

        def series_of(key: Any) -> tuple[Any, Any]:
            s = read_series(conn, key.id)
            return s.step, s.value

        sides = []
        for name in ("candidate", "baseline"):
            row = q.resolve_run(conn, name)
            job = job_row(conn, row.pk)
            sides.append(cmp.side_of(row, run_keys(conn, row.pk),
                                     job["devices"] if job else None, series_of))
    engine.dispose()
    out: dict[str, Any] = json.loads(json.dumps(
        cmp.compare(sides[0], sides[1], cmp.Options(window=window))))
    return out


def test_the_report_is_the_analysis_of_the_index(pair: Path, db_url: str) -> None:
    """The command's report, from the folder's own index and from a --db index of either
    store, is the analysis of the series the SQLAlchemy readers give."""
    from runwatch.ingest.indexer import Indexer
    from runwatch.store.db import open_engine

    engine = open_engine(db_url)
    Indexer(engine, pair).index_once()
    engine.dispose()
    expected = analysed(db_url, window=7)
    assert report(pair, "candidate", "baseline", "--window", "7") == expected
    assert report(pair, "candidate", "baseline", "--window", "7", "--db", db_url) == expected


def test_the_server_and_the_command_line_share_one_set_of_saved_series(
        pair: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GET /api/compare reads and saves the compared series where `runs compare` does,
    checked against the index the same way: a fresh server's first compare reads the
    files a command saved (and the reverse), and an index removed and made again (runs
    and keys numbered from 1 again, the same counts, other values) never shows the removed
    runs' series for the new ones, on a new server or the command line."""
    from runwatch.ingest.indexer import Indexer
    from runwatch.store.db import database_url, open_engine

    monkeypatch.setattr("runwatch.store.plain_series.SAVE_MIN_POINTS", 1)  # 125 points
    index = pair / ".runwatch" / "index.db"
    saved = index.parent / "index.compare"

    def files() -> dict[str, tuple[int, int]]:
        return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in saved.iterdir()}

    def api() -> dict[str, Any]:
        with Runner(open_engine(index), port=0, prewarm=False) as srv:  # binds a free one
            resp = httpx.get(f"{srv.url}/api/compare", timeout=30,
                             params={"run": "candidate", "baseline": "baseline"})
        assert resp.status_code == 200, resp.text
        body: dict[str, Any] = resp.json()
        assert body.pop("ok") is True
        return body

    first = report(pair, "candidate", "baseline")  # indexes the folder, saves 4 series
    made_by_cli = files()
    assert len(made_by_cli) == 4
    assert api() == first and files() == made_by_cli, "the server read the command's files"
    shutil.rmtree(saved)
    assert api() == first
    assert sorted(files()) == sorted(made_by_cli), "the server saved where the command does"
    made_by_server = files()
    assert report(pair, "candidate", "baseline") == first
    assert files() == made_by_server, "the command read the server's files"

    for item in pair.iterdir():  # a new index of new runs, the saved series kept
        if item.name != ".runwatch":
            shutil.rmtree(item)
    for item in index.parent.iterdir():
        if item != saved:
            item.unlink()
    sdk_run(pair, "baseline", steps=STEPS, metrics=losses(lambda i: 0.2),
            config={**PLAN, "runs_dir": "elsewhere"})
    sdk_run(pair, "candidate", steps=STEPS, metrics=losses(lambda i: 0.3, spike_at=90),
            config=PLAN)
    engine = open_engine(index)
    Indexer(engine, pair).index_once()
    engine.dispose()
    again = analysed(database_url(index))
    assert again != first and again["spikes"][0]["step"] == 90
    assert api() == again
    assert report(pair, "candidate", "baseline") == again


def test_the_cli_defaults_are_the_analysis_defaults() -> None:
    params = inspect.signature(compare_cmd).parameters
    assert params["window"].default == cmp.DEFAULT_WINDOW
    assert params["margin"].default == cmp.DEFAULT_MARGIN
    assert params["spike_factor"].default == cmp.DEFAULT_SPIKE_FACTOR


def test_bench_compare_runs(tmp_path: Path) -> None:
    """bench/bench_compare.py still runs against the code it measures (tiny sizes)."""
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "bench_compare.py"), "--steps",
                           "2000", "--repeat", "1", "--target", "1000",
                           "--out", str(tmp_path / "c.json")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert json.loads((tmp_path / "c.json").read_text())["steps"] == 2000


def _side(config: object, base_model: str = "m", job_devices: int | None = None) -> cmp.Side:
    return cmp.Side("id", "r", "sft", base_model, "d", config, job_devices, None)


def test_what_counts_as_the_plan() -> None:
    same = cmp.plan_differences(
        _side({"name": "a", "project": "x", "wandb": {"wandb_run_name": "a"}, "seed": 1}),
        _side({"name": "b", "project": "y", "wandb": {"wandb_run_name": "b"}, "seed": 1}))
    assert same == [], "names, projects and where a run logs are no plan"
    nested = cmp.plan_differences(_side({"optimizer": {"name": "adamw"}}),
                                  _side({"optimizer": {"name": "sgd"}}))
    assert nested == [{"field": "config.optimizer.name", "run": "adamw", "baseline": "sgd"}]
    revision = cmp.plan_differences(_side({"model_revision": "abc"}, "llama"),
                                    _side({"model_revision": "def"}, "qwen"))
    assert [d["field"] for d in revision] == ["base_model", "base_model_revision"]
    # a job's devices count; with no total stated, a different division may be other rows
    unknown = cmp.plan_differences(_side({"gradient_accumulation_steps": 2}, job_devices=2),
                                   _side({"gradient_accumulation_steps": 4}))
    assert {d["field"] for d in unknown} == {"devices", "accumulation"}
    stated = cmp.plan_differences(_side({"batch_size": 64, "grad_accum": 2}, job_devices=2),
                                  _side({"batch_size": 64, "grad_accum": 4}))
    assert stated == [], "the same 64 sequences per update, divided differently"


def test_an_unstated_accumulation_is_what_makes_the_parts_the_total() -> None:
    """A global batch of 8 in micro batches of 2 on one device read as accumulation 1, a
    division that multiplies to 2, not 8 (found in a trial)."""
    side = _side({"global_batch_size": 8, "micro_batch_size": 2})
    assert cmp.division(side) == {"devices": 1, "sequences_per_pass": 2, "accumulation": 4,
                                  "sequences_per_update": 8}
    on_two = _side({"global_batch_size": 8, "micro_batch_size": 2}, job_devices=2)
    assert cmp.division(on_two)["accumulation"] == 2
    # parts that do not divide the total: accumulation stays unstated's 1, as stated
    odd = _side({"global_batch_size": 9, "micro_batch_size": 2})
    assert cmp.division(odd) == {"devices": 1, "sequences_per_pass": 2, "accumulation": 1,
                                 "sequences_per_update": 9}


def test_a_run_compared_with_itself_is_refused(runs_dir: Path) -> None:
    sdk_run(runs_dir, "alone", steps=20, metrics=losses(lambda i: 0.0), config=PLAN)
    res = cli("alone", "alone", "--dir", str(runs_dir))
    assert res.exit_code == 2 and res.stdout == ""
    assert "run alone is its own baseline, so nothing differs: compare it with another " \
        "run" in " ".join(res.stderr.split())


@pytest.mark.parametrize(("other", "words"), [
    (lambda i: {"loss": float("nan"), "grad_norm": 1.0},
     "share no step where both logged a finite training loss (all 20 steps both logged "
     "hold a NaN or infinite loss)"),
    (None, "(baseline logged it at steps 0-19, offset logged it at steps 1000-1019)"),
], ids=["all-nan", "no-common-step"])
def test_runs_with_no_finite_loss_at_a_shared_step_are_refused(
        runs_dir: Path, other: Callable[[int], dict[str, float]] | None, words: str) -> None:
    """It said "0 steps compared … no full window differs" and exited 0, which reads as
    "no difference" to a script or a skim (found in a trial)."""
    sdk_run(runs_dir, "baseline", steps=20, metrics=losses(lambda i: 0.0), config=PLAN)
    if other is None:
        run = runwatch.init(name="offset", dir=runs_dir, method="sft", base_model="tiny-gpt",
                            dataset="arith", config=PLAN)
        for i in range(1000, 1020):
            run.log(losses(lambda i: 0.0)(i), step=i)
        run.finish()
        name = "offset"
    else:
        sdk_run(runs_dir, "all-nan", steps=20, metrics=other, config=PLAN)
        name = "all-nan"
    res = cli("baseline", name, "--dir", str(runs_dir))
    assert res.exit_code == 2 and res.stdout == "", res.output
    assert words in " ".join(res.stderr.split()), res.stderr
