"""Job control end to end, as a user meets it: `runwatch ui` (the server with its embedded
worker) as a real process, jobs submitted through the queue, and what the API and the
run folder say at each step.

- A real SFT recipe on the tiny model: QUEUED in the index at once, then PREPARING
  (tokenize progress with done/total), RUNNING and SUCCEEDED, its metrics indexed.
- Retry after a failure: attempt 2 is recorded, attempt 1's files are kept under
  attempts/1/, the view shows attempt 2's metrics only, and attempt 1's device time stays
  in the run's cost.
- `runwatch demo` (on a smaller model and data set): its three recipes go through the
  queue, and the web app's API shows GRPO running while DPO is queued.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runwatch.cli import demo
from runwatch.jobs.failures import CATALOGUE
from runwatch.jobs.spec import recipe_spec
from runwatch.jobs.submit import submit
from runwatch.rundir import format as fmt
from runwatch.server.runner import free_port
from runwatch.store import open_engine
from tests.support import TINY_MODEL, wait_for
from tests.support.jobs import events, run_row
from tests.support.workers import kill_jobs, phases

SCRIPTS = Path(__file__).resolve().parent / "scripts"
# A recipe's or a script's whole life on a loaded two-core machine (torch import included).
END_DEADLINE_S = 180.0
SFT = [*TINY_MODEL, "batch_size=8", "n_train=64", "n_val=8", "max_steps=6", "val_interval=3",
       "export_samples=false", "wandb_project=None"]


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    return folder


class Ui:
    """A `runwatch ui` process over a runs folder (its output in ui.log beside the
    folder), and an HTTP client of its API."""

    def __init__(self, runs: Path) -> None:
        self.runs = runs
        port = free_port()
        with open(runs.parent / "ui.log", "a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "runwatch", "ui", str(runs), "--port", str(port)],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.api = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
        wait_for(self._answers, what="runwatch ui to answer", interval=0.1)

    def _answers(self) -> bool:
        try:
            return self.api.get("/api/server").status_code == 200
        except httpx.TransportError:
            if self.proc.poll() is not None:
                pytest.fail(f"runwatch ui exited ({self.proc.returncode}); its output is in "
                            f"{self.runs.parent / 'ui.log'}")
            return False

    def get(self, path: str) -> Any:
        res = self.api.get(path)
        assert res.status_code == 200, res.text
        return res.json()

    def post(self, path: str, body: dict[str, Any], status: int = 200) -> Any:
        res = self.api.post(path, json=body)
        assert res.status_code == status, res.text
        return res.json()

    def ended(self, name: str) -> dict[str, Any]:
        """The run detail once the run has ended."""
        detail = wait_for(lambda: (d := self.get(f"/api/runs/{name}"))["run"]["status"]
                          in fmt.TERMINAL_PHASES and d, what=f"run {name} to end",
                          deadline=END_DEADLINE_S, interval=0.2)
        assert detail  # wait_for returns only what is truthy: the detail, never False
        return detail

    def close(self) -> None:
        self.api.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        kill_jobs(self.runs)


@pytest.fixture
def ui(runs: Path) -> Iterator[Ui]:
    server = Ui(runs)
    try:
        yield server
    finally:
        server.close()


def test_a_recipe_goes_from_queued_to_succeeded_through_the_queue(
        runs: Path, tmp_path: Path) -> None:
    engine = open_engine(runs / ".runwatch" / "index.db")
    spec = recipe_spec("sft", [*SFT, f"cache_dir={tmp_path / 'cache'}"], cwd=tmp_path)
    made = submit(engine, runs, spec, "sft-e2e")
    assert run_row(engine, "sft-e2e").status == "QUEUED", "QUEUED in the index at once"
    engine.dispose()
    server = Ui(runs)  # its embedded worker picks the job up
    try:
        detail = server.ended("sft-e2e")
        workers = server.get("/api/workers")["workers"]
        keys = {k["key"]: k for k in server.get("/api/runs/sft-e2e/metrics/keys")["keys"]}
    finally:
        server.close()
    assert detail["run"]["status"] == "SUCCEEDED", detail["run"]
    evs = events(made.dir)
    assert phases(made.dir) == ["QUEUED", "PREPARING", "RUNNING", "SUCCEEDED"]
    assert evs[0]["attempt"] == 1
    start = next(e for e in evs if e["phase"] == "PREPARING")
    assert start["attempt"] == 1 and start["worker"] == workers[0]["id"]
    tokenize = [(e["done"], e["total"]) for e in evs
                if e["phase"] == "PREPARING" and e.get("stage") == "tokenizing"]
    assert tokenize[0] == (0, 64) and tokenize[-1] == (64, 64), tokenize
    assert [d for d, _ in tokenize] == sorted(d for d, _ in tokenize)
    assert (keys["loss"]["count"], keys["loss"]["last_step"]) == (6, 6), keys["loss"]
    assert detail["cost"]["device_seconds"] > 0
    assert {"QUEUED", "PREPARING", "RUNNING"} <= set(detail["timing"]["phaseMillis"])


def held_seconds(run_dir: Path) -> dict[int, float]:
    """Each attempt's time from its PREPARING event to its terminal event, from the
    run's events.jsonl: the time it held its device."""
    held: dict[int, float] = {}
    attempt, start = 0, None
    for e in events(run_dir):
        if e["phase"] == "PREPARING" and "attempt" in e:
            attempt, start = e["attempt"], e["ts"]
        elif e["phase"] in fmt.TERMINAL_PHASES and start is not None:
            held[attempt] = e["ts"] - start
            start = None
    return held


