"""`runwatch runs tensorboard`: a run recorded by the SDK, exported by the real CLI and read
back with TensorBoard's own event reader (EventAccumulator, its hparams metadata parser and
tensor_util), value by value; and the TensorBoard the command starts, read over its HTTP
API while the run trains."""

from __future__ import annotations

import json
import logging
import math
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.plugins.hparams import api_pb2
from tensorboard.plugins.hparams import metadata as hp_metadata
from tensorboard.util import tensor_util

import runwatch
from runwatch.rundir.format import METRICS
from tests.support import cli_here, first_line, http, run_cli, wait_for

CONFIG = {"learning_rate": 3e-4, "optim": {"beta1": 0.9, "name": "adamw"}, "bf16": True,
          "layers": [2, 4], "seed": 7}
FLAT_CONFIG = {"learning_rate": 3e-4, "optim.beta1": 0.9, "optim.name": "adamw",
               "bf16": True, "layers": "[2, 4]", "seed": 7.0}
# A key TensorBoard cannot hold as a tag, whose tag another key already is.
RENAMED = {"eval loss": "eval_loss_2"}
# Only stops a hung export from hanging the suite.
DEADLINE_S = 120


def _metrics(step: int) -> dict[str, float]:
    m = {"loss": 2.0 / (step + 1) + 1e-7 * step, "reward_mean": 0.1 * step - 0.05,
         "learning_rate": 3e-4 * min(1.0, step / 4), "eval loss": float("nan") if step == 3
         else 1.5 - 0.01 * step, "eval_loss": 1.25 + step}
    if step % 4 == 0:
        m["val/accuracy"] = step / 16
    return m


def _samples(step: int) -> list[dict[str, Any]]:
    return [{"prompt": [{"role": "user", "content": f"sort {step}{i}31"}],
             "completion": f"13{i}{step} ```done```", "reward": float(i) - 0.25,
             "reward_terms": {"correct": float(i), "overlong_penalty": -0.25 * (step % 2)}}
            for i in range(3)]


def _log(run: Any, steps: range) -> None:
    for step in steps:
        run.log(_metrics(step), step=step)
        if step % 3 == 0:
            run.log_samples(step, _samples(step))


def _load(out: Path) -> Any:
    acc = event_accumulator.EventAccumulator(str(out), size_guidance={"scalars": 0,
                                                                      "tensors": 0})
    acc.Reload()
    return acc


def _logged(runs_dir: Path, name: str) -> dict[str, list[tuple[int, float, float]]]:
    """(step, value, ts) of every point the index holds, by metric key, read by the CLI."""
    data = json.loads(cli_here("runs", "metrics", name, "--dir", str(runs_dir), "-o",
                               "json").stdout)
    out: dict[str, list[tuple[int, float, float]]] = {}
    for s in data["steps"]:
        for k, v in s["measured"].items():
            out.setdefault(k, []).append((s["step"], float("nan") if v is None else v, s["ts"]))
    return out


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _check_scalars(acc: Any, runs_dir: Path, name: str, steps: range) -> None:
    """Every point of every key, and every step's reward-term means, as TensorBoard reads
    them: the step and wall time exact, the value as the float32 TensorBoard keeps."""
    logged = _logged(runs_dir, name)
    tag = RENAMED
    expected_keys = {k for s in steps for k in _metrics(s)}
    assert set(logged) == expected_keys
    for key, points in logged.items():
        events = acc.Scalars(tag.get(key, key))
        assert [e.step for e in events] == [p[0] for p in points], key
        assert [e.wall_time for e in events] == [p[2] for p in points], key
        for e, (step, value, _) in zip(events, points, strict=True):
            assert value == pytest.approx(_metrics(step)[key], nan_ok=True)
            assert _same(e.value, float(np.float32(value))), (key, step, e.value, value)
    sample_steps = [s for s in steps if s % 3 == 0]
    for term in ("correct", "overlong_penalty"):
        events = acc.Scalars(f"rollouts/train/reward_terms/{term}")
        assert [e.step for e in events] == sample_steps
        for e in events:
            terms = [smp["reward_terms"][term] for smp in _samples(e.step)]
            assert e.value == np.float32(sum(terms) / len(terms)), (term, e.step)


