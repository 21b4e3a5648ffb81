"""The `runwatch` command against real run folders: each command (runs list, get, metrics,
logs, index; the default folder from the working directory and RUNWATCH_DIR) runs as a
real subprocess; the other calls, which read what a command answers or refuses, run in
this process (`cli_here`: a subprocess costs 1-2 s of imports under load)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import runwatch
from tests.support import cli_here, run_cli


def make_runs(runs_dir: Path) -> None:
    with runwatch.init(project="p", name="sft-alpha", dir=runs_dir, method="sft",
                       base_model="tiny", dataset="addition", config={"lr": 0.1}) as run:
        for step in range(40):
            run.log({"loss": 2.0 - step * 0.01, "learning_rate": 0.1, "val/loss": math.nan},
                    step=step)
        run.log_text("hello", level="warning", data={"x": 1})
        run.log_text("quiet", level="debug")
    with runwatch.init(project="p", name="sft-beta", dir=runs_dir, method="sft") as run:
        run.log({"loss": 1.0}, step=0)


def test_list_get_metrics_logs(runs_dir: Path) -> None:
    make_runs(runs_dir)
    out = run_cli("runs", "list", "--dir", str(runs_dir)).stdout
    assert "sft-alpha" in out and "sft-beta" in out and "SUCCEEDED" in out
    listed = json.loads(cli_here("runs", "list", "--dir", str(runs_dir), "-o", "json").stdout)
    assert [r["name"] for r in listed] == ["sft-beta", "sft-alpha"], "newest first"
    get = run_cli("runs", "get", "sft-a", "--dir", str(runs_dir), "--settings").stdout
    assert "State" in get and "Results" in get and "Cost" in get and "lr: 0.1" in get
    detail = json.loads(cli_here("runs", "get", "sft-alpha", "--dir", str(runs_dir),
                                "-o", "json").stdout)
    assert detail["state"]["observed_step"] == 39
    assert detail["results"]["train_loss"] == 2.0 - 39 * 0.01
    assert "RUNNING" in detail["timing"]["phaseMillis"]
    m = json.loads(run_cli("runs", "metrics", "sft-alpha", "--dir", str(runs_dir), "-o", "json",
                           "--key", "loss", "--steps", "10:12").stdout)
    assert [(s["step"], s["measured"]["loss"]) for s in m["steps"]] == [
        (10, 1.9), (11, 1.89), (12, 1.88)]
    table = cli_here("runs", "metrics", "sft-alpha", "--dir", str(runs_dir), "--limit", "5").stdout
    assert "showing the last 5 of 40 steps" in table
    logs = json.loads(run_cli("runs", "logs", "sft-alpha", "--dir", str(runs_dir), "-o", "json",
                              "--level", "info").stdout)
    assert [entry["message"] for entry in logs] == ["hello"]


def test_jq_filters_json(runs_dir: Path) -> None:
    make_runs(runs_dir)
    out = cli_here("runs", "metrics", "sft-alpha", "--dir", str(runs_dir),
                  "--jq", "[.steps[].measured.loss] | length").stdout
    assert out.strip() == "40"
    name = cli_here("runs", "get", "sft-beta", "--dir", str(runs_dir), "--jq", ".name").stdout
    assert name.strip() == '"sft-beta"'
    bad = cli_here("runs", "list", "--dir", str(runs_dir), "--jq", ".[", check=False)
    assert bad.returncode == 2 and "does not compile" in bad.stderr


def test_ambiguous_and_unknown_runs_list_candidates(runs_dir: Path) -> None:
    make_runs(runs_dir)
    amb = cli_here("runs", "get", "sft", "--dir", str(runs_dir), check=False)
    assert amb.returncode == 2
    assert "matches 2 runs" in amb.stderr and "sft-alpha" in amb.stderr and "sft-beta" in amb.stderr
    unknown = cli_here("runs", "get", "nope", "--dir", str(runs_dir), check=False)
    assert unknown.returncode == 2 and "no run has the id or name 'nope'" in unknown.stderr
    assert "sft-alpha" in unknown.stderr


def test_default_dir_env_and_index_command(runs_dir: Path, tmp_path: Path) -> None:
    make_runs(runs_dir)
    first = run_cli("index", str(runs_dir)).stdout
    assert "indexed 2 runs (2 new)" in first
    assert "0 new rows" in cli_here("index", str(runs_dir)).stdout
    by_cwd = run_cli("runs", "list", cwd=tmp_path).stdout
    assert "sft-alpha" in by_cwd, "./runs is the default folder"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    by_env = run_cli("runs", "list", cwd=elsewhere, env={"RUNWATCH_DIR": str(runs_dir)}).stdout
    assert "sft-beta" in by_env


def test_bad_options_get_clear_errors(runs_dir: Path, tmp_path: Path) -> None:
    make_runs(runs_dir)
    steps = cli_here("runs", "metrics", "sft-alpha", "--dir", str(runs_dir), "--steps", "a:b",
                    check=False)
    assert steps.returncode == 2 and "--steps 'a:b' is not A:B" in steps.stderr
    backwards = cli_here("runs", "metrics", "sft-alpha", "--dir", str(runs_dir), "--steps",
                         "10:5", check=False)  # an empty table with exit 0 before
    assert backwards.returncode == 2 and "--steps '10:5' ends before it starts" in \
        backwards.stderr and "--steps 5:10" in backwards.stderr
    key = cli_here("runs", "metrics", "sft-alpha", "--dir", str(runs_dir), "--key", "nokey",
                  check=False)
    assert key.returncode == 2 and "run has no metric 'nokey'" in key.stderr
    missing = cli_here("runs", "list", "--dir", str(tmp_path / "absent"), check=False)
    assert missing.returncode == 2 and "is not a folder of runs" in missing.stderr


def test_a_folder_the_index_cannot_read_is_named_not_dropped_in_silence(tmp_path: Path) -> None:
    """The indexer says each problem once: `runs list`, the first command to meet a broken
    manifest, warns on stderr, and `runwatch index` names the folder at every pass."""
    runs = tmp_path / "runs"
    for name in ("good", "broken"):
        run = runwatch.init(name=name, dir=str(runs))
        run.log({"loss": 1.0})
        run.finish()
    (runs / "broken" / "manifest.json").write_text("{bad json", encoding="utf-8")
    listed = cli_here("runs", "list", "--dir", str(runs))
    assert "good" in listed.stdout and "broken" not in listed.stdout
    assert "broken/manifest.json is not readable JSON" in listed.stderr
    assert f"runwatch index {runs} names every folder" in " ".join(listed.stderr.split())
    for _ in range(2):  # the problem is not new the second time: it is named all the same
        indexed = run_cli("index", str(runs)).stdout
        assert "broken/manifest.json is not readable JSON" in indexed, indexed
    # asked for by name, the run is not found, and the answer says why
    got = cli_here("runs", "get", "broken", "--dir", str(runs), check=False)
    assert got.returncode == 2 and "no run has the id or name 'broken'" in got.stderr
    said = " ".join(got.stderr.split())
    assert f"the folder {runs / 'broken'} is not indexed:" in said and "not readable JSON" in said
    # a name that is only a parent folder of it, or another case of it, gets no such hint
    for other in (runs.name, "Broken", "manifest.json"):
        miss = cli_here("runs", "get", other, "--dir", str(runs), check=False)
        assert miss.returncode == 2 and "is not indexed" not in miss.stderr, other


def test_the_metrics_table_says_how_many_metrics_it_leaves_out(runs_dir: Path) -> None:
    with runwatch.init(name="custom", dir=runs_dir) as run:
        for step in range(3):
            run.log({"loss": 1.0, "my_custom": 2.0, "foo/bar": 3.0}, step=step)
    table = cli_here("runs", "metrics", "custom", "--dir", str(runs_dir)).stdout
    assert "my_custom" not in table  # the narrow table shows the metrics of known roles
    assert "2 more metrics not shown (-o wide shows every one, --key NAME one)" in \
        " ".join(table.split())
    wide = cli_here("runs", "metrics", "custom", "--dir", str(runs_dir), "-o", "wide").stdout
    assert "my_custom" in wide and "foo/bar" in wide and "not shown" not in wide