def test_retry_after_a_failure_keeps_attempt_one_on_record_and_in_the_cost(
        runs: Path, tmp_path: Path, ui: Ui) -> None:
    broken = tmp_path / "broken"
    broken.write_text("the data is broken")
    argv = [sys.executable, str(SCRIPTS / "train.py"), "--steps", "10",
            "--fail-if", str(broken)]
    ui.post("/api/jobs", {"kind": "command", "argv": argv, "name": "flaky",
                          "max_attempts": 1}, status=201)
    first = ui.ended("flaky")
    assert (first["run"]["status"], first["run"]["reason_code"]) == ("FAILED", "failed")
    assert first["run"]["reason"] == CATALOGUE["failed"].sentence

    broken.unlink()  # the user fixes the cause, then retries
    answer = ui.post("/api/runs/flaky/retry", {})
    assert answer["status"] == "QUEUED" and answer["run"]["attempt"] == 2
    second = ui.ended("flaky")
    assert (second["run"]["status"], second["run"]["attempt"]) == ("SUCCEEDED", 2)

    run_dir = runs / "flaky"
    kept = fmt.attempt_dir(run_dir, 1)
    old = (kept / fmt.METRICS).read_text().splitlines()
    assert len(old) == 10 and all('"attempt":1' in line for line in old)
    assert "runwatch_e2e_secret" in (kept / fmt.OUTPUT_LOG).read_text()
    queued = [e for e in events(run_dir) if e["phase"] == "QUEUED"]
    assert [e["attempt"] for e in queued] == [1, 2]
    history = ui.get("/api/runs/flaky/history?key=attempt")
    values = [row["values"]["attempt"] for row in history["rows"]]
    assert values == [2] * 10, "the view shows the new attempt's metrics only"

    held = held_seconds(run_dir)
    assert sorted(held) == [1, 2]
    cost = second["cost"]
    assert cost["device_seconds"] == pytest.approx(held[1] + held[2], abs=0.05)
    assert [a["attempt"] for a in second["attempts"]] == [1, 2]
    assert second["attempts"][0]["device_seconds"] == pytest.approx(held[1], abs=0.05)


# The demo on a model and data set small enough for a test (the demo's own settings train
# for minutes); every recipe gets the same model, as GRPO and DPO start from SFT's weights.
# GRPO trains for some seconds (400 steps: active about 7 s here, DPO queued 0.9 s after
# it): the demo submits DPO with a second `runwatch submit`, a process of its own, and on a
# loaded machine (a fresh-clone CI run) its start took 6.5 s, longer than a 2-step GRPO
# job's whole life (queued to succeeded in 6.1 s), so the two never overlapped. The order of
# the commands is checked apart, without a clock.
MODEL = ["n_layer=1", "n_head=2", "d_model=32", "max_seq_length=48", "wandb_project=None"]
SUPERVISED = [*MODEL, "batch_size=8", "n_train=64", "n_val=8", "cache_dir=None",
              "max_steps=2", "val_interval=1"]
GRPO = [*MODEL, "max_steps=400", "batch_size=2", "group_size=3", "n_train=400", "n_val=4",
        "validation_interval=200", "export_samples=false", "reward=digit_overlap",
        "temperature=1.0", "max_sample_tokens=6"]


def test_the_demo_submits_dpo_before_it_waits_for_grpo(tmp_path: Path) -> None:
    # The order of the demo's commands, which the live test below sees through the queue.
    kinds = [(step.kind, step.name.split("-")[1]) for step in demo.demo_steps(tmp_path, "x")]
    assert kinds.index(("submit", "dpo")) < kinds.index(("wait", "grpo"))


@pytest.mark.slow
def test_the_demo_queues_its_recipes_and_shows_one_running_while_one_waits(
        runs: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    for name, args in (("SFT_ARGS", SUPERVISED), ("GRPO_ARGS", GRPO), ("DPO_ARGS", SUPERVISED)):
        monkeypatch.setattr(demo, name, args)
    port = free_port()
    seen: set[tuple[str, str]] = set()
    done = threading.Event()

    def watch() -> None:  # what the web app's run list shows, as it changes
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as api:
            while not done.is_set():
                with contextlib.suppress(httpx.HTTPError):
                    status = {r["name"].split("-")[1]: r["status"]
                              for r in api.get("/api/runs").json()["runs"]}
                    seen.add((status.get("grpo", "-"), status.get("dpo", "-")))
                done.wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        demo.demo_cmd(directory=runs, port=port, serve=True, keep_serving=False)
    finally:
        done.set()
        watcher.join(timeout=10)
        kill_jobs(runs)
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err, "the demo's terminal shows no traceback (ui's included)"
    names = sorted(p.name for p in runs.iterdir() if p.name.startswith("demo-"))
    assert [n.split("-")[1] for n in names] == ["dpo", "grpo", "sft"]
    for name in names:
        assert phases(runs / name)[0] == "QUEUED" and phases(runs / name)[-1] == "SUCCEEDED"
        assert (fmt.attempt_dir(runs / name, 1) / fmt.OUTPUT_LOG).exists(), "a worker ran it"
        assert f"{runs / name}  SUCCEEDED  health: " in out
    assert any(grpo in fmt.ACTIVE_PHASES and dpo == "QUEUED" for grpo, dpo in seen), seen
    assert f"runwatch runs get {names[1]} --dir {runs}" in out