def _check_hparams(acc: Any, status: int) -> None:
    content = acc.PluginTagToContent("hparams")
    exp = hp_metadata.parse_experiment_plugin_data(content[hp_metadata.EXPERIMENT_TAG])
    assert {h.name for h in exp.hparam_infos} == set(FLAT_CONFIG)
    assert {m.name.tag for m in exp.metric_infos} == set(acc.Tags()["scalars"])
    start = hp_metadata.parse_session_start_info_plugin_data(
        content[hp_metadata.SESSION_START_INFO_TAG])
    got = {k: (v.string_value if v.HasField("string_value") else v.bool_value
               if v.HasField("bool_value") else v.number_value)
           for k, v in start.hparams.items()}
    assert got == FLAT_CONFIG
    end = hp_metadata.parse_session_end_info_plugin_data(
        content[hp_metadata.SESSION_END_INFO_TAG])
    assert end.status == status


def _check_text(acc: Any, steps: range) -> None:
    events = acc.Tensors("rollouts/train/text_summary")
    assert [e.step for e in events] == [s for s in steps if s % 3 == 0]
    for e in events:
        text = tensor_util.make_ndarray(e.tensor_proto)[0].decode()
        for smp in _samples(e.step):
            assert f"user: {smp['prompt'][0]['content']}" in text
            assert f"````\n{smp['completion']}\n````" in text
            assert f"reward {smp['reward']}" in text


def test_export_matches_every_value_and_replaces_itself(runs_dir: Path) -> None:
    with runwatch.init(name="rl", dir=runs_dir, method="grpo", config=CONFIG) as run:
        _log(run, range(12))
    done = run_cli("runs", "tensorboard", "rl", "--dir", str(runs_dir), "--no-start")
    out = next((runs_dir / ".runwatch" / "tensorboard").iterdir())
    assert f"tensorboard --logdir {out}" in done.stdout
    # a second export replaces the first instead of adding a copy of every point (in this
    # process: the first ran as the real command line)
    cli_here("runs", "tensorboard", "rl", "--dir", str(runs_dir), "--no-start")
    assert len(list(out.glob("events.out.tfevents.*"))) == 1
    acc = _load(out)
    _check_scalars(acc, runs_dir, "rl", range(12))
    _check_hparams(acc, api_pb2.STATUS_SUCCESS)
    _check_text(acc, range(12))


