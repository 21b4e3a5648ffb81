"""What a new user's W&B scripts met under `import runwatch.compat.wandb as wandb`: a bad
`step`, an exit with a non-zero status, W&B's data types and calls runwatch does not
record, a script run twice, and a copied config. Real scripts in subprocesses, the runs
read back through the index."""

from __future__ import annotations

import copy
import pickle
import textwrap
from pathlib import Path

import pytest
import yaml

from runwatch.compat import wandb, wandb_ignored
from tests.compat.test_wandb import read, run_script


def script(tmp_path: Path, body: str, name: str = "train.py") -> Path:
    path = tmp_path / name
    path.write_text("import sys\nimport runwatch.compat.wandb as wandb\n"
                    + textwrap.dedent(body))
    return path


def metrics(tmp_path: Path, name: str) -> dict[int, dict[str, float]]:
    return {s["step"]: s["measured"] for s in read(tmp_path, "metrics", name)["steps"]}


def test_a_bad_step_is_refused_at_its_call_and_the_run_goes_on(tmp_path: Path) -> None:
    path = script(tmp_path, """
        wandb.init(name="steps")
        wandb.log({"a": 1})
        wandb.log({"pending": 5}, commit=False)
        for bad in (1.5, "5", -1, True):
            try:
                wandb.log({"x": 1}, step=bad)
            except ValueError as exc:
                print("REFUSED", exc)
        try:
            wandb.log({"": 1}, commit=False)
        except ValueError as exc:
            print("REFUSED", exc)
        wandb.log({"b": 2}, step=3)
        wandb.log({"c": 3})
        wandb.finish()
    """)
    proc = run_script(path, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    refused = [line for line in proc.stdout.splitlines() if line.startswith("REFUSED")]
    assert refused == [
        "REFUSED log(): step 1.5 is a float; steps are whole numbers (int, not bool) >= 0",
        "REFUSED log(): step '5' is a str; steps are whole numbers (int, not bool) >= 0",
        "REFUSED log(): step -1 is negative; steps are whole numbers >= 0",
        "REFUSED log(): step True is a bool; steps are whole numbers (int, not bool) >= 0",
        "REFUSED log(): a metric key is empty; name a metric with 1 to 256 characters, "
        "such as 'train/loss'"]
    assert read(tmp_path, "get", "steps")["run"]["status"] == "SUCCEEDED"
    # Nothing logged before or after is lost; the refused calls recorded nothing. The
    # row left open before them is committed by the larger step, as W&B does.
    assert metrics(tmp_path, "steps") == {0: {"a": 1.0}, 1: {"pending": 5.0},
                                          3: {"b": 2.0, "c": 3.0}}


@pytest.mark.parametrize(("status", "recorded", "code"), [
    ("3", "FAILED", "failed"), ("'bad config'", "FAILED", "failed"),
    ("0", "SUCCEEDED", None), ("None", "SUCCEEDED", None)])
def test_a_script_that_calls_sys_exit_without_finish_ends_as_its_status_says(
        tmp_path: Path, status: str, recorded: str, code: str | None) -> None:
    path = script(tmp_path, f"""
        wandb.init(name="exit")
        wandb.log({{"a": 1}}, commit=False)
        sys.exit({status})
    """)
    proc = run_script(path, tmp_path)
    assert proc.returncode == (0 if recorded == "SUCCEEDED" else (3 if status == "3" else 1))
    got = read(tmp_path, "get", "exit")["run"]
    assert (got["status"], got["reason_code"]) == (recorded, code)
    assert metrics(tmp_path, "exit") == {0: {"a": 1.0}}  # the open row was written


def test_a_sys_exit_another_thread_calls_does_not_fail_the_run(tmp_path: Path) -> None:
    path = script(tmp_path, """
        import threading
        wandb.init(name="thread-exit")
        worker = threading.Thread(target=sys.exit, args=(3,))
        worker.start()
        worker.join()
        wandb.log({"a": 1})
    """)
    proc = run_script(path, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read(tmp_path, "get", "thread-exit")["run"]["status"] == "SUCCEEDED"


def test_wandb_data_types_and_calls_runwatch_does_not_record_are_accepted(
        tmp_path: Path) -> None:
    path = script(tmp_path, """
        run = wandb.init(name="media", settings=wandb.Settings(start_method="thread"))
        wandb.define_metric("loss", summary="min")
        wandb.watch(object(), log="all")
        for step in range(3):
            wandb.log({"loss": 1 / (step + 1),
                       "img": wandb.Image([[0, 1]], caption="x", mode="L"),
                       "hist": wandb.Histogram(np_histogram=([1], [0, 1])),
                       "media": [wandb.Video("v.mp4"), wandb.Audio([0.0], sample_rate=8)],
                       "html": wandb.Html("<p>hi</p>")})
            wandb.save("*.pt")
            run.save("model.pt", policy="end")
        artifact = wandb.Artifact("model", type="model", metadata={"epochs": 3})
        artifact.add_file("model.pt")
        artifact.add_dir("checkpoints")
        with artifact.new_file("notes.txt", mode="w") as f:
            f.write("kept nowhere")
        print("LOGGED", run.log_artifact(artifact).wait().name)
        wandb.alert(title="done", text="loss fell", level=wandb.AlertLevel.WARN)
        print("RESTORED", wandb.restore("model.pt"))
        try:
            wandb.use_artifact("data:latest").download()
        except FileNotFoundError as exc:
            print("DOWNLOAD", exc)
        wandb.finish()
    """)
    proc = run_script(path, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "LOGGED model" in proc.stdout and "RESTORED None" in proc.stdout
    assert "DOWNLOAD artifact 'data:latest': runwatch keeps no W&B artifacts" in proc.stdout
    assert metrics(tmp_path, "media") == {0: {"loss": 1.0}, 1: {"loss": 0.5},
                                          2: {"loss": pytest.approx(1 / 3)}}
    # One warning a key for what is logged, one a call for what is called.
    for key in ("img", "hist", "media", "html"):
        assert proc.stderr.count(f"{key!r}: runwatch records numbers and Tables") == 1
    for call in ("watch", "save", "log_artifact", "alert", "restore", "use_artifact"):
        assert proc.stderr.count(f"runwatch does not support wandb.{call}()") == 1
    assert "define_metric" not in proc.stderr  # the step is the x axis anyway: no loss


def test_a_script_run_twice_records_a_second_run_beside_the_first(tmp_path: Path) -> None:
    path = script(tmp_path, """
        run = wandb.init(name="exp1")
        wandb.log({"loss": float(sys.argv[1])})
        print("RUN", run.name)
        wandb.finish()
    """)
    outputs = []
    for arg in ("1.0", "2.0", "3.0"):
        proc = run_script(path, tmp_path, arg)
        assert proc.returncode == 0, proc.stderr[-3000:]
        outputs.append(proc)
    assert [p.stdout.split()[1] for p in outputs] == ["exp1", "exp1-2", "exp1-3"]
    assert "holds a run already" not in outputs[0].stderr
    assert outputs[1].stderr.count("runs/exp1 holds a run already, so this run is "
                                   "runs/exp1-2") == 1
    for name, loss in (("exp1", 1.0), ("exp1-2", 2.0), ("exp1-3", 3.0)):
        assert read(tmp_path, "get", name)["run"]["status"] == "SUCCEEDED"
        assert metrics(tmp_path, name) == {0: {"loss": loss}}


def test_a_copied_or_pickled_config_holds_the_same_values(tmp_path: Path) -> None:
    config_yaml = tmp_path / "config.yaml"
    config = wandb.Config({"lr": 0.01, "layers": [64, 64]}, config_yaml)
    config.warmup = 3
    for twin in (copy.deepcopy(config), copy.copy(config),
                 pickle.loads(pickle.dumps(config))):
        assert twin.as_dict() == {"lr": 0.01, "layers": [64, 64], "warmup": 3}
        assert twin.lr == 0.01 and twin["warmup"] == 3
        twin.lr = 1.0  # a copy is the script's own: the run's config.yaml stays
    assert yaml.safe_load(config_yaml.read_text())["lr"] == 0.01
    assert config.lr == 0.01
    with pytest.raises(AttributeError):
        _ = config.missing


def test_each_data_type_has_its_w_and_b_name() -> None:
    # the name a skipped value's warning gives
    for name in ("Audio", "BoundingBoxes2D", "Classes", "Graph", "Histogram", "Html", "Image",
                 "ImageMask", "Molecule", "Object3D", "Plotly", "Settings", "Video"):
        assert getattr(wandb, name).__name__ == name
        assert isinstance(getattr(wandb, name)(1, x=2), wandb_ignored.DataType)


PLOTS = {"line": 'wandb.plot.line(table, "x", "y", title="loss")',
         "scatter": 'wandb.plot.scatter(table, "x", "y")',
         "bar": 'wandb.plot.bar(table, "x", "y")',
         "histogram": 'wandb.plot.histogram(table, "y")',
         "confusion": 'wandb.plot.confusion_matrix(y_true=[0, 1], preds=[0, 0], '
                      'class_names=["a", "b"])',
         "pr": "wandb.plot.pr_curve([0, 1], [[0.9, 0.1], [0.2, 0.8]])",
         "roc": "wandb.plot.roc_curve([0, 1], [[0.9, 0.1], [0.2, 0.8]], labels=['a', 'b'])",
         "series": 'wandb.plot.line_series(xs=[0, 1], ys=[[1, 2]], keys=["a"], title="s")'}


def test_wandb_plot_charts_are_skipped_and_the_rest_of_their_row_is_recorded(
        tmp_path: Path) -> None:
    charts = ",\n".join(f'            "{key}": {call}' for key, call in PLOTS.items())
    path = script(tmp_path, f"""
        wandb.init(name="charts")
        table = wandb.Table(columns=["x", "y"], data=[[0, 1.0], [1, 0.5]])
        for step in range(2):
            wandb.log({{"loss": 1 / (step + 1),
{charts}}})
        wandb.log({{"custom": wandb.plot_table("wandb/line/v0", table, {{"x": "x"}})}})
        wandb.finish()
    """)
    proc = run_script(path, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read(tmp_path, "get", "charts")["run"]["status"] == "SUCCEEDED"
    assert metrics(tmp_path, "charts") == {0: {"loss": 1.0}, 1: {"loss": 0.5}}
    # One warning a key, as for W&B's other data types: runwatch charts every metric itself.
    for key in (*PLOTS, "custom"):
        assert proc.stderr.count(f"{key!r}: runwatch records numbers and Tables; a "
                                 "CustomChart is not recorded") == 1, proc.stderr[-3000:]


def test_wandb_api_and_sweeps_say_what_to_use_instead_when_used(tmp_path: Path) -> None:
    path = script(tmp_path, """
        api_type = wandb.Api  # named (in a type hint, say) without a word
        wandb.init(name="api")
        for call in (lambda: wandb.Api(timeout=19),
                     lambda: wandb.sweep({"method": "grid"}, project="p"),
                     lambda: wandb.agent("sweep-id", function=print, count=1)):
            try:
                call()
            except wandb.Error as exc:
                print("REFUSED", exc)
        wandb.log({"a": 1})
        wandb.finish()
    """)
    proc = run_script(path, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    api, sweep, agent = [line for line in proc.stdout.splitlines()
                         if line.startswith("REFUSED")]
    assert "runwatch provides no wandb.Api()" in api
    for way in ("runwatch runs list", "runwatch runs metrics RUN -o json", "GET /api/runs",
                "docs/api.md"):
        assert way in api
    assert sweep == agent.replace("wandb.agent()", "wandb.sweep()")
    assert "runwatch provides no sweeps, so wandb.sweep() cannot run" in sweep
    assert "runwatch submit" in sweep and "group=" in sweep
    assert metrics(tmp_path, "api") == {0: {"a": 1.0}}  # the run went on