def _live_run(runs_dir: Path, then: str) -> subprocess.Popen[str]:
    """A training process that logs steps 0-3 of run `live`, prints `started`, and runs
    the code `then` once a line comes on its stdin (it ends without finishing the run
    when `then` is empty)."""
    return subprocess.Popen([sys.executable, "-c", (
        "import sys, runwatch\n"
        "from tests.interop.test_tensorboard import CONFIG, _log\n"
        "run = runwatch.init(name='live', dir=sys.argv[1], config=CONFIG, flush_interval=0.05)\n"
        "_log(run, range(4))\n"
        "print('started', flush=True)\n"
        "sys.stdin.readline()\n" + then), str(runs_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        cwd=Path(__file__).parents[2])


def _follow(runs_dir: Path, out: Path, ctrl_c_as_it_says: str = "") -> subprocess.Popen[str]:
    """`runs tensorboard live --follow` as a user starts it. With `ctrl_c_as_it_says`, its
    process gets a real SIGINT in the flush of the first line that holds those words, once
    written, where a buffered flush runs the signal handlers (CPython's io does so after
    each write): as when the reader sends Ctrl-C the moment it reads the line."""
    args = ["runs", "tensorboard", "live", "--dir", str(runs_dir), "--out", str(out),
            "--no-start", "--follow", "--interval", "0.1"]
    if not ctrl_c_as_it_says:
        return subprocess.Popen([sys.executable, "-m", "runwatch", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.Popen([sys.executable, "-c", (
        "import signal, sys\n"
        "class Out:\n"
        "    def __init__(self, inner): self.inner, self.said = inner, ''\n"
        "    def write(self, s): self.said += s; return self.inner.write(s)\n"
        "    def flush(self):\n"
        "        self.inner.flush()\n"
        "        if sys.argv[1] in self.said:\n"
        "            sys.argv[1] = '\\0'\n"
        "            signal.raise_signal(signal.SIGINT)\n"
        "    def __getattr__(self, name): return getattr(self.inner, name)\n"
        "sys.stdout = Out(sys.stdout)\n"
        "from runwatch.cli.main import app\n"
        "app(sys.argv[2:], prog_name='runwatch')\n"), ctrl_c_as_it_says, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_follow_adds_points_logged_after_it_starts(runs_dir: Path, tmp_path: Path) -> None:
    child = _live_run(runs_dir, then="_log(run, range(4, 10))\nrun.finish()\n")
    out = tmp_path / "tb"
    assert child.stdin is not None
    follower = None
    try:
        assert first_line(child, what="the training process to start") == "started"
        follower = _follow(runs_dir, out)
        wrote = first_line(follower, what="the first export", deadline=DEADLINE_S)
        assert wrote.startswith("wrote ") and " of live to " in wrote
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.wait(timeout=DEADLINE_S) == 0
        rest, err = follower.communicate(timeout=DEADLINE_S)
        assert follower.returncode == 0, err
        assert "live ended SUCCEEDED" in rest
    finally:
        for p in (child, follower):
            if p is not None and p.poll() is None:
                p.kill()
    acc = _load(out)
    _check_scalars(acc, runs_dir, "live", range(10))
    _check_text(acc, range(10))
    _check_hparams(acc, api_pb2.STATUS_SUCCESS)


def test_non_finite_points_are_written_without_a_warning_each(runs_dir: Path) -> None:
    """A run's NaN and infinities are its values: they are written, read back as they were,
    and tensorboardX's "NaN or Inf found" is not said once per point (it was, 40 lines)."""
    values = [1.0, math.nan, math.inf, -math.inf, 2.0] * 8
    with runwatch.init(name="bad", dir=runs_dir, method="sft") as run:
        for step, value in enumerate(values):
            run.log({"loss": value}, step=step)
    done = run_cli("runs", "tensorboard", "bad", "--dir", str(runs_dir), "--no-start")
    assert "NaN or Inf" not in done.stderr and done.stderr.strip() == "", done.stderr
    events = _load(next((runs_dir / ".runwatch" / "tensorboard").iterdir())).Scalars("loss")
    assert [e.step for e in events] == list(range(len(values)))
    assert all(_same(e.value, v) for e, v in zip(events, values, strict=True))


def test_only_the_export_s_own_non_finite_warning_is_dropped(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The warning is dropped in the export's thread while it is open; tensorboardX's other
    messages, the same warning from another thread, and after the export, still show."""
    from tensorboardX import x2num

    from runwatch.interop.tensorboard import NONFINITE_LOGGER, Export

    said = logging.getLogger(NONFINITE_LOGGER)
    export = Export(tmp_path / "tb")
    try:
        with caplog.at_level(logging.WARNING, logger=NONFINITE_LOGGER):
            x2num.check_nan(np.array([math.nan]))
            assert caplog.messages == []
            said.warning("something else went wrong")
            other = threading.Thread(target=x2num.check_nan, args=(np.array([math.inf]),))
            other.start()
            other.join()
            assert caplog.messages == ["something else went wrong",
                                       "NaN or Inf found in input tensor."]
    finally:
        export.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=NONFINITE_LOGGER):
        x2num.check_nan(np.array([math.nan]))
    assert caplog.messages == ["NaN or Inf found in input tensor."]


def test_bad_input_is_refused_in_plain_words(runs_dir: Path, tmp_path: Path) -> None:
    """What the command refuses, and that it says why (run in this process: the refusals
    are what is tested, not the process)."""
    with runwatch.init(name="rl", dir=runs_dir, config=CONFIG) as run:
        _log(run, range(2))
    unknown = cli_here("runs", "tensorboard", "nope", "--dir", str(runs_dir), check=False)
    assert unknown.returncode == 2 and "nope" in unknown.stderr
    a_file = tmp_path / "file.txt"
    a_file.write_text("not a folder")
    refused = cli_here("runs", "tensorboard", "rl", "--dir", str(runs_dir), "--out",
                       str(a_file), check=False)
    assert refused.returncode == 2
    assert f"{a_file} is a file, not a folder" in " ".join(refused.stderr.split())
    assert a_file.read_text() == "not a folder"
    foreign = tmp_path / "theirs"
    foreign.mkdir()
    (foreign / "events.out.tfevents.1.host").write_bytes(b"")
    kept = cli_here("runs", "tensorboard", "rl", "--dir", str(runs_dir), "--out",
                    str(foreign), check=False)
    assert kept.returncode == 2 and "did not write" in kept.stderr
    assert (foreign / "events.out.tfevents.1.host").exists()


def _start(runs_dir: Path, name: str, out: Path) -> tuple[subprocess.Popen[str], str]:
    """`runs tensorboard NAME` as a user starts it (TensorBoard on any free port), and the
    address it prints once TensorBoard listens."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "runwatch", "runs", "tensorboard", name, "--dir", str(runs_dir),
         "--out", str(out), "--port", "0", "--interval", "0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert first_line(proc, what="the export", deadline=DEADLINE_S).startswith("wrote ")
    said = first_line(proc, what="TensorBoard's address", deadline=DEADLINE_S)
    assert said.startswith("TensorBoard: http://127.0.0.1:"), said
    return proc, said.split()[1]


def _served(url: str, tag: str) -> list[Any]:
    """TensorBoard's scalars of `tag` (empty until it has loaded them)."""
    try:
        got: list[Any] = http.get(f"{url}data/plugin/scalars/scalars",
                                  params={"run": ".", "tag": tag}, timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return []
    return got if isinstance(got, list) else []


def _ctrl_c(proc: subprocess.Popen[str], url: str) -> str:
    """Ctrl-C the command; its output after it. TensorBoard is stopped with it."""
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0, err
    with pytest.raises(httpx.HTTPError):
        http.get(url, timeout=5)
    return rest


def _end(proc: subprocess.Popen[str]) -> None:
    """End a command that started TensorBoard, after a failed check: Ctrl-C, so that it
    stops its TensorBoard too (SIGKILL would leave that serving), then SIGKILL."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _check_served(url: str, runs_dir: Path, name: str, steps: range) -> None:
    """The real `tensorboard` server (its data server included) shows every point of every
    key, the HParams experiment and the rollouts' text."""
    logged = _logged(runs_dir, name)
    tags = {RENAMED.get(k, k) for k in logged}
    tags |= {"rollouts/train/reward_terms/correct", "rollouts/train/reward_terms/overlong_penalty"}
    base = f"{url}data/plugin"

    def served_tags() -> bool:
        try:
            got = http.get(f"{base}/scalars/tags", timeout=5).json()
        except (httpx.HTTPError, ValueError):
            return False
        return set(got.get(".", {})) == tags

    wait_for(served_tags, what="TensorBoard to serve every scalar tag", deadline=DEADLINE_S,
             interval=0.2)
    for key, points in logged.items():
        want_steps = [(ts, step) for step, _, ts in points]

        def every_point(key: str = key, want_steps: list[Any] = want_steps) -> Any:
            # each tag is read again on TensorBoard's own reload: one can be a reload
            # behind another (CI once saw `eval loss` at 3 of 10 steps after `loss` had 10)
            got = _served(url, RENAMED.get(key, key))
            return got if [(w, s) for w, s, _ in got] == want_steps else None

        got = wait_for(every_point, what=f"TensorBoard to serve every point of {key}",
                       deadline=DEADLINE_S, interval=0.2)
        for (_, step, value), (_, want, _) in zip(got, points, strict=True):
            assert _same(float(value), float(np.float32(want))), (key, step)

    def experiment() -> dict[str, Any] | None:
        # the HParams plugin may answer with an empty experiment until it has read
        # the session summaries, a moment after the scalars
        got = http.post(f"{base}/hparams/experiment", json={"experimentName": ""},
                        timeout=10).json()
        return got if got.get("hparamInfos") else None

    exp = wait_for(experiment, what="TensorBoard's HParams plugin to read the export",
                   deadline=DEADLINE_S, interval=0.2)
    assert exp is not None
    assert {h["name"] for h in exp["hparamInfos"]} == set(FLAT_CONFIG)
    assert {m["name"]["tag"] for m in exp["metricInfos"]} == tags
    sample_steps = [s for s in steps if s % 3 == 0]

    def text_served() -> list[dict[str, Any]] | None:
        # the last step's text may come in a reload after its scalars (TensorBoard reloads
        # its folder every second while the export writes): wait for it as for the rest
        got = http.get(f"{base}/text/text", params={
            "run": ".", "tag": "rollouts/train/text_summary"}, timeout=10).json()
        return got if [t["step"] for t in got] == sample_steps else None

    text = wait_for(text_served, what="TensorBoard to serve the text of every sampled step",
                    deadline=DEADLINE_S, interval=0.2)
    assert text is not None
    assert f"user: sort {sample_steps[-1]}231" in text[-1]["text"]


def test_the_tensorboard_it_starts_follows_a_training_run_and_serves_it_all(
        runs_dir: Path, tmp_path: Path) -> None:
    """Started on a run that trains, TensorBoard shows the steps logged after it started,
    and keeps serving once the run has ended, every point, the HParams experiment and the
    rollouts' text, until Ctrl-C. (One TensorBoard for both: starting one is most of this
    test's time. A run already finished when it starts takes the same path, less the
    following: tests/interop/test_tensorboard_parent.py starts it so.)"""
    child = _live_run(runs_dir, then="_log(run, range(4, 10))\nrun.finish()\n")
    assert child.stdin is not None
    board = None
    try:
        assert first_line(child, what="the training process to start") == "started"
        metrics = runs_dir / "live" / METRICS
        wait_for(lambda: metrics.exists() and len(metrics.read_text().splitlines()) == 4,
                 what="the four steps on disk")
        board, url = _start(runs_dir, "live", tmp_path / "tb")
        wait_for(lambda: len(_served(url, "loss")) == 4, what="TensorBoard to show 4 steps",
                 deadline=DEADLINE_S, interval=0.2)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.wait(timeout=DEADLINE_S) == 0
        said = ""
        while not said.startswith(("live ended", "live's training process is gone")):
            said = first_line(board, what="the command to see the run end",
                              deadline=DEADLINE_S)
        # CI once saw it call the run gone: the index it read lacked the end the run
        # wrote just before its process died (cli Context.current_run)
        assert said.startswith("live ended SUCCEEDED"), said
        # the TensorBoard it starts reloads its folder every second
        wait_for(lambda: [s for _, s, _ in _served(url, "loss")] == list(range(10)),
                 what="TensorBoard to show the 10 steps", deadline=DEADLINE_S, interval=0.2)
        _check_served(url, runs_dir, "live", range(10))
        assert "stopped TensorBoard" in _ctrl_c(board, url)
    finally:
        if child.poll() is None:
            child.kill()
        if board is not None:
            _end(board)
    _check_hparams(_load(tmp_path / "tb"), api_pb2.STATUS_SUCCESS)


@pytest.mark.parametrize("when", ["while it waits", "as it says it follows"])
def test_ctrl_c_stops_following_and_leaves_readable_files(runs_dir: Path, tmp_path: Path,
                                                          when: str) -> None:
    """Ctrl-C ends following with exit status 0, whether it comes while the command waits
    for the run or in the flush of the line that says it follows (CI once saw exit 130
    there: the signal came in before the command caught it)."""
    child = _live_run(runs_dir, then="")
    out = tmp_path / "tb"
    follower = None
    try:
        assert first_line(child, what="the training process to start") == "started"
        metrics = runs_dir / "live" / METRICS
        wait_for(lambda: metrics.exists() and len(metrics.read_text().splitlines()) == 4,
                 what="the four steps on disk")
        follower = _follow(runs_dir, out,
                           "" if when == "while it waits" else "following live until")
        assert first_line(follower, what="the first export", deadline=DEADLINE_S
                          ).startswith("wrote 21 points")
        assert first_line(follower, what="the view command").startswith("view them:")
        assert first_line(follower, what="following").startswith("following live")
        if when == "while it waits":
            follower.send_signal(signal.SIGINT)
        # what it says is short, so no pipe fills; read through the file objects, which
        # may hold lines read with the one above (communicate() would skip them)
        follower.wait(timeout=DEADLINE_S)
        assert follower.stdout is not None and follower.stderr is not None
        rest, err = follower.stdout.read(), follower.stderr.read()
        assert follower.returncode == 0, err
        assert "stopped following" in rest
    finally:
        for p in (child, follower):
            if p is not None and p.poll() is None:
                p.kill()
    acc = _load(out)
    assert [e.step for e in acc.Scalars("loss")] == [0, 1, 2, 3]
    assert hp_metadata.SESSION_END_INFO_TAG not in acc.PluginTagToContent("hparams")
